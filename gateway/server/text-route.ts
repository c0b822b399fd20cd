import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js'
import { CODES, GatewayError, logLevelOf, type ErrorCode } from '../errors'
import { afterFailureDelay } from '../auth/failure-budget'
import { systemClock } from '../clock'
import type { RouteRuntime } from '../route'
import { scrubberFor, sentIn } from '../telemetry/scrub'
import { requestIdFrom, traceFrom } from '../telemetry/trace'
import type { TextHook, TextResult } from '../text/utterance'
import { afterParse, closeAfterParse, countRefusal, DRAIN_BYTES, headerProblem, wantsClose } from './front-door'
import { headerBytesOver } from './header-limit'
import { problemBody, readBody, send } from './http'
import type { ServerState } from './state'

const DEFAULT_TEXT_PATH = '/agent_assist_text_webhooks/utterance'

const JSON_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i

/**
 * POST /text/{route} and POST /agent_assist_text_webhooks/utterance (the default route), handed to
 * text/utterance. The server's own refusals come first, before a byte of the body is buffered:
 * unknown route 404, draining 503, not JSON 415, a declared length over text.maxBodyBytes 413. Other
 * methods on these paths: 405. Every answer carries x-request-id and is counted here.
 */
export function mountText(app: TemplatedApp, state: ServerState, hook: Pick<TextHook, 'serves' | 'handle'>): void {
  const metrics = state.metrics
  // Every answer body (vendor answers and problem+json) passes here: configured secrets never reach the
  // platform. The matcher of the config in force (cached per secrets list; a reload may bring new ones).
  const counters = new Map<string, { inc: () => void }>()
  const durations = new Map<string, { observe: (v: number) => void }>()
  const count = (route: string, status: number, seconds: number): void => {
    const key = `${route}\n${status}`
    let c = counters.get(key)
    if (c === undefined) {
      c = metrics.textRequests.labels(route, String(status))
      counters.set(key, c)
    }
    c.inc()
    let d = durations.get(route)
    if (d === undefined) {
      d = metrics.textDuration.labels(route)
      durations.set(route, d)
    }
    d.observe(seconds)
  }

  const handle = (res: HttpResponse, req: HttpRequest, route: RouteRuntime | null | undefined): void => {
    const started = performance.now()
    // MUST come first (uWS): after an abort, res must never be touched again.
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    // MUST copy out of req now: it is stack-allocated and gone after this handler returns.
    const contentType = req.getHeader('content-type')
    const authorization = req.getHeader('authorization')
    const declaredLength = req.getHeader('content-length')
    const requestId = requestIdFrom(req.getHeader('x-request-id'))
    const trace = traceFrom(req.getHeader('traceparent'))
    // The front door (front-door.ts): a repeated or malformed content-length or host is refused and closed;
    // `connection: close` is honoured (uWS here does not). Both must read req now.
    const badHead = headerProblem(req, metrics)
    const close = badHead !== null || wantsClose(req)
    const routeName = route?.name ?? ''
    const headers: Record<string, string> = { 'x-request-id': requestId }
    const address = clientAddress(res)
    // The answer is scrubbed of the route's secrets, except those the caller sent itself (telemetry/scrub.ts).
    let sent: Buffer | null = null
    const keep = sentIn(() => `${authorization}\n${sent?.toString('utf8') ?? ''}`)
    const scrub = (json: string): string =>
      route?.config.secrets === undefined ? json : scrubberFor(route.config.secrets).json(json, keep)
    /** One access line per request, at the configured level. */
    const access = (status: number, upstream: string | undefined): void => {
      const accessLevel = state.config.log.accessLog
      if (accessLevel === 'off' || !state.log.isLevelEnabled(accessLevel)) return
      state.log[accessLevel](
        {
          event: 'text_request',
          route: routeName || undefined,
          status,
          ms: Math.round((performance.now() - started) * 10) / 10,
          upstream,
          requestId,
          traceId: trace.traceId
        },
        'text request'
      )
    }

    let deferred = false
    const answer = (result: TextResult, tooLarge = false, drained = false): void => {
      // An answer that closes the connection goes after uWS's parse pass (front-door.ts, closeAfterParse).
      if ((close || drained) && !deferred) {
        deferred = true
        return afterParse(() => answer(result, tooLarge, drained), undefined)
      }
      if (aborted) {
        state.log.debug(
          { event: 'text_aborted', route: routeName, requestId },
          'the platform went away before the answer'
        )
        return
      }
      if (result.ok) {
        send(res, result.status, 'application/json', scrub(result.json), headers, close)
        count(routeName, result.status, (performance.now() - started) / 1000)
        access(result.status, result.upstream)
        return
      }
      const status = CODES[result.error.code].status
      if (typeof result.extra.retryAfterSeconds === 'number')
        headers['retry-after'] = String(result.extra.retryAfterSeconds)
      const body = scrub(problemBody(result.error, result.problems, { requestId, ...result.extra }))
      // Past the body limit the answer goes at once with `connection: close`, so the client stops sending;
      // uWS discards whatever of the body still arrives (nothing more is buffered). Not end(body, true):
      // uWS then resets the socket while the client is still writing, and clients (undici among them)
      // lose the 413 to an EPIPE/ECONNRESET. uWS has no lingering close. A declared body at most
      // DRAIN_BYTES over the limit is read to its end first (`drained`), and then the connection is closed.
      if (tooLarge && !drained && !close)
        send(res, status, 'application/problem+json', body, { ...headers, connection: 'close' })
      else send(res, status, 'application/problem+json', body, headers, close || drained)
      count(routeName, status, (performance.now() - started) / 1000)
      access(status, result.upstream)
    }
    const refuse = (code: ErrorCode, tooLarge = false, detail?: string): void => {
      state.log[logLevelOf(code)](
        { event: 'text_refused', route: routeName || undefined, requestId, code },
        CODES[code].text
      )
      answer({ ok: false, error: new GatewayError(code, { detail }), problems: [], extra: {} }, tooLarge, drained)
    }
    let drained = false

    if (badHead !== null) return refuse('BAD_REQUEST', false, badHead)
    if (route === null || route === undefined || !hook.serves(route)) return refuse('ROUTE_NOT_FOUND')
    if (state.draining) return refuse('SHUTTING_DOWN')
    if (headerBytesOver(req, state, 'text')) return refuse('HEADERS_TOO_LARGE', true)
    if (!JSON_TYPE.test(contentType)) return refuse('UNSUPPORTED_MEDIA_TYPE')
    const limit = state.config.text.maxBodyBytes
    if (declaredLength !== '' && Number(declaredLength) > limit) {
      if (Number(declaredLength) > limit + DRAIN_BYTES) return refuseTooLarge(state, refuse)
      drained = true
      res.onData((_chunk, isLast) => {
        if (isLast && !aborted) refuseTooLarge(state, refuse)
      })
      return
    }
    // The vendor call starts after uWS's parse pass (afterParse): a pipelined request behind this one makes
    // uWS abort this one, which is then dropped here before it reaches the vendor. The same callback runs
    // twice (body read, then dispatch): no closure per request for the deferral.
    let ready = false
    const onBody = (body: Buffer | null): void => {
      if (aborted) {
        if (ready) {
          countRefusal(metrics, 'aborted_before_dispatch')
          state.log.debug(
            { event: 'text_dropped', route: routeName, requestId },
            'the platform went away before dispatch'
          )
        }
        return
      }
      if (body === null) return refuseTooLarge(state, refuse)
      sent = body
      if (!ready) {
        ready = true
        return afterParse(onBody, body)
      }
      hook
        .handle({
          route,
          body,
          authorization,
          requestId,
          traceparent: trace.traceparent,
          address,
          admission: state.admission
        })
        .then(delayAuthFailure(state, answer), (err: unknown) => {
          state.log.error(
            { event: 'text_bug', route: routeName, requestId, err },
            'unexpected error in the text pipeline'
          )
          answer({ ok: false, error: new GatewayError('INTERNAL'), problems: [], extra: {} })
        })
    }
    readBody(res, limit, onBody)
  }

  const notAllowed = (res: HttpResponse, route: RouteRuntime | null | undefined, close = false): void => {
    const code: ErrorCode =
      route === null || route === undefined || !hook.serves(route) ? 'ROUTE_NOT_FOUND' : 'METHOD_NOT_ALLOWED'
    const status = CODES[code].status
    const write = (): void =>
      send(
        res,
        status,
        'application/problem+json',
        problemBody(new GatewayError(code)),
        code === 'METHOD_NOT_ALLOWED' ? { allow: 'POST' } : {},
        close
      )
    if (close) closeAfterParse(res, write)
    else write()
    count(route?.name ?? '', status, 0)
  }

  app.post('/text/:route', (res, req) => handle(res, req, state.routes.get(req.getParameter(0) ?? '')))
  app.post(DEFAULT_TEXT_PATH, (res, req) => handle(res, req, state.defaultRoute))
  // Registered before the catch-all; uWS prefers the method-specific handlers above.
  app.any('/text/:route', (res, req) => notAllowed(res, state.routes.get(req.getParameter(0) ?? ''), wantsClose(req)))
  app.any(DEFAULT_TEXT_PATH, (res, req) => notAllowed(res, state.defaultRoute, wantsClose(req)))
}

/** The platform's address as the socket shows it: the failure budget's key. */
function clientAddress(res: HttpResponse): string {
  return Buffer.from(res.getRemoteAddressAsText()).toString('utf8')
}

/** A body over text.maxBodyBytes: 413 with `connection: close`, counted as a limit refusal. */
function refuseTooLarge(state: ServerState, refuse: (code: ErrorCode, tooLarge: boolean) => void): void {
  state.metrics.limitRefusals.inc({ limit: 'body_size', hook: 'text' })
  refuse('MESSAGE_TOO_LARGE', true)
}

/** `answer`, except that a refused credential (counted when its check settled) is answered after auth.failureDelayMs. */
function delayAuthFailure(state: ServerState, answer: (r: TextResult) => void): (r: TextResult) => void {
  return result => {
    const code = result.ok ? null : result.error.code
    if (code === 'AUTH_MISSING' || code === 'AUTH_INVALID')
      afterFailureDelay(state.config.auth, systemClock, () => answer(result))
    else answer(result)
  }
}
