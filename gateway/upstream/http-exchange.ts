/**
 * One exchange with a replica over undici's dispatch API: the whole answer gathered, the call's
 * deadline, undici's errors translated once.
 */
import type { Dispatcher } from 'undici'
import type { ErrorCode } from '../errors'

/** Bounded values of `upstream_requests_total{result}`. */
export type UpstreamResult =
  | 'ok'
  | 'status_4xx'
  | 'status_5xx'
  | 'timeout'
  | 'connect_failed'
  | 'bad_answer'
  | 'no_replica'

const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
  'UND_ERR_CONNECT'
])
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])

/** The deadline of one call; it aborts whichever exchange is running when it fires. */
export interface Deadline {
  timedOut: boolean
  /** What the deadline cuts short when it passes: the exchange in flight, or a wait before a retry. */
  current: { expire(): void } | null
}

export interface RawAnswer {
  status: number
  headers: Record<string, string>
  chunks: Buffer[]
  error: Error | null
  timedOut: boolean
}

const TIMED_OUT = Object.assign(new Error('text.timeoutSeconds passed'), { code: 'GATEWAY_DEADLINE' })

/** An undici dispatch handler that gathers one whole answer; settles exactly once. */
export class Exchange implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | null = null
  private settled = false
  private status = 0
  private headers: Record<string, string> = {}
  private readonly chunks: Buffer[] = []
  /** Set by the promise's executor, which runs at once (the next field's initializer). */
  private resolve: (a: RawAnswer) => void = () => {}
  /** Settles once, with the whole answer or the error (never rejects). */
  readonly answer = new Promise<RawAnswer>(resolve => {
    this.resolve = resolve
  })

  onRequestStart(controller: Dispatcher.DispatchController): void {
    if (this.settled) controller.abort(TIMED_OUT)
    else this.controller = controller
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>
  ): void {
    this.status = statusCode
    this.headers = flatHeaders(headers)
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.chunks.push(chunk)
  }

  onResponseEnd(): void {
    this.settle(null, false)
  }

  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    this.settle(error, false)
  }

  /** The deadline passed: answer now, whether or not undici has started this request. */
  expire(): void {
    if (this.settled) return
    this.settle(TIMED_OUT, true)
    this.controller?.abort(TIMED_OUT)
  }

  private settle(error: Error | null, timedOut: boolean): void {
    if (this.settled) return
    this.settled = true
    this.resolve({ status: this.status, headers: this.headers, chunks: this.chunks, error, timedOut })
  }
}

/** undici / socket errors → our result label, error code and a short detail (never a URL or a header). */
export function translate(err: unknown, timedOut: boolean): [UpstreamResult, ErrorCode, string] {
  const code = (err as { code?: string }).code ?? ''
  if (timedOut) return ['timeout', 'UPSTREAM_TIMEOUT', 'no whole answer within text.timeoutSeconds']
  if (TIMEOUT_CODES.has(code))
    return [
      'timeout',
      'UPSTREAM_TIMEOUT',
      code === 'UND_ERR_HEADERS_TIMEOUT'
        ? 'no answer within text.headersTimeoutSeconds'
        : 'the answer stalled past text.bodyTimeoutSeconds'
    ]
  if (CONNECT_CODES.has(code) || /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code))
    return ['connect_failed', 'UPSTREAM_UNREACHABLE', `cannot connect (${code})`]
  if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE')
    return ['bad_answer', 'UPSTREAM_BAD_ANSWER', 'the answer is larger than text.maxResponseBytes']
  return [
    'bad_answer',
    'UPSTREAM_BAD_ANSWER',
    `the exchange failed (${code === '' ? ((err as Error).name ?? 'error') : code})`
  ]
}

function flatHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const k in h) {
    const v = h[k]
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v
  }
  return out
}
