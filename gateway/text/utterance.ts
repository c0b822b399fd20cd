import type { TextSettings } from '../config/types'
import { GatewayError, logLevelOf } from '../errors'
import type { CredentialList } from '../auth/credentials'
import {
  evaluate,
  mapRequest,
  normalizeUtterance,
  type MappedOutcome,
  type TextInput,
  type TextMapping
} from '../mapping/text'
import type { RouteRuntime } from '../route'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import { TextUpstream, type CallOutcome, type OutgoingRequest } from '../upstream/http-call'
import type { Replica } from '../upstream/pool'
import { problemsOf, validator, type Problem } from '../validate/compile'
import { parseJson } from '../validate/messages'

/** Deepest nesting accepted in a body: deeper JSON is refused (400) before anything recursive sees it. */
export const MAX_DEPTH = 64

/** One text hook request, copied out of the server's request object. */
export interface IncomingUtterance {
  route: RouteRuntime
  body: Buffer
  /** The Authorization header ('' when absent). */
  authorization: string
  requestId: string
}

/** What the server renders: a JSON answer (already encoded), or a catalogued error as problem+json. */
export type TextResult =
  | { ok: true; status: 200 | 202; json: string }
  | { ok: false; error: GatewayError; problems: readonly Problem[]; extra: Record<string, unknown> }

export interface TextDeps {
  settings: TextSettings
  metrics: Metrics
  log: Logger
}

