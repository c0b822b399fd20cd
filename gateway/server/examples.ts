import type * as uWS from 'uWebSockets.js'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { checkHandshake, connectedFrame, errorFrame } from '../audio/leg/handshake'
import { checkUnderBudget } from '../auth/admission'
import { afterFailureDelay } from '../auth/failure-budget'
import { systemClock } from '../clock'
import { CODES, GatewayError } from '../errors'
import { packageRoot } from '../paths'
import type { RouteRuntime } from '../route'
import { readBody, send, sendJson, sendProblem } from './http'
import type { ServerState } from './state'

const BASE = '/agent_assist_audio_websocket_hooks'
const DRY_RUN_LIMIT = 64 * 1024

/** The three audio example endpoints of interface 4.2. */
export function mountExamples(app: uWS.TemplatedApp, state: ServerState): void {
  const example = readFileSync(join(packageRoot(), 'examples', 'init-message.json'), 'utf8')

  const pickRoute = (name: string): RouteRuntime | null =>
    name === '' ? (state.defaultRoute ?? state.routes.values().next().value ?? null) : (state.routes.get(name) ?? null)

  app.get(`${BASE}/example-websocket-server`, (res, req) => {
    const route = pickRoute(req.getQuery('route') ?? '')
    const host = req.getHeader('host') || `localhost:${state.config.listen.port}`
    if (route === null) return sendProblem(res, 'ROUTE_NOT_FOUND')
    const scheme = state.config.listen.tls !== null ? 'wss' : 'ws'
    sendJson(res, 200, { route: route.name, url: `${scheme}://${host}/audio/${encodeURIComponent(route.name)}` })
  })

  app.get(`${BASE}/initializemessage-example`, res => {
    send(res, 200, 'application/json', example)
  })

  // The dry-run runs the audio hook's whole credential check, so it is guarded as the hook is: the address's
  // failure budget (429 past it), auth.failureDelayMs before a refusal, auth_failures_total{hook="dry_run"}.
  app.post(`${BASE}/custom-assist-endpoint/initialize-audio-message-example`, (res, req) => {
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    const route = pickRoute(req.getQuery('route') ?? '')
    const address = Buffer.from(res.getRemoteAddressAsText()).toString('utf8')
    if (route === null) return sendProblem(res, 'ROUTE_NOT_FOUND')
    const dryRun = async (body: Buffer | null): Promise<void> => {
      if (aborted) return
      if (body === null) return sendProblem(res, 'MESSAGE_TOO_LARGE')
      const text = body.toString('utf8')
      const guarded = await checkUnderBudget(
        state.admission,
        address,
        () => checkHandshake(route, text, state.fleetKey.callerKey),
        c => !c.ok && c.stage === 'auth'
      )
      if (!guarded.ok) {
        state.metrics.limitRefusals.inc({ limit: 'failure_budget', hook: 'dry_run' })
        if (!aborted) sendProblem(res, 'TOO_MANY_FAILURES', [], { 'retry-after': String(guarded.retryAfterSeconds) })
        return
      }
      const checked = guarded.result
      if (!checked.ok && checked.stage === 'auth') {
        state.metrics.authFailures.inc({ hook: 'dry_run', reason: checked.reason ?? 'invalid' })
        await new Promise<void>(resolve => afterFailureDelay(state.config.auth, systemClock, resolve))
      }
      if (aborted) return
      let response: string
      let closeCode: number | null = null
      if (!checked.ok) {
        response = errorFrame(checked.error, checked.problems)
        closeCode = CODES[checked.error.code].close
      } else if (!route.pool.hasAudioCapacity()) {
        const e = new GatewayError('NO_HEALTHY_UPSTREAM')
        response = errorFrame(e)
        closeCode = CODES[e.code].close
      } else {
        response = connectedFrame({ route: route.name, dryRun: true })
      }
      // The request is echoed only as its shape: the token, if any, is never sent back.
      const request = checked.ok
        ? {
            ...checked.init,
            ...(checked.init.authenticationToken !== undefined ? { authenticationToken: '[REDACTED]' } : {})
          }
        : null
      sendJson(res, 200, { route: route.name, request, response: JSON.parse(response), closeCode })
    }
    readBody(res, DRY_RUN_LIMIT, body => {
      dryRun(body).catch((err: unknown) => {
        state.log.error({ event: 'dry_run_bug', err }, 'unexpected error in the handshake dry-run')
        if (!aborted) sendProblem(res, 'INTERNAL')
      })
    })
  })
}
