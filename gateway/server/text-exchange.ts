import type { HttpRequest, HttpResponse } from 'uWebSockets.js'
import { afterFailureDelay } from '../auth/failure-budget'
import { UNKNOWN_TENANT } from '../auth/tenant-credentials'
import { systemClock } from '../clock'
import { CODES, GatewayError, logLevelOf, type ErrorCode } from '../errors'
import type { RouteRuntime } from '../route'
import { scrubberFor, sentIn } from '../telemetry/scrub'
import { requestIdFrom } from '../telemetry/trace'
import type { TraceSpan } from '../telemetry/tracing'
import type { IncomingUtterance, TextResult } from '../text/exchange-types'
import type { TextHook } from '../text/utterance'
import {
  afterParse,
  connectionCloses,
  countRefusal,
  DRAIN_BYTES,
  headerProblem,
  scannedHeaderBytes,
  scannedHeaders
} from './front-door'
import { headerBytesOver } from './header-limit'
import { problemBody, readBody, send } from './http'
import type { ServerState } from './state'
import { type Ending, type ExchangeActions, type ExchangeEvent, type ExchangeState, NEXT } from './text-states'

const JSON_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i

/** What the text route keeps per route: its answer counters and duration histogram (server/text-route.ts). */
export interface TextCounters {
  /** `tenant`: whose request it was (tenant_utterances_total), `unknown` when no credential was accepted. */
  count: (route: string, status: number, seconds: number, tenant: string) => void
}

/**
 * One text hook request, as named steps: `head` (copy out of req; the server's own refusals, before a byte
 * of the body is buffered: a bad head 400, unknown route 404, draining 503, headers 431, not JSON 415, a
 * declared length over text.maxBodyBytes 413), `body` (bounded), `dispatch` (after uWS's parse pass, to
 * text/utterance), `answer` (scrubbed, counted, one access line). One object per request, no closure per
 * step. Every answer carries x-request-id. Its states, and what each event does in each: server/text-states.ts.
 */
export class TextExchange {
  private phase: Phase = { state: 'HEAD' }
  private readonly started = performance.now()
  private readonly contentType: string
  private readonly authorization: string
  private readonly declaredLength: string
  private readonly requestId: string
  /** The utterance's span (telemetry/tracing.ts): the caller's trace continued, ended with the answer. */
  private readonly span: TraceSpan
  private readonly badHead: string | null
  /** Header bytes counted by headerProblem's scan (one pass over the headers per request). */
  private readonly headBytes: number
  /** How the answer leaves the connection (text-states.ts): set by the head. */
  private ending: Ending
  private readonly address: string
  private readonly headers: Record<string, string>
  /**
   * What the text hook was handed, kept for the answer: its body as it came (the answer never confirms a
   * secret the caller sent itself) and its `tenant` once the credential was accepted. None before dispatch.
   */
  private utterance: IncomingUtterance | null = null

  constructor(
    private readonly res: HttpResponse,
    req: HttpRequest,
    private readonly route: RouteRuntime | null | undefined,
    private readonly path: string,
    private readonly state: ServerState,
    private readonly hook: Pick<TextHook, 'serves' | 'handle'>,
    private readonly counters: TextCounters
  ) {
    // MUST come first (uWS): after an abort, res must never be touched again.
    res.onAborted(() => {
      this.move('abort')
    })
    // MUST copy out of req now: it is stack-allocated and gone after this handler returns. The front door
    // (front-door.ts): a repeated or malformed content-length or host is refused and closed; `connection:
    // close` is honoured (uWS here does not). Its one pass over the headers also reads the ones used here.
    this.badHead = headerProblem(req, state.metrics)
    this.headBytes = scannedHeaderBytes()
    const h = scannedHeaders()
    this.contentType = h.contentType
    this.authorization = h.authorization
    this.declaredLength = h.contentLength
    this.requestId = requestIdFrom(h.requestId)
    this.ending = this.badHead !== null || connectionCloses(h.connection) ? 'close' : 'keep'
    this.address = Buffer.from(res.getRemoteAddressAsText()).toString('utf8')
    this.span = state.tracing.start('utterance', h.traceparent, {
      'http.request.method': 'POST',
      'url.path': path,
      'client.address': this.address,
      'assist_gateway.route': route?.name,
      'assist_gateway.request_id': this.requestId
    })
    this.headers = { 'x-request-id': this.requestId }
    this.head(req)
  }

  private get routeName(): string {
    return this.route?.name ?? ''
  }

