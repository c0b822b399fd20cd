import { GatewayError } from '../errors'
import { contactKey, outOfTime, runSteps, type StepFailure, stepAuth } from '../mapping/steps-run'
import type { TextInput, TextMapping } from '../mapping/text'
import type { MappingFailure } from '../mapping/text-request'
import { type Clock, systemClock } from '../clock'
import type { TextSettings } from '../config/types'
import type { Store } from '../store/port'
import { type CallOptions, type CallOutcome, type RequestBuilder, TextUpstream } from '../upstream/http-call'
import { GRPC } from '../upstream/grpc-codes'
import type { RouteRuntime } from '../route'
import type { Metrics } from '../telemetry/metrics'
import { TextBalancer, type Replica, type UpstreamPool } from '../upstream/pool'

// The text hook's transport for a gRPC mapping (`text.grpc`): each utterance is one unary call, after the
// mapping's `text.setup` steps (a contact's shared conversation and participant: mapping/steps-run.ts). The
// outcome takes the shape of an HTTP exchange (upstream/http-answer.ts), so the hook's answer mapping, errors
// and logs are those of every text vendor.

/** gRPC status → what it is for the platform: the HTTP status it stands for (google.rpc.Code's mapping). */
const HTTP_OF: Readonly<Record<number, number>> = {
  1: 499, // CANCELLED
  2: 500, // UNKNOWN
  3: 400, // INVALID_ARGUMENT
  4: 504, // DEADLINE_EXCEEDED
  5: 404, // NOT_FOUND
  6: 409, // ALREADY_EXISTS
  7: 403, // PERMISSION_DENIED
  8: 429, // RESOURCE_EXHAUSTED
  9: 400, // FAILED_PRECONDITION
  10: 409, // ABORTED
  11: 400, // OUT_OF_RANGE
  12: 501, // UNIMPLEMENTED
  13: 500, // INTERNAL
  14: 503, // UNAVAILABLE
  15: 500, // DATA_LOSS
  16: 401 // UNAUTHENTICATED
}
/** UNAVAILABLE and RESOURCE_EXHAUSTED: another replica may answer (text.retries). */
const RETRYABLE = new Set<number>([GRPC.RESOURCE_EXHAUSTED, GRPC.UNAVAILABLE])
/**
 * The details grpc-js gives its own UNAVAILABLE when the call never reached the replica (no connection could be
 * made, or its name did not resolve): the replica is unreachable, as an HTTP vendor's failed connect. A vendor
 * that answers UNAVAILABLE says something else.
 */
const NOT_CONNECTED = /^(\w+: )?No connection established\b|^Name resolution failed\b/

/** How the text hook calls an utterance's vendor: HTTP (upstream/http-call.ts), or one unary gRPC call (here). */
export interface TextTransport {
  call: (
    b: RequestBuilder<TextInput, MappingFailure>,
    i: TextInput,
    o: CallOptions
  ) => Promise<CallOutcome<MappingFailure>>
  close: () => Promise<void>
}

/** The transport of a route's text mapping (`route.mapping.text`, which the caller has checked). */
export function textTransport(
  route: RouteRuntime,
  deps: { settings: TextSettings; metrics: Metrics; store?: Store }
): TextTransport {
  const mapping = route.mapping.text as TextMapping
  if (mapping.grpc == null) return new TextUpstream(route.name, route.pool, deps.settings, deps.metrics)
  return new GrpcTextUpstream(
    route.pool,
    mapping,
    { route: route.name, vendor: route.mapping.vendor },
    deps.settings,
    deps.store,
    systemClock
  )
}

export class GrpcTextUpstream {
  private readonly balancer: TextBalancer
  private closed = false

  constructor(
    private readonly pool: UpstreamPool,
    private readonly mapping: TextMapping,
    /** The route's name (its own tenant's namespace) and the mapping's vendor: parts of a contact's key. */
    private readonly names: { route: string; vendor: string },
    private readonly settings: TextSettings,
    private readonly store: Store | undefined,
    private readonly clock: Clock
  ) {
    this.balancer = new TextBalancer(pool.replicas, settings.balancing)
  }

