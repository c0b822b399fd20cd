import { UNKNOWN_TENANT } from '../auth/tenant-credentials'
import type { TextSettings } from '../config/types'
import { GatewayError, logLevelOf } from '../errors'
import { thenOrNow } from '../auth/admission'
import type { QuotaRefusal } from '../auth/quotas'
import { authenticateStatic, failureLabel } from '../auth/hook-auth'
import { authenticate, type HookAuth } from '../auth/route-auth'
import { evaluateNow } from '../mapping/fast-path'
import { run } from '../mapping/run'
import type { TextInput, TextMapping } from '../mapping/text'
import { type MappingFailure, TextRequestBuilder } from '../mapping/text-request'
import { demandsCredential, hookAuth, namespaceOf, type RouteRuntime } from '../route'
import type { Logger } from '../telemetry/log'
import type { LogLimiter } from '../telemetry/log-limit'
import type { Metrics } from '../telemetry/metrics'
import type { TraceSpan } from '../telemetry/tracing'
import type { CallOptions, CallOutcome, RequestBuilder } from '../upstream/http-call'
import type { Problem } from '../validate/compile'
import { checkUtterance, normalizeUtterance, parseJson } from '../validate/messages'
import { DeliveryQueue } from './delivery-queue'
import { type TextTransport, textTransport } from './grpc-text'
import type { Store } from '../store/port'
import { TextTees } from './tee'

import type { IncomingUtterance, TextResult } from './exchange-types'

export interface TextDeps {
  settings: TextSettings
  metrics: Metrics
  log: Logger
  /** Refusals (`text_refused`) are rate-limited per code: anyone can cause them. */
  logLimit?: LogLimiter
  /** The shared store: a gRPC text mapping's setup steps share a contact's results there (text/grpc-text.ts). */
  store?: Store
}

/** Per route: its request builder, its vendor calls and, for an asynchronous route, its delivery queue. */
interface RouteText {
  readonly route: RouteRuntime
  readonly mapping: TextMapping
  readonly upstream: TextTransport
  readonly queue: DeliveryQueue | null
  readonly callOptions: CallOptions
  /** text.request for the replica chosen: `input.upstream` is set to that replica first. */
  readonly request: RequestBuilder<TextInput, MappingFailure>
  readonly inputRoute: TextInput['route']
  /** The route's text credential check, made once: whether it takes bearer tokens decides the path. */
  readonly auth: HookAuth
  /** Fan-out (route `tee`): tee vendors with a text mapping, delivered in the background (text/tee.ts). */
  readonly tees: TextTees<RouteText> | null
}

/**
 * The text hook: utterance → credentials → schema → mapped vendor call → mapped answer. Steps:
 *
 *   JSON (MESSAGE_NOT_JSON) → object (MESSAGE_INVALID) → credentials (AUTH_MISSING, AUTH_INVALID) →
 *   nesting ≤ MAX_DEPTH and schema (MESSAGE_INVALID, every bad field by pointer) → normalize →
 *   asynchronous route: enqueue (QUEUE_FULL) and 202 → replica (NO_HEALTHY_UPSTREAM) → text.request
 *   (MAPPING_FAILED) → call (UPSTREAM_UNREACHABLE, UPSTREAM_TIMEOUT, UPSTREAM_BAD_ANSWER) →
 *   text.response (UPSTREAM_BAD_ANSWER) → 200
 *
 * Credentials come before the schema, so an unauthenticated caller learns nothing about the format.
 * Every failure is counted and logged once here (4xx at info, 5xx at error); the server renders it.
 */
export class TextHook {
  private readonly routes = new Map<RouteRuntime, RouteText>()

  constructor(
    routes: Iterable<RouteRuntime>,
    private readonly deps: TextDeps
  ) {
    for (const route of routes) {
      const rt = this.routeText(route, route.config.async, this.teesOf(route))
      if (rt !== null) this.routes.set(route, rt)
    }
  }

