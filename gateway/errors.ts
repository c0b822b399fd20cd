// Every failure a user can see, as one catalogue: this module imports nothing. `tests/unit/errors.test.ts` pins
// it; docs/reference/errors.md (the failure table) is generated from it by `npm run docs`.

/** A code's row in the catalogue: its HTTP status, WebSocket close code and flag (see `CodeInfo`); its text is in TEXTS. */
type CodeRow = readonly [status: number, close: number, flag: string]

// biome-ignore format: a row per code, the columns of CodeRow
const ROWS = {
  // platform credentials
  AUTH_MISSING:             [401, 1008, 'AM'],
  AUTH_INVALID:             [401, 1008, 'AI'],
  TOO_MANY_FAILURES:        [429, 1008, 'TF'],
  CALLER_MISMATCH:          [403, 1008, 'CM'],
  TOKEN_REVOKED:            [401, 1008, 'TR'],
  RELAY_INVALID:            [403, 1008, 'RI'],
  ADMIN_UNAUTHORIZED:       [401, 1008, 'AU'],
  ADMIN_FORBIDDEN:          [403, 1008, 'AF'],
  // platform messages
  MESSAGE_NOT_JSON:         [400, 1007, 'NJ'],
  MESSAGE_INVALID:          [400, 1007, 'MI'],
  FIRST_FRAME_NOT_TEXT:     [400, 1007, 'FB'],
  MESSAGE_TOO_LARGE:        [413, 1009, 'TL'],
  HEADERS_TOO_LARGE:        [431, 1009, 'HL'],
  HANDSHAKE_TIMEOUT:        [408, 1008, 'HT'],
  UNSUPPORTED_MEDIA_TYPE:   [415, 1003, 'MT'],
  ROUTE_NOT_FOUND:          [404, 1008, 'NR'],
  NOT_FOUND:                [404, 1008, 'NF'],
  METHOD_NOT_ALLOWED:       [405, 1008, 'MA'],
  // the admin API
  QUERY_INVALID:            [400, 1008, 'QI'],
  // the front door (server/front-door.ts)
  BAD_REQUEST:              [400, 1002, 'BR'],
  UPGRADE_INVALID:          [400, 1002, 'UI'],
  UPGRADE_VERSION:          [426, 1002, 'UV'],
  // upstream (vendor) side
  NO_HEALTHY_UPSTREAM:      [503, 1013, 'UH'],
  UPSTREAM_UNREACHABLE:     [503, 1013, 'UF'],
  UPSTREAM_NOT_READY:       [504, 1013, 'UR'],
  UPSTREAM_REFUSED:         [502, 1011, 'UX'],
  UPSTREAM_CLOSED:          [502, 1011, 'UC'],
  UPSTREAM_TIMEOUT:         [504, 1011, 'UT'],
  UPSTREAM_BAD_ANSWER:      [502, 1011, 'UB'],
  UPSTREAM_ANSWER_NOT_JSON: [502, 1011, 'UJ'],
  // gateway resources
  HOLD_BUFFER_OVERFLOW:     [503, 1013, 'HO'],
  BACKPRESSURE_OVERFLOW:    [503, 1013, 'BO'],
  QUEUE_FULL:               [503, 1013, 'QF'],
  MAPPING_FAILED:           [500, 1011, 'MF'],
  LEG_REPLACED:             [409, 1008, 'LR'],
  LEG_LIMIT:                [429, 1013, 'LL'],
  QUOTA_EXCEEDED:           [429, 1013, 'QX'],
  SHUTTING_DOWN:            [503, 1012, 'SD'],
  INTERNAL:                 [500, 1011, 'IE']
} as const satisfies Record<string, CodeRow>

export type ErrorCode = keyof typeof ROWS

