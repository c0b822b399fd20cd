import type { HttpRequest, HttpResponse } from 'uWebSockets.js'
import type { ErrorCode } from '../errors'
import type { Metrics } from '../telemetry/metrics'

/**
 * The checks the gateway adds in front of its handlers, where uWebSockets.js (this build's HTTP parser)
 * lets a request through that HTTP/1.1 or RFC 6455 says to refuse. What uWS refuses before any handler
 * runs (HTTP/1.0, no Host, unknown methods, a Content-Length it cannot parse) is out of reach here; the
 * docs/reference/endpoints.md ("The front door") says what the client sees then.
 */

/** Why the front door refused or dropped something: the `reason` label of front_door_refusals_total. */
export const FRONT_DOOR_REASONS = [
  'content_length',
  'host',
  'upgrade',
  'upgrade_version',
  'upgrade_key',
  'aborted_before_dispatch'
] as const
export type FrontDoorReason = (typeof FRONT_DOOR_REASONS)[number]

export function countRefusal(metrics: Metrics, reason: FrontDoorReason): void {
  metrics.frontDoorRefusals.inc({ reason })
}

// One scan of the request's headers (req.forEach) with module-level state instead of a closure per request:
// uWS calls handlers one at a time on the event loop, and the scan finishes before headerProblem returns.
const LENGTH = /^\d{1,9}$/
let lengths = 0
let badLength = false
let hosts = 0
/** The header names and values of the last scan, in bytes as header-limit.ts counts them. */
let headBytes = 0

/** The headers a text request reads, as `req.getHeader` gives them (the first field of a name; '' when absent). */
export interface ScannedHeaders {
  contentType: string
  authorization: string
  contentLength: string
  requestId: string
  traceparent: string
  connection: string
}

/** Filled by the scan (null: not seen yet, so the first field of a name wins, as with getHeader). */
const seen: { [K in keyof ScannedHeaders]: string | null } = {
  contentType: null,
  authorization: null,
  contentLength: null,
  requestId: null,
  traceparent: null,
  connection: null
}

function visit(key: string, value: string): void {
  headBytes += key.length + value.length + 4
  switch (key) {
    case 'content-length':
      lengths++
      if (!LENGTH.test(value)) badLength = true
      seen.contentLength ??= value
      return
    case 'host':
      hosts++
      return
    case 'content-type':
      seen.contentType ??= value
      return
    case 'authorization':
      seen.authorization ??= value
      return
    case 'x-request-id':
      seen.requestId ??= value
      return
    case 'traceparent':
      seen.traceparent ??= value
      return
    case 'connection':
      seen.connection ??= value
      return
  }
}

/** The header bytes headerProblem's scan counted (header-limit.ts's count without a second pass). */
export function scannedHeaderBytes(): number {
  return headBytes
}

/**
 * The headers headerProblem's scan saw, read in the same pass (no `getHeader` call into uWS per header).
 * MUST be read right after headerProblem, in the same handler: the next request's scan overwrites them.
 */
export function scannedHeaders(): ScannedHeaders {
  return {
    contentType: seen.contentType ?? '',
    authorization: seen.authorization ?? '',
    contentLength: seen.contentLength ?? '',
    requestId: seen.requestId ?? '',
    traceparent: seen.traceparent ?? '',
    connection: seen.connection ?? ''
  }
}

/**
 * RFC 9112 6.3 and 3.2: a Content-Length that is not 1 to 9 digits, more than one Content-Length field,
 * or more than one Host field makes the request unusable: 400 and close. uWS passes a repeated field
 * through (its getHeader answers the first), and calls the handler before it parses Content-Length
 * (it then closes the connection itself, so the 400 for a malformed length does not reach the client).
 * Returns the problem in words, or null.
 */
export function headerProblem(req: HttpRequest, metrics: Metrics): string | null {
  lengths = 0
  badLength = false
  hosts = 0
  headBytes = 0
  seen.contentType = seen.authorization = seen.contentLength = null
  seen.requestId = seen.traceparent = seen.connection = null
  req.forEach(visit)
  if (badLength || lengths > 1) {
    countRefusal(metrics, 'content_length')
    return lengths > 1 ? 'more than one content-length' : 'content-length is not a decimal length'
  }
  if (hosts > 1) {
    countRefusal(metrics, 'host')
    return 'more than one host'
  }
  return null
}

const CLOSE_TOKEN = /(?:^|,)[ \t]*close[ \t]*(?:,|$)/i

/** The client asked (`connection: close`) for the connection to end after this answer; uWS here does not honour it. */
export function wantsClose(req: HttpRequest): boolean {
  return connectionCloses(req.getHeader('connection'))
}