  /** One event, as NEXT says: what to do, and the next state (READING and PARSING are entered with their data by the caller). */
  private move<E extends ExchangeEvent>(event: E): ExchangeActions[E] {
    const [action, to] = NEXT[this.phase.state][event]
    if (to !== this.phase.state && to !== 'READING' && to !== 'PARSING') this.phase = { state: to }
    return action
  }

  /** The server's own refusals; then the body is read. */
  private head(req: HttpRequest): void {
    const { state, route } = this
    if (this.badHead !== null) return this.refuse('BAD_REQUEST', false, this.badHead)
    if (route === null || route === undefined || !this.hook.serves(route)) return this.refuse('ROUTE_NOT_FOUND')
    if (state.draining) return this.refuse('SHUTTING_DOWN')
    if (headerBytesOver(req, state, 'text', this.headBytes)) return this.refuse('HEADERS_TOO_LARGE', true)
    if (!JSON_TYPE.test(this.contentType)) return this.refuse('UNSUPPORTED_MEDIA_TYPE')
    const limit = state.config.text.maxBodyBytes
    if (this.declaredLength !== '' && Number(this.declaredLength) > limit) {
      if (Number(this.declaredLength) > limit + DRAIN_BYTES) return this.tooLarge()
      this.move('drain')
      this.ending = 'drain'
      this.res.onData((_chunk, isLast) => {
        if (isLast && this.move('over') === 'too-large') this.tooLarge()
      })
      return
    }
    this.move('read')
    this.phase = { state: 'READING', route }
    readBody(this.res, limit, this.onBody)
  }

  /** The body (null: over the limit); the vendor call waits for uWS's parse pass. */
  private readonly onBody = (body: Buffer | null): void => {
    const phase = this.phase
    if (body === null) {
      if (this.move('over') === 'too-large') this.tooLarge()
      return
    }
    if (this.move('body') === 'ignore' || phase.state !== 'READING') return
    this.phase = { state: 'PARSING', route: phase.route, body }
    afterParse(this.onParsed, undefined)
  }

  /** uWS's parse pass after the body: the vendor call, or the count of a request the platform left before it. */
  private readonly onParsed = (): void => {
    const phase = this.phase
    switch (this.move('parsed')) {
      case 'dispatch':
        if (phase.state === 'PARSING') this.dispatch(phase.route, phase.body)
        return
      case 'count-abort':
        countRefusal(this.state.metrics, 'aborted_before_dispatch')
        this.state.log.debug(
          { event: 'text_dropped', route: this.routeName, requestId: this.requestId },
          'the platform went away before dispatch'
        )
        return
      case 'ignore':
        return
    }
  }

  private dispatch(route: RouteRuntime, body: Buffer): void {
    const req: IncomingUtterance = {
      route,
      body,
      authorization: this.authorization,
      requestId: this.requestId,
      span: this.span,
      address: this.address,
      admission: this.state.admission
    }
    this.utterance = req
    this.hook.handle(req).then(this.answered, (err: unknown) => {
      this.state.log.error(
        { event: 'text_bug', route: this.routeName, requestId: this.requestId, err },
        'unexpected error in the text pipeline'
      )
      this.answer({ ok: false, error: new GatewayError('INTERNAL'), problems: [], extra: {} })
    })
  }

  /** A refused credential (counted when its check settled) is answered no sooner than auth.failureDelayMs. */
  private readonly answered = (result: TextResult): void => {
    const code = result.ok ? null : result.error.code
    if (code === 'AUTH_MISSING' || code === 'AUTH_INVALID')
      afterFailureDelay(this.state.config.auth, systemClock, () => this.answer(result))
    else this.answer(result)
  }

  private refuse(code: ErrorCode, tooLarge = false, detail?: string): void {
    // Anyone can cause these: rate-limited per code (telemetry/log-limit.ts), with their access lines.
    const quiet = !this.state.logLimit.allow(code)
    if (!quiet)
      this.state.log[logLevelOf(code)](
        {
          event: 'text_refused',
          route: this.routeName || undefined,
          requestId: this.requestId,
          code,
          address: this.address
        },
        CODES[code].text
      )
    this.answer({ ok: false, error: new GatewayError(code, { detail }), problems: [], extra: {}, quiet }, tooLarge)
  }

  /** A body over text.maxBodyBytes: 413 with `connection: close`, counted as a limit refusal. */
  private tooLarge(): void {
    this.state.metrics.limitRefusals.inc({ limit: 'body_size', hook: 'text' })
    this.refuse('MESSAGE_TOO_LARGE', true)
  }

