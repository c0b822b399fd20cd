import * as uWS from 'uWebSockets.js'
import { RELAY_PATH } from '../audio/placement/relay-link'
import { RELAY_TOKEN_HEADER, type RelayClaims, type RelayVerdict } from '../auth/relay-token'
import { GatewayError } from '../errors'
import { audioBehavior, type Upgraded, type LegData } from './audio-route'
import { sendProblem } from './http'
import type { ServerState } from './state'

/**
 * A fleet listener: where other processes of the fleet relay the legs of sessions this process owns
 * (audio/placement/relay-link.ts), and nothing else. Two kinds, never the public listener:
 * - `worker`: each worker of `serve --workers N` on a loopback port of its own, for its sibling workers;
 * - `instance`: `fleet.host`/`fleet.port` (every worker of an instance shares it), for the other
 *   instances, opened only when `fleet.advertiseUrl` says where they reach it.
 * Every relay carries a relay token (auth/relay-token.ts) signed with the fleet's key, meant for this
 * process and this hop, not used before by this instance (whichever worker took it) and not expired: else 403
 * RELAY_INVALID before the upgrade, counted as `auth_failures_total{hook="relay"}`, logged under the flood cap
 * (telemetry/log-limit.ts), and nobody's failure budget is charged. The leg then
 * runs its handshake as any leg (credential and caller checked again), keyed by the platform address
 * the token asserts, and is taken only for the session the token names.
 */
export function fleetApp(
  state: ServerState,
  kind: 'worker' | 'instance',
  tls: { readonly cert: string; readonly key: string } | null
): uWS.TemplatedApp {
  const app = tls === null ? uWS.App() : uWS.SSLApp({ cert_file_name: tls.cert, key_file_name: tls.key })
  // A worker is addressed by its own id; an instance by its gateway's (its main process's, with workers).
  const isMe = (c: RelayClaims): boolean =>
    c.hop === kind && c.to === (kind === 'worker' ? state.store.instanceId : (state.placement.me?.group ?? ''))
  app.ws<LegData>(
    `${RELAY_PATH}:route`,
    audioBehavior(state, (res, req, route) => {
      // MUST copy out of req now (uWS): the verdict may come later (a worker's record is its main process's).
      const traceparent = req.getHeader('traceparent')
      const address = Buffer.from(res.getRemoteAddressAsText()).toString()
      const verdict = state.relayTokens.verify(req.getHeader(RELAY_TOKEN_HEADER), isMe)
      const upgraded = (v: RelayVerdict): Upgraded => {
        if (v.ok)
          return {
            ok: true,
            data: {
              route,
              socket: { stage: 'upgraded' },
              // The relaying process's leg span is the parent: one trace across the hop.
              span: state.tracing.start('leg', traceparent, { 'assist_gateway.relay_hop': kind }),
              address: v.claims.address,
              relayed: v.claims
            }
          }
        state.metrics.authFailures.inc({ hook: 'relay', reason: v.reason })
        if (state.logLimit.allow('RELAY_INVALID'))
          state.log.warn(
            { event: 'relay_refused', reason: v.reason, address },
            'a relayed leg was refused on the fleet listener'
          )
        return { ok: false, refuse: () => sendProblem(res, new GatewayError('RELAY_INVALID', { detail: v.reason })) }
      }
      return verdict instanceof Promise ? verdict.then(upgraded) : upgraded(verdict)
    })
  )
  app.any('/*', res => sendProblem(res, 'NOT_FOUND'))
  return app
}
