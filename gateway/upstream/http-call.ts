import { Pool } from 'undici'
import { systemClock, type Clock } from '../clock'
import type { TextSettings } from '../config/types'
import { GatewayError } from '../errors'
import type { Metrics } from '../telemetry/metrics'
import type { SpanAttributes, TraceSpan } from '../telemetry/tracing'
import { readAnswer, type AnswerKind, type Exchanged } from './http-answer'
import { Exchange, type Deadline, type UpstreamResult } from './http-exchange'
import { TextBalancer, type Replica, type UpstreamPool } from './pool'
import { textBase, textTarget, type TextBase } from './text-url'

export type { UpstreamResult } from './http-exchange'
export { retryAfter, type Answer, type AnswerKind, type Exchanged } from './http-answer'

/** The one upstream text request: built by the text mapping for one replica; `path` is relative to its text URL. */
export interface OutgoingRequest {
  method: 'POST' | 'PUT' | 'PATCH'
  path: string | null
  headers: Record<string, string>
  body: string | null
}

/** What a request builder gives for one replica: the request, or its own failure value (then nothing is sent). */
export type Built<F extends { ok: false }> = { ok: true; value: OutgoingRequest } | F

/**
 * Builds the request for one replica (the credential may differ per replica) from the caller's input:
 * `now` synchronously, or null when it cannot (an expression needs JSONata's evaluator); then `later`.
 * Made once per route: a call allocates no builder.
 */
export interface RequestBuilder<A, F extends { ok: false }> {
  now: (replica: Replica, input: A) => Built<F> | null
  later: (replica: Replica, input: A) => Promise<Built<F>>
}

/** The builder failed for `replica`: nothing was sent. `unbuilt` is the builder's failure value; `error` is MAPPING_FAILED. */
export interface Unbuilt<F> {
  ok: false
  replica: Replica
  error: GatewayError
  result: null
  unbuilt: F
}

export type CallOutcome<F = never> = Exchanged | Unbuilt<F>

export interface CallOptions {
  /** The vendor may receive the request twice: a timed-out call may go to another replica. */
  idempotent: boolean
  /** What a 2xx answer must be (http-answer.ts): `json`, else UPSTREAM_ANSWER_NOT_JSON. Absent: `any`. */
  answer?: AnswerKind
  /**
   * The span the call belongs to (an utterance's): each attempt is a CLIENT span under it, whose
   * `traceparent` the request carries, after a span of the mapping that builds it.
   */
  trace?: TraceSpan
  /**
   * The tenant's namespace on the route (route.ts `namespaceOf`): a gRPC mapping's shared setup results
   * (text/grpc-text.ts) are its contact's within it. Absent: the route's own.
   */
  namespace?: string
}

const NOT_IDEMPOTENT: CallOptions = Object.freeze({ idempotent: false })

/** An attempt's span: which replica, which try (0: the first), where (OpenTelemetry's HTTP client attributes). */
function attemptAttributes(replica: Replica, attempt: number): SpanAttributes {
  return {
    'assist_gateway.upstream': replica.name,
    'assist_gateway.attempt': attempt,
    'server.address': replica.config.text === undefined ? undefined : new URL(replica.config.text).host
  }
}

/** What one replica needs: its keep-alive Pool, where its text URL points (text-url.ts), cached metric children. */
interface Lane {
  readonly pool: Pool
  readonly base: TextBase
  /** The request path when the mapping gives none: the text URL's own path and query. */
  readonly path: string
  /** The replica's configured headers, or null when it has none. */
  readonly headers: Readonly<Record<string, string>> | null
  readonly duration: { observe: (v: number) => void }
  readonly results: Map<UpstreamResult, { inc: () => void }>
}

/**
 * The text hook's HTTP calls to one route's replicas (health.ts's probes are the other undici user).
 * One keep-alive Pool per replica (connections, connect/headers/body timeouts and the answer size limit
 * from `text` settings). Replica choice: round-robin or power-of-two-choices over the replicas that
 * have a `text` URL, are healthy and under `maxInFlight`; retries as `call` says. One deadline,
 * `timeoutSeconds` on `clock`, covers the whole exchange, retries included. undici's error codes are
 * translated here, once. It sends the request its caller's builder gives, and knows nothing of mappings.
 */
export class TextUpstream {
  private readonly lanes = new Map<Replica, Lane>()
  private closed = false
  private readonly noReplica: { inc: () => void }
  private readonly balancer: TextBalancer

  constructor(
    private readonly route: string,
    private readonly pool: UpstreamPool,
    private readonly settings: TextSettings,
    private readonly metrics: Metrics,
    private readonly clock: Clock = systemClock
  ) {
    this.balancer = new TextBalancer(pool.replicas, settings.balancing)
    this.noReplica = metrics.upstreamRequests.labels(route, '', 'no_replica')
  }

