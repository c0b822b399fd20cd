import { Pool } from 'undici'
import type { TextSettings } from '../config/types'
import { GatewayError, type ErrorCode } from '../errors'
import type { Metrics } from '../telemetry/metrics'
import type { Replica } from './pool'

/** Bounded values of `upstream_requests_total{result}`. */
export type UpstreamResult = 'ok' | 'status_4xx' | 'status_5xx' | 'timeout' | 'connect_failed' | 'bad_answer' | 'no_replica'

/** A request to send, as the mapping built it; `path` is relative to the replica's text URL. */
export interface OutgoingRequest {
  method: 'POST' | 'PUT' | 'PATCH'
  path: string | null
  headers: Record<string, string>
  body: string | null
}

/** A vendor's 2xx answer: body parsed when it says JSON, else its text (null when empty). */
export interface Answer { status: number; headers: Record<string, string>; body: unknown }

export type CallOutcome =
  | { ok: true; replica: Replica; answer: Answer }
  /** `result` null: no call was made (the request could not be built; `error` says why). */
  | { ok: false; replica: Replica | null; error: GatewayError; result: UpstreamResult | null; vendorStatus?: number }

/** What one replica needs: its keep-alive Pool, where its text URL points, cached metric children. */
interface Lane {
  readonly pool: Pool
  readonly basePath: string
  readonly search: string
  readonly duration: { observe: (v: number) => void }
  readonly results: Map<UpstreamResult, { inc: () => void }>
}

/** Failures that mean nothing reached the replica: safe to send the same request elsewhere. */
const CONNECT_CODES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'UND_ERR_CONNECT'])
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT'])

/**
 * The text hook's HTTP calls to one route's replicas, the only undici user. One keep-alive Pool per
 * replica (connections, connect/headers/body timeouts and the answer size limit from `text` settings).
 * Replica choice: round-robin over the replicas that have a `text` URL and are healthy; when the chosen
 * one cannot be connected to, one other replica is tried (nothing reached the first). One deadline,
 * `timeoutSeconds`, covers the whole exchange. undici's error codes are translated here, once.
 */
export class TextUpstream {
  private readonly lanes = new Map<Replica, Lane>()
  private cursor = 0
  private closed = false
  private readonly noReplica: { inc: () => void }

  constructor (
    private readonly route: string,
    private readonly replicas: readonly Replica[],
    private readonly settings: TextSettings,
    private readonly metrics: Metrics
  ) {
    this.noReplica = metrics.upstreamRequests.labels(route, '', 'no_replica')
  }

  /**
   * Send one request. `build` maps it for the replica chosen (the credential may differ per replica);
   * a GatewayError from it ends the call before anything is sent.
   */
  async call (build: (replica: Replica) => Promise<OutgoingRequest | GatewayError>): Promise<CallOutcome> {
    if (this.closed) return { ok: false, replica: null, error: new GatewayError('SHUTTING_DOWN'), result: null }
    let replica = this.pick(null)
    if (replica === null) {
      this.noReplica.inc()
      return { ok: false, replica: null, error: new GatewayError('NO_HEALTHY_UPSTREAM'), result: 'no_replica' }
    }
    let timedOut = false
    const abort = new AbortController()
    const timer = setTimeout(() => { timedOut = true; abort.abort() }, this.settings.timeoutSeconds * 1000)
    try {
      for (let attempt = 0; ; attempt++) {
        const request = await build(replica)
        if (request instanceof GatewayError) return { ok: false, replica, error: request, result: null }
        const out = await this.send(replica, request, abort.signal, () => timedOut)
        if (out.ok || out.result !== 'connect_failed' || attempt === 1) return out
        const other = this.pick(replica)
        if (other === null) return out
        replica = other
      }
    } finally {
      clearTimeout(timer)
    }
  }

  /** Close every pool; calls in flight fail (the listener is closing too). */
  async close (): Promise<void> {
    this.closed = true
    const pools = [...this.lanes.values()].map(l => l.pool)
    this.lanes.clear()
    await Promise.all(pools.map(async p => await p.destroy().catch(() => {})))
  }

  /** The next eligible replica after the cursor, skipping `exclude`. */
  private pick (exclude: Replica | null): Replica | null {
    const all = this.replicas
    const n = all.length
    for (let i = 0; i < n; i++) {
      const r = all[(this.cursor + i) % n]
      if (r !== exclude && r.config.text !== undefined && r.healthy) {
        this.cursor = (this.cursor + i + 1) % n
        return r
      }
    }
    return null
  }

