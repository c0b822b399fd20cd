import type { HttpResponse } from 'uWebSockets.js'
import { CODES, GatewayError, type ErrorCode } from '../errors'
import type { Problem } from '../validate/compile'

export const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  202: 'Accepted',
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
  426: 'Upgrade Required',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout'
}

/** `200 OK` and the like, made once (not a template string per response). */
const STATUS_LINE: Record<number, string> = Object.fromEntries(
  Object.entries(STATUS_TEXT).map(([code, text]) => [code, `${code} ${text}`])
)

/**
 * Write a whole response in one corked write. The caller has checked the response is not aborted.
 * `close`: say `connection: close` and close the connection once the answer is written (see closeAfterParse).
 */
export function send(
  res: HttpResponse,
  status: number,
  contentType: string,
  body: string,
  headers: Record<string, string> = {},
  close = false
): void {
  res.cork(() => {
    res.writeStatus(STATUS_LINE[status] ?? `${status} `)
    res.writeHeader('content-type', contentType)
    for (const k in headers) res.writeHeader(k, headers[k])
    res.end(body, close) // with close, uWS writes `Connection: close` itself
  })
}

/**
 * Answer once `work` settles, unless the client gave up first: uWebSockets.js frees an aborted response, and
 * writing to it throws. `answer` and `failed` (default: send nothing) run only on a response still open.
 */
export function answerWhenSettled<T>(
  res: HttpResponse,
  work: Promise<T>,
  answer: (value: T) => void,
  failed: (err: unknown) => void = () => {}
): void {
  let aborted = false
  res.onAborted(() => {
    aborted = true
  })
  work.then(
    value => {
      if (!aborted) answer(value)
    },
    (err: unknown) => {
      if (!aborted) failed(err)
    }
  )
}

export function sendJson(res: HttpResponse, status: number, value: unknown): void {
  send(res, status, 'application/json', JSON.stringify(value))
}

/** RFC 9457 problem details for a catalogued error: stable code, pointers of bad fields, never values. */
export function problemBody(
  error: GatewayError,
  problems: readonly Problem[] = [],
  extra: Record<string, unknown> = {}
): string {
  const c = CODES[error.code]
  const body: Record<string, unknown> = {
    type: `urn:assist-gateway:error:${error.code}`,
    title: c.text,
    status: c.status,
    code: error.code,
    detail: error.message,
    ...extra
  }
  if (error.pointers.length > 0) body.pointers = error.pointers
  if (problems.length > 0) body.invalidParams = problems.map(p => ({ pointer: p.pointer, reason: p.message }))
  return JSON.stringify(body)
}

export function sendProblem(
  res: HttpResponse,
  error: GatewayError | ErrorCode,
  problems: readonly Problem[] = [],
  headers: Record<string, string> = {},
  close = false
): void {
  const e = typeof error === 'string' ? new GatewayError(error) : error
  send(res, CODES[e.code].status, 'application/problem+json', problemBody(e, problems), headers, close)
}

/**
 * Read a request body up to `limit` bytes. Past the limit the callback gets null at once and the rest is
 * not buffered. The caller MUST have registered onAborted first (uWS rule); `aborted()` tells whether it fired.
 */
export function readBody(res: HttpResponse, limit: number, done: (body: Buffer | null) => void): void {
  const parts: Buffer[] = []
  let size = 0
  let over = false
  res.onData((chunk, isLast) => {
    if (over) return
    size += chunk.byteLength
    if (size > limit) {
      over = true
      done(null)
      return
    }
    // MUST copy: uWS neuters the chunk when this callback returns.
    parts.push(Buffer.from(new Uint8Array(chunk)))
    if (isLast) done(parts.length === 1 ? parts[0] : Buffer.concat(parts, size))
  })
}