  /**
   * Send one request. `builder` gives the request from `input` for the replica chosen, or its own
   * failure value, which ends the call before anything is sent. Retries go to a replica not yet tried,
   * at most `text.retries`: after a connect failure (nothing reached the vendor) or a 502/503/504;
   * after a timeout only when `idempotent`; after a 429 with `retry-after`, once that delay has passed
   * (another replica, else the same one), when it ends before the call's deadline. Retries in flight
   * stay within `text.retryBudgetPercent` of requests in flight (at least 3).
   */
  async call<A, F extends { ok: false } = never>(
    builder: RequestBuilder<A, F>,
    input: A,
    opts: CallOptions = NOT_IDEMPOTENT
  ): Promise<CallOutcome<F>> {
    if (this.closed) return { ok: false, replica: null, error: new GatewayError('SHUTTING_DOWN'), result: null }
    const tried = new Set<Replica>()
    const firstPick = this.balancer.pick(tried)
    if (firstPick === null) {
      this.noReplica.inc()
      return { ok: false, replica: null, error: new GatewayError('NO_HEALTHY_UPSTREAM'), result: 'no_replica' }
    }
    let replica: Replica = firstPick
    const deadline: Deadline = { timedOut: false, current: null }
    const endsAt = this.clock.now() + this.settings.timeoutSeconds * 1000
    const timer = this.clock.setTimeout(() => {
      deadline.timedOut = true
      deadline.current?.expire()
    }, this.settings.timeoutSeconds * 1000)
    this.activeRequests++
    let retrying = false
    try {
      for (let attempt = 0; ; attempt++) {
        tried.add(replica)
        const traced = opts.trace?.recording === true ? opts.trace : null
        const mapping = traced?.child('mapping text.request', { 'assist_gateway.upstream': replica.name })
        const built = builder.now(replica, input) ?? (await builder.later(replica, input))
        mapping?.end(built.ok ? undefined : 'MAPPING_FAILED')
        if (!built.ok)
          return { ok: false, replica, error: new GatewayError('MAPPING_FAILED'), result: null, unbuilt: built }
        if (deadline.timedOut)
          return {
            ok: false,
            replica,
            error: new GatewayError('UPSTREAM_TIMEOUT', { detail: 'no whole answer within text.timeoutSeconds' }),
            result: null
          }
        this.balancer.begin(replica)
        const span = traced?.child(`upstream ${built.value.method}`, attemptAttributes(replica, attempt), 'client')
        let out: Exchanged
        try {
          out = await this.send(replica, built.value, deadline, opts.answer ?? 'any', (span ?? opts.trace)?.traceparent)
        } finally {
          this.balancer.end(replica)
        }
        const reason = this.retryReason(out, deadline, opts.idempotent, endsAt)
        if (span !== undefined) {
          span.set(
            out.ok
              ? { 'http.response.status_code': out.answer.status }
              : { 'http.response.status_code': out.vendorStatus, 'assist_gateway.result': out.result ?? undefined }
          )
          span.end(out.ok ? undefined : out.error.code)
        }
        this.passive(replica, out, reason)
        if (reason === null || attempt >= this.settings.retries || deadline.timedOut) return out
        // A rate limit is honoured where it was given: the same replica may be asked again, after the delay.
        const other: Replica | null =
          this.balancer.pick(tried) ?? (reason === 'rate_limited' && replica.healthy ? replica : null)
        if (other === null) return out
        if (!retrying && !this.budgetAllows()) {
          this.metrics.upstreamRetries.inc({ route: this.route, reason: 'budget_exhausted' })
          return out
        }
        if (!retrying) {
          retrying = true
          this.activeRetries++
        }
        this.metrics.upstreamRetries.inc({ route: this.route, reason })
        if (reason === 'rate_limited' && !out.ok) await this.pause(out.retryAfterMs ?? 0, deadline)
        replica = other
      }
    } finally {
      this.clock.clearTimeout(timer)
      this.activeRequests--
      if (retrying) this.activeRetries--
    }
  }

  private activeRequests = 0
  private activeRetries = 0

  /** Envoy-style retry budget: retries in flight ≤ max(3, budget% of requests in flight). */
  private budgetAllows(): boolean {
    return this.activeRetries < Math.max(3, (this.activeRequests * this.settings.retryBudgetPercent) / 100)
  }

