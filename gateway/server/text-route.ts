import type { HttpResponse, TemplatedApp } from 'uWebSockets.js'
import { UNKNOWN_TENANT } from '../auth/tenant-credentials'
import { CODES, GatewayError, type ErrorCode } from '../errors'
import type { RouteRuntime } from '../route'
import type { TextHook } from '../text/utterance'
import { closeAfterParse, wantsClose } from './front-door'
import { problemBody, send } from './http'
import type { ServerState } from './state'
import { TextExchange } from './text-exchange'

const DEFAULT_TEXT_PATH = '/agent_assist_text_webhooks/utterance'

/**
 * POST /text/{route} and POST /agent_assist_text_webhooks/utterance (the default route): one
 * TextExchange per request (server/text-exchange.ts), handed to text/utterance. Other methods on these
 * paths: 405. Every answer is counted here, by route and status, and by tenant and status.
 */
export function mountText(app: TemplatedApp, state: ServerState, hook: Pick<TextHook, 'serves' | 'handle'>): void {
  const metrics = state.metrics
  // Each label set's cell, looked up once (a Map read per answer, not prom-client's label hashing).
  const counters = new Map<string, { inc: () => void }>()
  const byTenant = new Map<string, { inc: () => void }>()
  const durations = new Map<string, { observe: (v: number) => void }>()
  const count = (route: string, status: number, seconds: number, tenant: string): void => {
    const code = String(status)
    cellOf(counters, `${route}\n${code}`, () => metrics.textRequestCounts.cell(route, code)).inc()
    cellOf(byTenant, `${tenant}\n${code}`, () => metrics.tenantUtteranceCounts.cell(tenant, code)).inc()
    cellOf(durations, route, () => metrics.textDuration.labels(route)).observe(seconds)
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
    count(route?.name ?? '', status, 0, UNKNOWN_TENANT)
  }

  const counted = { count }
  app.post('/text/:route', (res, req) => {
    const route = state.routes.get(req.getParameter(0) ?? '')
    new TextExchange(res, req, route, req.getUrl(), state, hook, counted)
  })
  app.post(DEFAULT_TEXT_PATH, (res, req) => {
    new TextExchange(res, req, state.defaultRoute, DEFAULT_TEXT_PATH, state, hook, counted)
  })
  // Registered before the catch-all; uWS prefers the method-specific handlers above.
  app.any('/text/:route', (res, req) => notAllowed(res, state.routes.get(req.getParameter(0) ?? ''), wantsClose(req)))
  app.any(DEFAULT_TEXT_PATH, (res, req) => notAllowed(res, state.defaultRoute, wantsClose(req)))
}

/** The cell under `key`, made by `make` the first time. */
function cellOf<C>(cells: Map<string, C>, key: string, make: () => C): C {
  let cell = cells.get(key)
  if (cell === undefined) {
    cell = make()
    cells.set(key, cell)
  }
  return cell
}