/** Per route: its vendor calls and, for an asynchronous route, its delivery queue. */
interface RouteText {
  readonly route: RouteRuntime
  readonly mapping: TextMapping
  readonly upstream: TextUpstream
  readonly queue: DeliveryQueue | null
  readonly inputRoute: TextInput['route']
  readonly inputUpstream: WeakMap<Replica, TextInput['upstream']>
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
      const mapping = route.mapping.text
      if (mapping === null) continue
      this.routes.set(route, {
        route,
        mapping,
        upstream: new TextUpstream(route.name, route.pool, deps.settings, deps.metrics),
        queue: route.config.async
          ? new DeliveryQueue(deps.settings.asyncQueueSize, deps.settings.asyncConcurrency)
          : null,
        inputRoute: Object.freeze({
          name: route.name,
          params: route.config.params,
          checksToken: route.textAuth.required
        }),
        inputUpstream: new WeakMap()
      })
    }
  }

  /** True when the route has a text mapping (else its text paths are 404). */
  serves(route: RouteRuntime): boolean {
    return this.routes.has(route)
  }

  /** The pipeline of one utterance. Never throws: a bug becomes INTERNAL. */
  async handle(req: IncomingUtterance): Promise<TextResult> {
    const rt = this.routes.get(req.route)
    if (rt === undefined) return this.refuse(req, new GatewayError('ROUTE_NOT_FOUND'))
    const { metrics } = this.deps
    const parsed = parseJson(req.body.toString('utf8'))
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
    const auth = checkCredential(req.route.textAuth, msg.authorizationHeader, req.authorization)
    if (auth !== null) {
      metrics.authFailures.inc({ hook: 'text', reason: auth === 'AUTH_MISSING' ? 'missing' : 'invalid' })
      return this.refuse(req, new GatewayError(auth))
    }
    const problems = checkUtterance(msg)
    if (problems.length > 0) {
      metrics.validationFailures.inc({ hook: 'text' })
      return this.refuse(req, new GatewayError('MESSAGE_INVALID', { pointers: problems.map(p => p.pointer) }), problems)
    }
    const { request, message } = normalizeUtterance(msg, rt.inputRoute.checksToken)
    const input: TextInput = { request, message, requestId: req.requestId, route: rt.inputRoute, upstream: NO_UPSTREAM }
    if (rt.queue !== null) {
      const accepted = rt.queue.offer(async () => {
        await this.deliver(rt, input)
      })
      if (!accepted) return this.refuse(req, new GatewayError('QUEUE_FULL'))
      return { ok: true, status: 202, json: JSON.stringify({ accepted: true, requestId: req.requestId }) }
    }
    return await this.deliver(rt, input)
  }

  /** Stop every vendor pool (the listener is closing). */
  async close(): Promise<void> {
    await Promise.all([...this.routes.values()].map(async rt => await rt.upstream.close()))
  }

  /** The vendor call and the answer mapping; shared by synchronous answers and background delivery. */
  private async deliver(rt: RouteText, input: TextInput): Promise<TextResult> {
    const { metrics } = this.deps
    // Where text.request failed, for the log line only: it may quote what an expression produced.
    const mapping = { pointer: '', error: '' }
    let out: CallOutcome
    const built = (mapped: MappedOutcome): OutgoingRequest | GatewayError => {
      if (mapped.ok) return mapped.request
      mapping.pointer = mapped.pointer
      mapping.error = mapped.error
      return new GatewayError('MAPPING_FAILED')
    }
    try {
      out = await rt.upstream.call(
        replica => {
          input.upstream = this.upstreamInput(rt, replica)
          const mapped = mapRequest(rt.mapping, input)
          return mapped instanceof Promise ? mapped.then(built) : built(mapped)
        },
        { idempotent: rt.mapping.idempotent }
      )
    } catch (err) {
      return this.fail(rt, input, new GatewayError('INTERNAL', { cause: err }), { err })
    }
    if (!out.ok) {
      if (mapping.pointer !== '') {
        metrics.mappingErrors.inc({ route: rt.route.name, stage: 'text_request' })
        return this.fail(rt, input, out.error, {
          upstream: out.replica?.name,
          mapping: rt.route.mapping.file,
          pointer: mapping.pointer,
          mappingError: mapping.error
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
      return { ok: true, status: 200, json: out.answer.json ?? JSON.stringify(out.answer.body ?? null) }
    }
    input.response = out.answer
    const evaluated = evaluate(rt.mapping.response, input)
    const shaped = evaluated instanceof Promise ? await evaluated : evaluated
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
    return { ok: true, status: 200, json }
  }

  private upstreamInput(rt: RouteText, replica: Replica): TextInput['upstream'] {
    let u = rt.inputUpstream.get(replica)
    if (u === undefined) {
      const credential = replica.config.credential
      u = Object.freeze({ name: replica.name, credential: credential ?? null, hasCredential: credential !== undefined })
      rt.inputUpstream.set(replica, u)
    }
    return u
  }

  /** A refusal before any vendor work: logged once (never the body or headers). */
  private refuse(req: IncomingUtterance, error: GatewayError, problems: readonly Problem[] = []): TextResult {
    this.deps.log[logLevelOf(error.code)](
      {
        event: 'text_refused',
        route: req.route.name,
        requestId: req.requestId,
        code: error.code,
        pointers: error.pointers.length > 0 ? error.pointers : undefined
      },
      error.message
    )
    return { ok: false, error, problems, extra: {} }
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
    return { ok: false, error, problems: [], extra }
  }
}

const NO_UPSTREAM: TextInput['upstream'] = Object.freeze({ name: '', credential: null, hasCredential: false })

/**
 * Constant-time check of the body's authorizationHeader and the Authorization header against the
 * route's text list; each may be the raw configured value or `Bearer <value>`. null: accepted.
 */
export function checkCredential(
  list: CredentialList,
  fromBody: unknown,
  header: string
): 'AUTH_MISSING' | 'AUTH_INVALID' | null {
  if (!list.required) return null
  let presented = false
  for (const v of [fromBody, header]) {
    if (typeof v !== 'string' || v === '') continue
    presented = true
    // The bearer form first: it is the usual one, and then one hash settles it.
    const bearer = v.length > 7 && v.slice(0, 7).toLowerCase() === 'bearer '
    if (bearer && list.check(v.slice(7).trim()).ok) return null
    if (list.check(v).ok) return null
  }
  return presented ? 'AUTH_INVALID' : 'AUTH_MISSING'
}

/** Nesting, then the interface schema (2.8 when the body names its data messageMetaData, else 2.7). */
export function checkUtterance(msg: Record<string, unknown>): Problem[] {
  const deep = tooDeep(msg, MAX_DEPTH)
  if (deep !== null) return [{ pointer: deep, message: `nests deeper than ${MAX_DEPTH} levels` }]
  const validate =
    'messageMetaData' in msg && !('messageData' in msg)
      ? validator('agent-assist-utterance')
      : validator('webhooks-messages-request')
  return validate(msg) ? [] : problemsOf(validate.errors)
}

/** JSON pointer of the first value nested deeper than `max` (the root is depth 0), or null. Iterative. */
export function tooDeep(root: unknown, max: number): string | null {
  const values: unknown[] = [root]
  const depths: number[] = [0]
  const parents: number[] = [-1]
  const keys: string[] = ['']
  const stack: number[] = [0]
  while (stack.length > 0) {
    const i = stack.pop()!
    const v = values[i]
    if (v === null || typeof v !== 'object') continue
    if (depths[i] >= max) {
      const parts: string[] = []
      for (let j = i; j > 0; j = parents[j]) parts.push(keys[j].replace(/~/g, '~0').replace(/\//g, '~1'))
      return `/${parts.reverse().join('/')}`
    }
    for (const k of Object.keys(v)) {
      values.push((v as Record<string, unknown>)[k])
      depths.push(depths[i] + 1)
      parents.push(i)
      keys.push(k)
      stack.push(values.length - 1)
    }
  }
  return null
}

/**
 * Bounded background delivery: at most `size` jobs wait and `concurrency` run. `offer` is false when
 * full. Jobs report their own failures; a job that throws is a bug and must not stop the queue.
 */
export class DeliveryQueue {
  private waiting: (() => Promise<void>)[] = []
  private head = 0
  private running = 0

  constructor(
    private readonly size: number,
    private readonly concurrency: number
  ) {}

  get pending(): number {
    return this.waiting.length - this.head
  }

  offer(job: () => Promise<void>): boolean {
    if (this.pending >= this.size) return false
    this.waiting.push(job)
    this.pump()
    return true
  }

  private pump(): void {
    while (this.running < this.concurrency && this.pending > 0) {
      const job = this.waiting[this.head++]
      if (this.head > 1024 && this.head * 2 > this.waiting.length) {
        this.waiting = this.waiting.slice(this.head)
        this.head = 0
      }
      this.running++
      job()
        .catch(() => {})
        .finally(() => {
          this.running--
          this.pump()
        })
    }
  }
}