  private lane (replica: Replica): Lane {
    let lane = this.lanes.get(replica)
    if (lane === undefined) {
      const url = new URL(replica.config.text!)
      const s = this.settings
      lane = {
        pool: new Pool(url.origin, {
          connections: s.connectionsPerReplica,
          pipelining: 1,
          connect: { timeout: s.connectTimeoutSeconds * 1000 },
          headersTimeout: s.headersTimeoutSeconds * 1000,
          bodyTimeout: s.bodyTimeoutSeconds * 1000,
          maxResponseSize: s.maxResponseBytes
        }),
        basePath: url.pathname.replace(/\/+$/, ''),
        search: url.search,
        duration: this.metrics.upstreamDuration.labels(this.route, replica.name),
        results: new Map()
      }
      this.lanes.set(replica, lane)
    }
    return lane
  }

  private count (lane: Lane, replica: Replica, result: UpstreamResult): void {
    let c = lane.results.get(result)
    if (c === undefined) {
      c = this.metrics.upstreamRequests.labels(this.route, replica.name, result)
      lane.results.set(result, c)
    }
    c.inc()
  }

  private async send (replica: Replica, req: OutgoingRequest, signal: AbortSignal, timedOut: () => boolean): Promise<CallOutcome> {
    const lane = this.lane(replica)
    const started = performance.now()
    const done = (result: UpstreamResult): void => {
      lane.duration.observe((performance.now() - started) / 1000)
      this.count(lane, replica, result)
    }
    const headers = { ...req.headers, ...replica.config.headers }
    try {
      const res = await lane.pool.request({ method: req.method, path: target(lane, req.path), headers, body: req.body, signal })
      const status = res.statusCode
      if (status < 200 || status > 299) {
        // The vendor's error body is not kept: it is not ours to pass on, and may echo what was sent.
        await res.body.dump().catch(() => {})
        done(status >= 500 ? 'status_5xx' : 'status_4xx')
        return { ok: false, replica, error: new GatewayError('UPSTREAM_BAD_ANSWER', { detail: `the vendor answered ${status}` }), result: status >= 500 ? 'status_5xx' : 'status_4xx', vendorStatus: status }
      }
      const text = await res.body.text()
      const answerHeaders = flatHeaders(res.headers)
      let body: unknown = text === '' ? null : text
      if (text !== '' && /[/+]json\b/i.test(answerHeaders['content-type'] ?? '')) {
        try {
          body = JSON.parse(text)
        } catch {
          done('bad_answer')
          return { ok: false, replica, error: new GatewayError('UPSTREAM_BAD_ANSWER', { detail: 'the vendor said JSON but its answer is not JSON' }), result: 'bad_answer' }
        }
      }
      done('ok')
      return { ok: true, replica, answer: { status, headers: answerHeaders, body } }
    } catch (err) {
      const [result, code, detail] = translate(err, timedOut())
      done(result)
      return { ok: false, replica, error: new GatewayError(code, { detail, cause: err }), result }
    }
  }
}

/** undici / socket errors → our result label, error code and a short detail (never a URL or a header). */
function translate (err: unknown, timedOut: boolean): [UpstreamResult, ErrorCode, string] {
  const code = (err as { code?: string }).code ?? ''
  if (timedOut) return ['timeout', 'UPSTREAM_TIMEOUT', 'no whole answer within text.timeoutSeconds']
  if (TIMEOUT_CODES.has(code)) return ['timeout', 'UPSTREAM_TIMEOUT', code === 'UND_ERR_HEADERS_TIMEOUT' ? 'no answer within text.headersTimeoutSeconds' : 'the answer stalled past text.bodyTimeoutSeconds']
  if (CONNECT_CODES.has(code) || /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code)) return ['connect_failed', 'UPSTREAM_UNREACHABLE', `cannot connect (${code})`]
  if (code === 'UND_ERR_RES_EXCEEDED_MAX_SIZE') return ['bad_answer', 'UPSTREAM_BAD_ANSWER', 'the answer is larger than text.maxResponseBytes']
  return ['bad_answer', 'UPSTREAM_BAD_ANSWER', `the exchange failed (${code === '' ? (err as Error).name ?? 'error' : code})`]
}

function target (lane: Lane, path: string | null): string {
  if (path === null || path === '') return lane.basePath === '' ? '/' + lane.search : lane.basePath + lane.search
  return lane.basePath + path + (path.includes('?') ? '' : lane.search)
}

function flatHeaders (h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const k in h) {
    const v = h[k]
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v
  }
  return out
}