/** A `connection` header value that names `close`. */
export function connectionCloses(c: string): boolean {
  return c !== '' && CLOSE_TOKEN.test(c)
}

const WEBSOCKET_TOKEN = /(?:^|,)[ \t]*websocket[ \t]*(?:,|$)/i
const UPGRADE_TOKEN = /(?:^|,)[ \t]*upgrade[ \t]*(?:,|$)/i
/** 16 bytes in base64 are exactly 22 characters of the alphabet and `==`. */
const KEY_16_BYTES = /^[A-Za-z0-9+/]{21}[AQgw]==$/

export interface UpgradeRefusal {
  code: Extract<ErrorCode, 'UPGRADE_INVALID' | 'UPGRADE_VERSION'>
  detail: string
  headers: Record<string, string>
}

const VERSION_HEADERS = { 'sec-websocket-version': '13' }

/**
 * RFC 6455 4.2.1 for an upgrade request (uWS checks only that a 24-character key is present): `Upgrade`
 * names websocket, `Connection` names upgrade, `Sec-WebSocket-Version` is 13 (else 426 with the version
 * the gateway speaks), and `Sec-WebSocket-Key` is base64 of 16 bytes. Null when the upgrade may proceed.
 */
export function upgradeProblem(req: HttpRequest, metrics: Metrics): UpgradeRefusal | null {
  if (!WEBSOCKET_TOKEN.test(req.getHeader('upgrade'))) {
    countRefusal(metrics, 'upgrade')
    return { code: 'UPGRADE_INVALID', detail: 'upgrade must name websocket', headers: {} }
  }
  if (!UPGRADE_TOKEN.test(req.getHeader('connection'))) {
    countRefusal(metrics, 'upgrade')
    return { code: 'UPGRADE_INVALID', detail: 'connection must name upgrade', headers: {} }
  }
  if (req.getHeader('sec-websocket-version') !== '13') {
    countRefusal(metrics, 'upgrade_version')
    return { code: 'UPGRADE_VERSION', detail: 'sec-websocket-version must be 13', headers: VERSION_HEADERS }
  }
  if (!KEY_16_BYTES.test(req.getHeader('sec-websocket-key'))) {
    countRefusal(metrics, 'upgrade_key')
    return { code: 'UPGRADE_INVALID', detail: 'sec-websocket-key must be base64 of 16 bytes', headers: {} }
  }
  return null
}

/**
 * Work that must not start inside uWS's parse of the data that carried it. uWS parses every request of
 * one read in one pass, and when a request arrives while an earlier one of the same connection is still
 * unanswered (pipelining) it closes the connection and aborts the earlier one: had that one already been
 * sent to a vendor, the platform would get no answer and retry it. Deferred to after the read, an
 * aborted request is dropped before it reaches the vendor. One setImmediate per event-loop turn runs
 * everything that became ready, in arrival order; the queue holds the caller's own callback and argument
 * (no closure per request).
 */
let fns: ((arg: never) => void)[] = []
let args: unknown[] = []
let scheduled = false

function flush(): void {
  const f = fns
  const a = args
  fns = []
  args = []
  scheduled = false
  for (let i = 0; i < f.length; i++) (f[i] as (arg: unknown) => void)(a[i])
}

export function afterParse<A>(fn: (arg: A) => void, arg: A): void {
  fns.push(fn as (arg: never) => void)
  args.push(arg)
  if (!scheduled) {
    scheduled = true
    setImmediate(flush)
  }
}

/**
 * Answer and close, after the parse pass. uWS parses on after an answer that closes the connection
 * (`res.end(body, true)`) and serves a request pipelined behind it in the same read, then keeps the
 * connection open. Deferred, the answer is still pending when such a request is parsed, and uWS then
 * closes the connection with nothing served after it (and this answer dropped). `write` runs only if the
 * response was not aborted. Only the closing answers take this path (refusals and `connection: close`).
 */
export function closeAfterParse(res: HttpResponse, write: () => void): void {
  let aborted = false
  res.onAborted(() => {
    aborted = true
  })
  afterParse(() => {
    if (!aborted) write()
  }, undefined)
}

/**
 * How far past text.maxBodyBytes a declared body is read (and thrown away) before the 413, so the
 * connection can then be closed without resetting a client that is still sending. Past it, the 413 goes
 * at once with `connection: close` and the connection stays to the client to close (uWS offers no
 * lingering close, and an HttpResponse cannot be closed after its answer).
 */
export const DRAIN_BYTES = 64 * 1024