  /**
   * One utterance: a replica, its setup steps, the call; UNAVAILABLE and RESOURCE_EXHAUSTED go to another
   * replica. One deadline, `text.timeoutSeconds` from here, covers all of it (the setup's calls and waits, every
   * replica's call): each is given what is left of it, and none is begun once it passed (UPSTREAM_TIMEOUT).
   */
  async call(
    builder: RequestBuilder<TextInput, MappingFailure>,
    input: TextInput,
    options: CallOptions
  ): Promise<CallOutcome<MappingFailure>> {
    if (this.closed) return { ok: false, replica: null, error: new GatewayError('SHUTTING_DOWN'), result: null }
    const until = this.clock.now() + this.settings.timeoutSeconds * 1000
    const tried = new Set<Replica>()
    let out: CallOutcome<MappingFailure> | null = null
    for (let attempt = 0; attempt <= this.settings.retries; attempt++) {
      if (out !== null && this.clock.now() >= until)
        return this.failed(out.replica as Replica, outOfTime('text.grpc').failure)
      const replica = this.balancer.pick(tried)
      if (replica === null) break
      tried.add(replica)
      this.balancer.begin(replica)
      try {
        out = await this.once(replica, builder, input, options.namespace ?? this.names.route, until)
      } finally {
        this.balancer.end(replica)
      }
      if (out.ok || !('retryable' in out)) break
    }
    if (out === null)
      return { ok: false, replica: null, error: new GatewayError('NO_HEALTHY_UPSTREAM'), result: 'no_replica' }
    return out
  }

  private async once(
    replica: Replica,
    builder: RequestBuilder<TextInput, MappingFailure>,
    input: TextInput,
    namespace: string,
    until: number
  ): Promise<CallOutcome<MappingFailure> & { retryable?: true }> {
    const url = replica.config.text as string
    const target = { url, credential: replica.config.credential ?? null, headers: replica.config.headers }
    const setup = this.mapping.setup ?? []
    if (setup.length > 0) {
      if (this.store === undefined) throw new Error('a text mapping with setup steps needs the store')
      const contact = contactKey(namespace, this.names.vendor, input.request)
      const scope = { store: this.store, clock: this.clock, contact, shareMs: this.mapping.shareMs ?? 0, until }
      const steps = await runSteps(setup, input, target, scope)
      if (!steps.ok) return this.failed(replica, steps.failure)
      input.steps = steps.steps
    }
    const built = builder.now(replica, input) ?? (await builder.later(replica, input))
    if (!built.ok)
      return { ok: false, replica, error: new GatewayError('MAPPING_FAILED'), result: null, unbuilt: built }
    let request: unknown
    try {
      request = JSON.parse(built.value.body ?? 'null')
    } catch {
      return this.failed(replica, { kind: 'mapping', pointer: '/text/request/body', error: 'not a JSON object' })
    }
    const { unaryCall } = require('../upstream/grpc-unary') as typeof import('../upstream/grpc-unary')
    const m = this.mapping.grpc!
    const auth = stepAuth(m.auth, replica.config.credential, url)
    const headers = { ...built.value.headers, ...replica.config.headers }
    delete headers['content-type']
    const left = until - this.clock.now()
    if (left <= 0) return this.failed(replica, outOfTime('text.grpc').failure)
    const out = await unaryCall(url, m, request, headers, left, auth)
    if (!out.ok) return this.failed(replica, { kind: 'status', step: 'text.grpc', ...out })
    this.pool.recordSuccess(replica)
    return { ok: true, replica, answer: { status: 200, headers: {}, body: out.value, json: null } }
  }

  /** A step's or the call's failure, as the text hook reports a vendor's answer. */
  private failed(replica: Replica, f: StepFailure): CallOutcome<MappingFailure> & { retryable?: true } {
    if (f.kind === 'mapping' || f.code === GRPC.INVALID_ARGUMENT)
      return {
        ok: false,
        replica,
        error: new GatewayError('MAPPING_FAILED'),
        result: null,
        unbuilt: {
          ok: false,
          pointer: f.kind === 'mapping' ? f.pointer : '/text/request/body',
          error: f.kind === 'mapping' ? f.error : `INVALID_ARGUMENT (${f.step}): ${f.details}`
        }
      }
    const status = HTTP_OF[f.code] ?? 502
    if (f.code === GRPC.UNAVAILABLE) this.pool.recordFailure(replica, `text: UNAVAILABLE`, 'text')
    if (f.code === GRPC.UNAVAILABLE && f.gateway !== true && NOT_CONNECTED.test(f.details)) {
      const error = new GatewayError('UPSTREAM_UNREACHABLE', { detail: `cannot connect (${f.step})` })
      return { ok: false, replica, error, result: 'connect_failed', retryable: true }
    }
    const error =
      f.code === GRPC.DEADLINE_EXCEEDED
        ? new GatewayError('UPSTREAM_TIMEOUT', { detail: `${f.step}: DEADLINE_EXCEEDED` })
        : new GatewayError('UPSTREAM_BAD_ANSWER', { detail: `the vendor answered gRPC status ${f.code} (${f.step})` })
    return {
      ok: false,
      replica,
      error,
      result: f.code === GRPC.DEADLINE_EXCEEDED ? 'timeout' : status >= 500 ? 'status_5xx' : 'status_4xx',
      vendorStatus: status,
      ...(RETRYABLE.has(f.code) ? { retryable: true as const } : {})
    }
  }

  async close(): Promise<void> {
    this.closed = true
  }
}
