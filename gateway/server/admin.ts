import { createHash, timingSafeEqual } from 'node:crypto'
import type * as uWS from 'uWebSockets.js'
import { GatewayError } from '../errors'
import { probeKind } from '../mapping/health'
import type { FinalScrape } from '../telemetry/final-scrape'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import { answerWhenSettled, send, sendJson, sendProblem } from './http'
import { readiness, readinessDetail } from './readiness'
import { addressOf, logRefusal, type RefusalLog } from './refusals'
import type { ServerState } from './state'

/**
 * `/livez` and `/readyz`, on the public and the metrics listeners: ready or not, and why not in general
 * terms (draining, nothing servable). Nothing per route, replica or instance: which routes (tenants) a
 * gateway serves is for the admin API (`GET /admin/readiness`).
 */
export function mountHealth(app: uWS.TemplatedApp, state: ServerState): void {
  app.get('/livez', res => sendJson(res, 200, { live: true }))
  app.get('/readyz', res => {
    const r = readiness(state)
    sendJson(res, r.ready ? 200 : 503, r)
  })
}

/**
 * A scrape of /metrics: the text once collected (told to `final`, for the linger after a drain), or a 500,
 * logged, when collecting failed. The main process's merged scrape (workers/main-admin.ts) answers the same way.
 */
export function answerScrape(
  res: uWS.HttpResponse,
  collect: () => Promise<{ contentType: string; text: string }>,
  log: Logger,
  final?: FinalScrape
): void {
  const began = final?.begin() ?? 0
  const collected = collect().catch((err: unknown) => {
    log.error({ event: 'metrics_failed', err }, 'collecting metrics failed')
    throw err
  })
  answerWhenSettled(
    res,
    collected,
    m => {
      send(res, 200, m.contentType, m.text)
      final?.answered(began)
    },
    () => send(res, 500, 'text/plain', 'metrics collection failed\n')
  )
}

/** The metrics listener (`metrics:`): /metrics, /livez, /readyz and nothing else. */
export function mountMetrics(app: uWS.TemplatedApp, state: ServerState, final?: FinalScrape): void {
  mountHealth(app, state)
  app.get('/metrics', res =>
    answerScrape(
      res,
      async () => ({ contentType: state.metrics.registry.contentType, text: await state.metrics.registry.metrics() }),
      state.log,
      final
    )
  )
}

/**
 * The admin API's token check: true when `token` is empty (a loopback admin listener without one: see
 * `browserRefusal`), or the request carries it as `Authorization: Bearer <token>`, or as the password of
 * `Authorization: Basic` (any user name: how a browser presents it, server/status-page.ts), compared in
 * constant time over hashes of equal length. The token never travels in a URL.
 */
export function adminAuthorized(token: string, authorization: string): boolean {
  if (token === '') return true
  const presented = presentedToken(authorization.trim())
  if (presented === null) return false
  const want = createHash('sha256').update(token, 'utf8').digest()
  const got = createHash('sha256').update(presented, 'utf8').digest()
  return timingSafeEqual(want, got)
}

function presentedToken(authorization: string): string | null {
  const bearer = /^bearer +(.+)$/i.exec(authorization)
  if (bearer !== null) return bearer[1]
  const basic = /^basic +([A-Za-z0-9+/=]+)$/i.exec(authorization)
  if (basic === null) return null
  const userPass = Buffer.from(basic[1], 'base64').toString('utf8')
  const colon = userPass.indexOf(':')
  return colon < 0 ? null : userPass.slice(colon + 1)
}

/** The challenges of a refused admin request: Bearer for API clients; a page also offers Basic, which browsers ask for. */
const BEARER_CHALLENGE = 'Bearer realm="assist-gateway admin"'
const BROWSER_CHALLENGE = 'Basic realm="assist-gateway admin", charset="UTF-8"'

/** Why the admin gate refused: no token, a wrong one, or (no token needed) a request a web page could send. */
export type AdminRefusal = 'missing' | 'invalid' | 'cross_origin'

/**
 * The admin API's gate: its bearer token (`admin.token` as the process started: a reload never changes who
 * may use the admin API; '' on loopback without one) and what a refusal does besides the 401 or 403
 * (counted as `auth_failures_total{hook="admin"}`, logged with the address, rate-limited).
 */
export interface AdminGate {
  token: () => string
  refused: (address: string, reason: AdminRefusal) => void
}

/** The refusal of an admin gate: counted and logged (server/refusals.ts). */
export function adminRefused(
  r: RefusalLog & { metrics: Pick<Metrics, 'authFailures'> }
): (address: string, reason: AdminRefusal) => void {
  return (address, reason) => {
    r.metrics.authFailures.inc({ hook: 'admin', reason })
    const code = reason === 'cross_origin' ? 'ADMIN_FORBIDDEN' : 'ADMIN_UNAUTHORIZED'
    logRefusal(r, 'admin_refused', code, { address, reason })
  }
}