  /** Why this failure may be sent to another replica; null: it may not. */
  private retryReason(
    out: Exchanged,
    deadline: Deadline,
    idempotent: boolean,
    endsAt: number
  ): 'connect_failed' | 'status_5xx' | 'timeout' | 'rate_limited' | null {
    if (out.ok) return null
    if (out.result === 'connect_failed') return 'connect_failed'
    // 429 with retry-after: worth one more try only if the delay ends before the call's own deadline.
    if (out.vendorStatus === 429 && out.retryAfterMs !== undefined)
      return this.clock.now() + out.retryAfterMs < endsAt ? 'rate_limited' : null
    if (
      out.result === 'status_5xx' &&
      (out.vendorStatus === 502 || out.vendorStatus === 503 || out.vendorStatus === 504)
    )
      return 'status_5xx'
    // A timeout may have reached the vendor: repeating is safe only for idempotent calls, and never
    // past the call's own deadline.
    if (out.result === 'timeout' && idempotent && !deadline.timedOut) return 'timeout'
    return null
  }

  /** Passive health: gateway-side failures count against the replica; a vendor 4xx never does. */
  private passive(replica: Replica, out: Exchanged, reason: string | null): void {
    if (out.ok) {
      this.pool.recordSuccess(replica)
      return
    }
    // A 2xx that is not the JSON asked for (an event stream, a proxy's page) is the replica's failing too.
    const gatewaySide =
      out.result === 'connect_failed' ||
      out.result === 'timeout' ||
      reason === 'status_5xx' ||
      out.error.code === 'UPSTREAM_ANSWER_NOT_JSON'
    if (gatewaySide) this.pool.recordFailure(replica, `text: ${out.result ?? 'failed'}`, 'text')
  }

  /** Wait `ms` on the clock, or less when the call's deadline passes first. */
  private async pause(ms: number, deadline: Deadline): Promise<void> {
    if (ms <= 0) return
    await new Promise<void>(resolve => {
      const t = this.clock.setTimeout(resolve, ms)
      deadline.current = {
        expire: () => {
          this.clock.clearTimeout(t)
          resolve()
        }
      }
    })
    deadline.current = null
  }

  /** Close every pool; calls in flight fail (the listener is closing too). */
  async close(): Promise<void> {
    this.closed = true
    const pools = [...this.lanes.values()].map(l => l.pool)
    this.lanes.clear()
    await Promise.all(pools.map(async p => await p.destroy().catch(() => {})))
  }

  private lane(replica: Replica): Lane {
    let lane = this.lanes.get(replica)
    if (lane === undefined) {
      const base = textBase(replica.config.text!)
      const s = this.settings
      lane = {
        pool: new Pool(base.origin, {
          connections: s.connectionsPerReplica,
          pipelining: 1,
          connect: { timeout: s.connectTimeoutSeconds * 1000 },
          headersTimeout: s.headersTimeoutSeconds * 1000,
          bodyTimeout: s.bodyTimeoutSeconds * 1000,
          maxResponseSize: s.maxResponseBytes
        }),
        base,
        path: textTarget(base, null),
        headers:
          replica.config.headers !== undefined && Object.keys(replica.config.headers).length > 0
            ? replica.config.headers
            : null,
        duration: this.metrics.upstreamDuration.labels(this.route, replica.name),
        results: new Map()
      }
      this.lanes.set(replica, lane)
    }
    return lane
  }

  private count(lane: Lane, replica: Replica, result: UpstreamResult): void {
    let c = lane.results.get(result)
    if (c === undefined) {
      c = this.metrics.upstreamRequestCounts.cell(this.route, replica.name, result)
      lane.results.set(result, c)
    }
    c.inc()
  }

  /** One exchange with one replica, through undici's dispatch API (no stream or promise per chunk). */
  private async send(
    replica: Replica,
    req: OutgoingRequest,
    deadline: Deadline,
    kind: AnswerKind,
    traceparent: string | undefined
  ): Promise<Exchanged> {
    const lane = this.lane(replica)
    const started = this.clock.now()
    // The builder made these headers for this one request: the replica's own are added in place, no copy.
    const headers = req.headers
    if (lane.headers !== null) Object.assign(headers, lane.headers)
    if (traceparent !== undefined) headers.traceparent = traceparent
    const exchange = new Exchange()
    deadline.current = exchange
    lane.pool.dispatch(
      {
        origin: lane.base.origin,
        method: req.method,
        path: req.path === null || req.path === '' ? lane.path : textTarget(lane.base, req.path),
        headers,
        body: req.body
      },
      exchange
    )
    const raw = await exchange.answer
    deadline.current = null
    const outcome = readAnswer(raw, replica, kind)
    lane.duration.observe((this.clock.now() - started) / 1000)
    this.count(lane, replica, outcome.ok ? 'ok' : (outcome.result ?? 'bad_answer'))
    return outcome
  }
}