  /** A route's (or a tee's) text side; null when its mapping has no text section. */
  private routeText(
    route: RouteRuntime,
    async: boolean,
    tees: TextTees<RouteText> | null,
    inputRoute?: TextInput['route']
  ): RouteText | null {
    const deps = this.deps
    const mapping = route.mapping.text
    if (mapping === null) return null
    return {
      route,
      mapping,
      upstream: textTransport(route, deps),
      queue: async ? new DeliveryQueue(deps.settings.asyncQueueSize, deps.settings.asyncConcurrency) : null,
      callOptions: Object.freeze({ idempotent: mapping.idempotent, answer: mapping.answer }),
      request: new TextRequestBuilder(mapping),
      auth: hookAuth(route, 'text'),
      tees,
      inputRoute:
        inputRoute ??
        Object.freeze({
          name: route.name,
          params: route.config.params,
          checksToken: demandsCredential(route, 'text')
        })
    }
  }

  /** The route's tees with a text mapping, each on its own pool and queue; null when none. */
  private teesOf(route: RouteRuntime): TextTees<RouteText> | null {
    const { settings, metrics } = this.deps
    const tees = (route.tees ?? []).flatMap(tee => {
      const inputRoute = Object.freeze({
        name: route.name,
        params: tee.runtime.config.params,
        checksToken: demandsCredential(route, 'text')
      })
      const target = this.routeText(tee.runtime, false, null, inputRoute)
      if (target === null) return []
      const queue = new DeliveryQueue(settings.asyncQueueSize, settings.asyncConcurrency)
      return [{ name: tee.name, route: route.name, target, inputRoute, queue }]
    })
    if (tees.length === 0) return null
    return new TextTees(tees, async (target, input, span, ns) => await this.deliver(target, input, span, ns), metrics)
  }

  /** Asynchronous deliveries accepted (202) and not yet finished, on every route. */
  get backlog(): number {
    let n = 0
    for (const rt of this.routes.values()) n += (rt.queue?.outstanding ?? 0) + (rt.tees?.outstanding ?? 0)
    return n
  }

  serves(route: RouteRuntime): boolean {
    return this.routes.has(route)
  }

  /** Requests in this hook's pipeline now (a replaced hook closes its pools once none is left). */
  get active(): number {
    return this.inFlight
  }

  private inFlight = 0

  /** The pipeline of one utterance. Never throws: a bug becomes INTERNAL. */
  async handle(req: IncomingUtterance): Promise<TextResult> {
    this.inFlight++
    try {
      return await this.pipeline(req)
    } finally {
      this.inFlight--
    }
  }