/** The header every caller of the admin API sends with a request that changes something (the CLI, the docs). */
export const ADMIN_REQUESTED_WITH = 'assist-gateway'

/** A Host header naming the loopback interface (`localhost`, 127.0.0.0/8, [::1]), with or without a port. */
const LOOPBACK_HOST = /^(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d{1,5})?$/i
const JSON_TYPE = /^application\/json\s*(?:;|$)/i

/**
 * What a tokenless (loopback) admin API refuses: anything a web page that a browser on the host opened could
 * send. Such a page may post a form or a `text/plain` body anywhere, and a name it controls may resolve to
 * 127.0.0.1 (DNS rebinding), but it cannot set a custom header or a JSON content type on another origin
 * without a CORS preflight, which the admin API never answers. So: the Host must be a loopback name, an
 * Origin (browsers send one on every cross-origin request) must be the listener's own, and a request other
 * than GET/HEAD must say `content-type: application/json` and `x-requested-with: assist-gateway`. The
 * reason, or null when the request passes. MUST be called while `req` is valid.
 */
export function browserRefusal(req: uWS.HttpRequest): string | null {
  const host = req.getHeader('host')
  if (!LOOPBACK_HOST.test(host)) return 'its Host is not a loopback address or localhost'
  const origin = req.getHeader('origin')
  if (origin !== '' && origin.toLowerCase() !== `http://${host.toLowerCase()}`) return 'it comes from another origin'
  const method = req.getMethod().toLowerCase()
  if (method === 'get' || method === 'head') return null
  if (!JSON_TYPE.test(req.getHeader('content-type')) || req.getHeader('x-requested-with') !== ADMIN_REQUESTED_WITH)
    return `a ${method.toUpperCase()} needs content-type: application/json and x-requested-with: ${ADMIN_REQUESTED_WITH}`
  return null
}

/**
 * A handler of the admin API behind its gate: 401 ADMIN_UNAUTHORIZED without the token; without a token
 * to ask for (loopback), 403 ADMIN_FORBIDDEN for what a web page could send (`browserRefusal`).
 * `browser`: a page (the status page), whose 401 challenges with Basic so a browser asks for the token.
 */
export function guarded(
  gate: AdminGate,
  handler: (res: uWS.HttpResponse, req: uWS.HttpRequest) => void,
  browser = false
): (res: uWS.HttpResponse, req: uWS.HttpRequest) => void {
  return (res, req) => {
    const token = gate.token()
    if (token === '') {
      const why = browserRefusal(req)
      if (why === null) return handler(res, req)
      gate.refused(addressOf(res), 'cross_origin')
      return sendProblem(res, new GatewayError('ADMIN_FORBIDDEN', { detail: why }))
    }
    const authorization = req.getHeader('authorization')
    if (adminAuthorized(token, authorization)) return handler(res, req)
    gate.refused(addressOf(res), authorization === '' ? 'missing' : 'invalid')
    sendProblem(res, 'ADMIN_UNAUTHORIZED', [], { 'www-authenticate': browser ? BROWSER_CHALLENGE : BEARER_CHALLENGE })
  }
}

/** The admin API's reads of this process: /admin/upstreams, /admin/readiness, /admin/recent. */
export function mountAdmin(app: uWS.TemplatedApp, state: ServerState, token: AdminGate): void {
  // The last failovers, replica changes and refusals of this process (telemetry/recent.ts), newest first.
  app.get(
    '/admin/recent',
    guarded(token, res => sendJson(res, 200, state.metrics.recent.view()))
  )
  app.get(
    '/admin/readiness',
    guarded(token, res => {
      const r = readinessDetail(state)
      sendJson(res, r.ready ? 200 : 503, r)
    })
  )
  app.get(
    '/admin/upstreams',
    guarded(token, res => {
      // A route's tees are listed after it, each as the route `<route>/<tee>` of its own replicas.
      const all = [...state.routes.values()].flatMap(r => [r, ...(r.tees ?? []).map(t => t.runtime)])
      const routes = all.map(r => ({
        route: r.name,
        vendor: r.mapping.vendor,
        // How the replicas are probed (the mapping's health section, or the config's override).
        probe: probeKind(r.config, r.mapping, state.config.health.active),
        replicas: r.pool.replicas.map(p => ({
          name: p.name,
          healthy: p.healthy,
          ...p.describe(),
          activeStreams: p.activeStreams,
          fleetStreams: p.fleetStreams,
          inFlight: p.inFlight,
          consecutiveFailures: p.consecutiveFailures,
          ejections: p.ejections,
          audio: p.config.audio !== undefined,
          text: p.config.text !== undefined
        }))
      }))
      sendJson(res, 200, {
        instance: state.store.instanceId,
        store: { kind: state.store.kind, up: state.store.up() },
        parkedSessions: state.sessions.parkedCount,
        routes
      })
    })
  )
}