/** What each code says to a person: its problem+json title, its error message (before any detail) and the failure table's text. */
const TEXTS: { readonly [C in ErrorCode]: string } = {
  // platform credentials
  AUTH_MISSING: 'credentials missing',
  AUTH_INVALID: 'credentials not accepted',
  TOO_MANY_FAILURES: 'too many failed authentications from this address; retry later',
  CALLER_MISMATCH: 'this leg is live for another caller: only the caller that opened it may take it over',
  TOKEN_REVOKED: 'the token this leg was opened with was revoked',
  RELAY_INVALID:
    'relay refused: not signed by this fleet, expired, used before, meant for another process, or for another session',
  ADMIN_UNAUTHORIZED: 'the admin API needs Authorization: Bearer <admin.token>',
  ADMIN_FORBIDDEN: 'the admin API without a token takes only what no web page can send',
  // platform messages
  MESSAGE_NOT_JSON: 'message is not valid JSON',
  MESSAGE_INVALID: 'message does not match the interface schema',
  FIRST_FRAME_NOT_TEXT: 'the first frame must be a text frame holding the init message',
  MESSAGE_TOO_LARGE: 'message too large',
  HEADERS_TOO_LARGE: 'request headers too large',
  HANDSHAKE_TIMEOUT: 'no init message within the handshake timeout',
  UNSUPPORTED_MEDIA_TYPE: 'content type must be application/json',
  ROUTE_NOT_FOUND: 'no such route',
  NOT_FOUND: 'not found',
  METHOD_NOT_ALLOWED: 'method not allowed',
  // the admin API
  QUERY_INVALID: 'a query parameter is missing or not valid',
  // the front door (server/front-door.ts)
  BAD_REQUEST: 'the request is not valid HTTP/1.1',
  UPGRADE_INVALID: 'the upgrade request is not a valid RFC 6455 handshake',
  UPGRADE_VERSION: 'only WebSocket version 13 is supported',
  // upstream (vendor) side
  NO_HEALTHY_UPSTREAM: 'no healthy upstream for this route',
  UPSTREAM_UNREACHABLE: 'no upstream replica of this route could be reached',
  UPSTREAM_NOT_READY: 'the vendor session did not become ready in time',
  UPSTREAM_REFUSED: 'the vendor refused the session',
  UPSTREAM_CLOSED: 'the vendor session ended during the call',
  UPSTREAM_TIMEOUT: 'upstream did not answer in time',
  UPSTREAM_BAD_ANSWER: 'upstream answer could not be used',
  UPSTREAM_ANSWER_NOT_JSON:
    'the vendor answered in a form the mapping does not read (not JSON: an event stream, a page, nothing)',
  // gateway resources
  HOLD_BUFFER_OVERFLOW: 'too much audio arrived before the vendor session was ready',
  BACKPRESSURE_OVERFLOW: 'the vendor is not reading audio fast enough',
  QUEUE_FULL: 'delivery queue is full',
  MAPPING_FAILED: 'the vendor mapping failed on this message',
  LEG_REPLACED: 'a newer connection of the same leg took over its vendor session',
  LEG_LIMIT: 'too many live legs for this route or client',
  QUOTA_EXCEEDED:
    "over the tenant's or the route's quota (live legs, legs per second or utterances per second); retry later",
  SHUTTING_DOWN: 'gateway is restarting; reconnect',
  INTERNAL: 'internal error'
}

/**
 * What a code maps to: the HTTP status, the WebSocket close code, a short flag for access logs and bounded
 * metric labels, and a human text.
 */
export interface CodeInfo {
  readonly status: number
  readonly close: number
  readonly flag: string
  readonly text: string
}

/** Every failure a user can see: a stable code and what it maps to, from the rows above. */
export const CODES: { readonly [C in ErrorCode]: CodeInfo } = Object.fromEntries(
  Object.entries(ROWS).map(([code, [status, close, flag]]) => [
    code,
    { status, close, flag, text: TEXTS[code as ErrorCode] }
  ])
) as { readonly [C in ErrorCode]: CodeInfo }

/** A user-visible failure. `pointers` are JSON pointers of bad fields, never their values. */
export class GatewayError extends Error {
  readonly code: ErrorCode
  readonly pointers: readonly string[]
  readonly detail: string | undefined
  constructor(code: ErrorCode, opts: { pointers?: string[]; detail?: string; cause?: unknown } = {}) {
    super(opts.detail === undefined ? CODES[code].text : `${CODES[code].text}: ${opts.detail}`, { cause: opts.cause })
    this.name = 'GatewayError'
    this.code = code
    this.pointers = opts.pointers ?? []
    this.detail = opts.detail
  }
}

/** Log 5xx-class failures at error and 4xx-class at info (the gateway's problem vs the caller's). */
export function logLevelOf(code: ErrorCode): 'error' | 'info' {
  return CODES[code].status >= 500 ? 'error' : 'info'
}

/**
 * A listener that cannot bind its port, in the one wording the README promises (`cannot listen on HOST:PORT
 * (in use by another process)`): the gateway's listeners and the vendor emulators alike. `code`: the errno.
 */
export function cannotListen(host: string, port: number, code: string | undefined): Error {
  const why = code === 'EADDRINUSE' ? 'in use by another process' : code === 'EACCES' ? 'not permitted' : code
  return new Error(`cannot listen on ${host}:${port} (${why ?? 'unknown error'})`)
}

/** One problem of a config or mapping file: where it is (JSON pointer; line and column when known) and what. */
export interface ConfigProblem {
  file: string
  pointer: string
  message: string
  line?: number
  col?: number
}

/** `file:line:col: /pointer: message`, the form editors and CI annotate (`file: /pointer: message` with no position). */
export function formatProblem(p: ConfigProblem): string {
  const at = p.line !== undefined ? `:${p.line}:${p.col ?? 1}` : ''
  return `${p.file}${at}: ${p.pointer || '/'}: ${p.message}`
}

/** Raised by configuration and mapping loading; rendered as `file:line:col: /pointer: message` lines. */
export class ConfigError extends Error {
  readonly problems: readonly ConfigProblem[]
  constructor(problems: ConfigProblem[]) {
    super(problems.map(formatProblem).join('\n'))
    this.name = 'ConfigError'
    this.problems = problems
  }
}