  private pipeline(req: IncomingUtterance): TextResult | Promise<TextResult> {
    const rt = this.routes.get(req.route)
    if (rt === undefined) return this.refuse(req, new GatewayError('ROUTE_NOT_FOUND'))
    const { metrics } = this.deps
    const text = req.body.toString('utf8')
    const parsed = parseJson(text)
    if (!parsed.ok) {
      metrics.validationFailures.inc({ hook: 'text' })
      return this.refuse(req, parsed.error)
    }
    const value = parsed.value
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      metrics.validationFailures.inc({ hook: 'text' })
      return this.refuse(req, new GatewayError('MESSAGE_INVALID', { pointers: ['/'] }), [
        { pointer: '/', message: 'must be object' }
      ])
    }
    const msg = value as Record<string, unknown>
    // A static credential list under a one-process failure budget is judged synchronously: no promise for it.
    const step = req.span.child('credential')
    const refused = this.authenticate(req, rt, msg)
    if (refused instanceof Promise)
      return refused.then(r => {
        step.end(r?.ok === false ? r.error.code : undefined)
        return r ?? this.accepted(req, rt, msg, text)
      })
    step.end(refused?.ok === false ? refused.error.code : undefined)
    return refused ?? this.accepted(req, rt, msg, text)
  }

  /** After the credential step: the schema, then the vendor call (or the queue). */
  private accepted(
    req: IncomingUtterance,
    rt: RouteText,
    msg: Record<string, unknown>,
    text: string
  ): TextResult | Promise<TextResult> {
    const { metrics } = this.deps
    const step = req.span.child('validation')
    const problems = checkUtterance(msg)
    if (problems.length > 0) {
      metrics.validationFailures.inc({ hook: 'text' })
      step.end('MESSAGE_INVALID')
      return this.refuse(req, new GatewayError('MESSAGE_INVALID', { pointers: problems.map(p => p.pointer) }), problems)
    }
    const { request, message } = normalizeUtterance(msg, rt.inputRoute.checksToken)
    step.end()
    if (req.span.recording)
      req.span.set({
        'assist_gateway.contact_id': String(request.contactId),
        'assist_gateway.bus_no': String(request.busNo)
      })
    // messageJson: the message as it came (nothing dropped); a passthrough body sends these bytes as they are.
    const input: TextInput = {
      request,
      message,
      messageJson: message === msg ? text : null,
      requestId: req.requestId,
      route: rt.inputRoute,
      upstream: NO_UPSTREAM
    }
    // The tenant's namespace on the route (a gRPC mapping's shared setup results are its contact's within it).
    const namespace = namespaceOf(req.route.name, req.tenant ?? req.route.name)
    if (rt.queue !== null) {
      const accepted = rt.queue.offer(async () => {
        await this.deliver(rt, input, req.span, namespace)
      })
      if (!accepted) return this.refuse(req, new GatewayError('QUEUE_FULL'))
      rt.tees?.send(input, req.span, namespace)
      return { ok: true, status: 202, json: JSON.stringify({ accepted: true, requestId: req.requestId }) }
    }
    rt.tees?.send(input, req.span, namespace)
    return this.deliver(rt, input, req.span, namespace)
  }

  /**
   * The credential step: the credential, then the failure budget's verdict on that check (a refused one
   * is counted; an address that has spent its budget is refused whatever the check found). null: accepted.
   * Synchronous for a static credential list in one process (the usual case there); a promise when bearer
   * tokens are accepted, the verdict is asked of the main process, or a failure goes to the fleet's count.
   */
  private authenticate(
    req: IncomingUtterance,
    rt: RouteText,
    msg: Record<string, unknown>
  ): TextResult | null | Promise<TextResult | null> {
    const presented = [msg.authorizationHeader, req.authorization]
    const checked = rt.auth.tokens
      ? authenticate(presented, rt.auth, req.route.verifier)
      : authenticateStatic(presented, rt.auth.list, req.route.anonymous)
    return thenOrNow(checked, auth => {
      const bad: AuthFailure | null = auth.ok ? null : { code: auth.code, reason: failureLabel(auth.reason) }
      return thenOrNow(req.admission.admit(req.address, bad !== null), verdict => {
        if (verdict !== true) return this.overBudget(req, verdict)
        if (!auth.ok) return this.authFailed(req, bad!)
        req.tenant = auth.principal.tenant
        // The same seam as a leg's: credentials → tenant → quotas (auth/admission.ts).
        return thenOrNow(req.admission.takeUtterance(req.route.name, auth.principal.tenant), taken =>
          taken === true ? null : this.overQuota(req, taken)
        )
      })
    })
  }

  private overQuota(req: IncomingUtterance, refusal: QuotaRefusal): TextResult {
    this.deps.metrics.limitRefusals.inc({ limit: refusal.limit, hook: 'text' })
    this.deps.metrics.tenantRefusals.inc({ tenant: req.tenant ?? UNKNOWN_TENANT, limit: refusal.limit })
    const { limit, retryAfterSeconds } = refusal
    return this.refuse(req, new GatewayError('QUOTA_EXCEEDED', { detail: limit }), [], { retryAfterSeconds, limit })
  }

  private overBudget(req: IncomingUtterance, retryAfterSeconds: number): TextResult {
    this.deps.metrics.limitRefusals.inc({ limit: 'failure_budget', hook: 'text' })
    return this.refuse(req, new GatewayError('TOO_MANY_FAILURES'), [], { retryAfterSeconds })
  }

  private authFailed(req: IncomingUtterance, bad: AuthFailure): TextResult {
    this.deps.metrics.authFailures.inc({ hook: 'text', reason: bad.reason })
    return this.refuse(req, new GatewayError(bad.code))
  }

  /** Stop every vendor pool (the listener is closing). */
  async close(): Promise<void> {
    const all = [...this.routes.values()].flatMap(rt => [rt, ...(rt.tees?.targets ?? [])])
    await Promise.all(all.map(async rt => await rt.upstream.close()))
  }

  /** The vendor call and the answer mapping; shared by synchronous answers and background delivery. */
  private async deliver(rt: RouteText, input: TextInput, span: TraceSpan, namespace: string): Promise<TextResult> {
    const { metrics } = this.deps
    let out: CallOutcome<MappingFailure>
    const options = { ...rt.callOptions, trace: span, namespace }
    try {
      out = await rt.upstream.call(rt.request, input, options)
    } catch (err) {
      return this.fail(rt, input, new GatewayError('INTERNAL', { cause: err }), { err })
    }
    if (!out.ok) {
      if (out.unbuilt !== undefined) {
        // The log line alone says where text.request failed and why: it may quote what an expression produced.
        metrics.mappingErrors.inc({ route: rt.route.name, stage: 'text_request' })
        return this.fail(rt, input, out.error, {
          upstream: out.replica.name,
          mapping: rt.route.mapping.file,
          pointer: out.unbuilt.pointer,
          mappingError: out.unbuilt.error
        })
      }
      return this.fail(
        rt,
        input,
        out.error,
        { upstream: out.replica?.name, result: out.result, vendorStatus: out.vendorStatus },
        out.vendorStatus === undefined ? {} : { vendorStatus: out.vendorStatus }
      )
    }
    if (rt.mapping.response === null) {
      // No response mapping: the vendor's JSON as it came (checked to be JSON), else its text as a JSON string.
      return {
        ok: true,
        status: 200,
        json: out.answer.json ?? JSON.stringify(out.answer.body ?? null),
        upstream: out.replica.name
      }
    }
    input.response = out.answer
    const answer = span.recording
      ? span.child('mapping text.response', { 'assist_gateway.upstream': out.replica.name })
      : span
    const shaped = evaluateNow(rt.mapping.response, input) ?? (await run(rt.mapping.response.slow, input))
    answer.end(shaped.ok && shaped.value !== undefined ? undefined : 'UPSTREAM_BAD_ANSWER')
    if (!shaped.ok || shaped.value === undefined) {
      metrics.mappingErrors.inc({ route: rt.route.name, stage: 'text_response' })
      const why = shaped.ok ? 'text.response produced nothing from the vendor answer' : shaped.error
      return this.fail(
        rt,
        input,
        new GatewayError('UPSTREAM_BAD_ANSWER', { detail: 'the answer does not hold what the mapping expects' }),
        { upstream: out.replica.name, mapping: rt.route.mapping.file, pointer: '/text/response', mappingError: why }
      )
    }
    let json: string
    try {
      json = JSON.stringify(shaped.value)
    } catch {
      return this.fail(
        rt,
        input,
        new GatewayError('UPSTREAM_BAD_ANSWER', { detail: 'the mapped answer cannot be written as JSON' }),
        { upstream: out.replica.name }
      )
    }
    return { ok: true, status: 200, json, upstream: out.replica.name }
  }

  /** A refusal before any vendor work: logged once (never the body or headers), under the flood cap. */
  private refuse(
    req: IncomingUtterance,
    error: GatewayError,
    problems: readonly Problem[] = [],
    extra: Record<string, unknown> = {}
  ): TextResult {
    const quiet = this.deps.logLimit?.allow(error.code) === false
    if (!quiet)
      this.deps.log[logLevelOf(error.code)](
        {
          event: 'text_refused',
          route: req.route.name,
          requestId: req.requestId,
          code: error.code,
          address: req.address,
          pointers: error.pointers.length > 0 ? error.pointers : undefined
        },
        error.message
      )
    return { ok: false, error, problems, extra, quiet }
  }

  /** A failure of the vendor leg (both modes): logged once with what is known, never a credential. */
  private fail(
    rt: RouteText,
    input: TextInput,
    error: GatewayError,
    fields: Record<string, unknown>,
    extra: Record<string, unknown> = {}
  ): TextResult {
    this.deps.log[logLevelOf(error.code)](
      {
        event: 'text_failed',
        route: rt.route.name,
        requestId: input.requestId,
        async: rt.queue !== null,
        busNo: input.request.busNo,
        contactId: input.request.contactId,
        code: error.code,
        ...fields
      },
      error.message
    )
    return { ok: false, error, problems: [], extra, upstream: fields.upstream as string | undefined }
  }
}

type AuthFailure = { code: 'AUTH_MISSING' | 'AUTH_INVALID'; reason: string }

const NO_UPSTREAM: TextInput['upstream'] = Object.freeze({ name: '', credential: null, hasCredential: false })
