/**
 * Every failure a user can see: a stable code, a human text, the HTTP status it maps to, the
 * WebSocket close code it maps to, and a short flag for access logs and bounded metric labels.
 * This module imports nothing. `tests/unit/errors.test.ts` pins the catalogue; docs/reference/errors.md (the
 * failure table) is generated from it by `npm run docs`.
 */
export const CODES = {
  // platform credentials
  AUTH_MISSING: { status: 401, close: 1008, flag: 'AM', text: 'credentials missing' },
  AUTH_INVALID: { status: 401, close: 1008, flag: 'AI', text: 'credentials not accepted' },
  TOO_MANY_FAILURES: {
    status: 429,
    close: 1008,
    flag: 'TF',
    text: 'too many failed authentications from this address; retry later'
  },
  CALLER_MISMATCH: {
    status: 403,
    close: 1008,
    flag: 'CM',
    text: 'this leg is live for another caller: only the caller that opened it may take it over'
  },
  TOKEN_REVOKED: {
    status: 401,
    close: 1008,
    flag: 'TR',
    text: 'the token this leg was opened with was revoked'
  },
  RELAY_INVALID: {
    status: 403,
    close: 1008,
    flag: 'RI',
    text: 'relay refused: not signed by this fleet, expired, used before, meant for another process, or for another session'
  },
  ADMIN_UNAUTHORIZED: {
    status: 401,
    close: 1008,
    flag: 'AU',
    text: 'the admin API needs Authorization: Bearer <admin.token>'
  },
  ADMIN_FORBIDDEN: {
    status: 403,
    close: 1008,
    flag: 'AF',
    text: 'the admin API without a token takes only what no web page can send'
  },
  // platform messages
  MESSAGE_NOT_JSON: { status: 400, close: 1007, flag: 'NJ', text: 'message is not valid JSON' },
  MESSAGE_INVALID: { status: 400, close: 1007, flag: 'MI', text: 'message does not match the interface schema' },
  FIRST_FRAME_NOT_TEXT: {
    status: 400,
    close: 1007,
    flag: 'FB',
    text: 'the first frame must be a text frame holding the init message'
  },
  MESSAGE_TOO_LARGE: { status: 413, close: 1009, flag: 'TL', text: 'message too large' },
  HEADERS_TOO_LARGE: { status: 431, close: 1009, flag: 'HL', text: 'request headers too large' },
  HANDSHAKE_TIMEOUT: { status: 408, close: 1008, flag: 'HT', text: 'no init message within the handshake timeout' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, close: 1003, flag: 'MT', text: 'content type must be application/json' },
  ROUTE_NOT_FOUND: { status: 404, close: 1008, flag: 'NR', text: 'no such route' },
  NOT_FOUND: { status: 404, close: 1008, flag: 'NF', text: 'not found' },
  METHOD_NOT_ALLOWED: { status: 405, close: 1008, flag: 'MA', text: 'method not allowed' },
  // the admin API
  QUERY_INVALID: { status: 400, close: 1008, flag: 'QI', text: 'a query parameter is missing or not valid' },
  // the front door (server/front-door.ts)
  BAD_REQUEST: { status: 400, close: 1002, flag: 'BR', text: 'the request is not valid HTTP/1.1' },
  UPGRADE_INVALID: {
    status: 400,
    close: 1002,
    flag: 'UI',
    text: 'the upgrade request is not a valid RFC 6455 handshake'
  },
  UPGRADE_VERSION: { status: 426, close: 1002, flag: 'UV', text: 'only WebSocket version 13 is supported' },
  // upstream (vendor) side
  NO_HEALTHY_UPSTREAM: { status: 503, close: 1013, flag: 'UH', text: 'no healthy upstream for this route' },
  UPSTREAM_UNREACHABLE: {
    status: 503,
    close: 1013,
    flag: 'UF',
    text: 'no upstream replica of this route could be reached'
  },
  UPSTREAM_NOT_READY: { status: 504, close: 1013, flag: 'UR', text: 'the vendor session did not become ready in time' },
  UPSTREAM_REFUSED: { status: 502, close: 1011, flag: 'UX', text: 'the vendor refused the session' },
  UPSTREAM_CLOSED: { status: 502, close: 1011, flag: 'UC', text: 'the vendor session ended during the call' },
  UPSTREAM_TIMEOUT: { status: 504, close: 1011, flag: 'UT', text: 'upstream did not answer in time' },
  UPSTREAM_BAD_ANSWER: { status: 502, close: 1011, flag: 'UB', text: 'upstream answer could not be used' },
  UPSTREAM_ANSWER_NOT_JSON: {
    status: 502,
    close: 1011,
    flag: 'UJ',
    text: 'the vendor answered in a form the mapping does not read (not JSON: an event stream, a page, nothing)'
  },
  // gateway resources
  HOLD_BUFFER_OVERFLOW: {
    status: 503,
    close: 1013,
    flag: 'HO',
    text: 'too much audio arrived before the vendor session was ready'
  },
  BACKPRESSURE_OVERFLOW: { status: 503, close: 1013, flag: 'BO', text: 'the vendor is not reading audio fast enough' },
  QUEUE_FULL: { status: 503, close: 1013, flag: 'QF', text: 'delivery queue is full' },
  MAPPING_FAILED: { status: 500, close: 1011, flag: 'MF', text: 'the vendor mapping failed on this message' },
  LEG_REPLACED: {
    status: 409,
    close: 1008,
    flag: 'LR',
    text: 'a newer connection of the same leg took over its vendor session'
  },
  LEG_LIMIT: { status: 429, close: 1013, flag: 'LL', text: 'too many live legs for this route or client' },
  QUOTA_EXCEEDED: {
    status: 429,
    close: 1013,
    flag: 'QX',
    text: "over the tenant's or the route's quota (live legs, legs per second or utterances per second); retry later"
  },
  SHUTTING_DOWN: { status: 503, close: 1012, flag: 'SD', text: 'gateway is restarting; reconnect' },
  INTERNAL: { status: 500, close: 1011, flag: 'IE', text: 'internal error' }
} as const satisfies Record<string, { status: number; close: number; flag: string; text: string }>

export type ErrorCode = keyof typeof CODES

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