  /** Each exchange is answered once: an answer that closes the connection goes after uWS's parse pass (front-door.ts). */
  private answer(result: TextResult, tooLarge = false): void {
    if (this.ending !== 'keep' && this.move('defer') === 'defer')
      return afterParse(() => this.deliver(result, tooLarge), undefined)
    this.deliver(result, tooLarge)
  }

  private deliver(result: TextResult, tooLarge: boolean): void {
    switch (this.move('answer')) {
      case 'send':
        return this.write(result, tooLarge)
      case 'drop':
        this.state.log.debug(
          { event: 'text_aborted', route: this.routeName, requestId: this.requestId },
          'the platform went away before the answer'
        )
        this.span.event('aborted')
        this.span.end()
        return
      case 'ignore':
        return
    }
  }

  /** The answer, scrubbed, with the connection left as `ending` says. */
  private write(result: TextResult, tooLarge: boolean): void {
    if (result.ok) {
      const body = this.scrub(result.json)
      send(this.res, result.status, 'application/json', body, this.headers, this.ending !== 'keep')
      return this.done(result.status, body.length, result.upstream, null, false)
    }
    const status = CODES[result.error.code].status
    if (typeof result.extra.retryAfterSeconds === 'number')
      this.headers['retry-after'] = String(result.extra.retryAfterSeconds)
    const body = this.scrub(problemBody(result.error, result.problems, { requestId: this.requestId, ...result.extra }))
    // Past the body limit the answer goes at once with `connection: close`, so the client stops sending;
    // uWS discards whatever of the body still arrives (nothing more is buffered). Not end(body, true):
    // uWS then resets the socket while the client is still writing, and clients (undici among them)
    // lose the 413 to an EPIPE/ECONNRESET. uWS has no lingering close. A declared body at most
    // DRAIN_BYTES over the limit is read to its end first (ending `drain`), and then the connection is closed.
    if (tooLarge && this.ending === 'keep')
      send(this.res, status, 'application/problem+json', body, { ...this.headers, connection: 'close' })
    else send(this.res, status, 'application/problem+json', body, this.headers, this.ending !== 'keep')
    this.done(status, body.length, result.upstream, result.error.code, result.quiet === true)
  }

  /** The route's secrets never reach the platform, except what the caller sent itself (telemetry/scrub.ts). */
  private scrub(json: string): string {
    const secrets = this.route?.config.secrets
    if (secrets === undefined) return json
    return scrubberFor(secrets).json(
      json,
      sentIn(() => `${this.authorization}\n${this.utterance?.body.toString('utf8') ?? ''}`)
    )
  }

  /**
   * Counted, its span ended (an error status for a 5xx, as OpenTelemetry's HTTP conventions say), and one
   * access line at `log.accessLog`'s level (none for a refusal the flood cap left out: `quiet`).
   */
  private done(
    status: number,
    bytesOut: number,
    upstream: string | undefined,
    code: ErrorCode | null,
    quiet: boolean
  ): void {
    const ms = performance.now() - this.started
    this.counters.count(this.routeName, status, ms / 1000, this.utterance?.tenant ?? UNKNOWN_TENANT)
    this.span.set({
      'http.response.status_code': status,
      'assist_gateway.upstream': upstream,
      'assist_gateway.error.code': code ?? undefined
    })
    this.span.end(status >= 500 && code !== null ? code : undefined)
    if (code !== null)
      this.state.metrics.recent.add({
        kind: 'refusal',
        hook: 'text',
        route: this.routeName,
        code,
        detail: String(status)
      })
    const level = this.state.config.log.accessLog
    if (quiet || level === 'off' || !this.state.log.isLevelEnabled(level)) return
    this.state.log[level](
      {
        event: 'text_request',
        address: this.address,
        method: 'POST',
        path: this.path,
        route: this.routeName || undefined,
        tenant: this.utterance?.tenant ?? UNKNOWN_TENANT,
        status,
        bytesIn: this.utterance?.body.length ?? 0,
        bytesOut,
        ms: Math.round(ms * 10) / 10,
        upstream,
        requestId: this.requestId,
        traceId: this.span.traceId
      },
      'text request'
    )
  }
}

/** The exchange's state with the data only it has: the route being served, and the body waiting for dispatch. */
type Phase =
  | { readonly state: 'READING'; readonly route: RouteRuntime }
  | { readonly state: 'PARSING'; readonly route: RouteRuntime; readonly body: Buffer }
  | { readonly state: Exclude<ExchangeState, 'READING' | 'PARSING'> }
