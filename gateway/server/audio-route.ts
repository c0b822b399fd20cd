import { randomUUID } from 'node:crypto'
import * as uWS from 'uWebSockets.js'
import { errorFrame } from '../audio/leg/handshake'
import { AudioLeg } from '../audio/leg/leg'
import type { PlatformLeg } from '../audio/leg/leg-contract'
import type { RelayClaims } from '../auth/relay-token'
import { systemClock } from '../clock'
import { type ErrorCode, GatewayError } from '../errors'
import type { RouteRuntime } from '../route'
import type { TraceSpan } from '../telemetry/tracing'
import { closeAfterParse, upgradeProblem, type UpgradeRefusal } from './front-door'
import { headerBytesOver } from './header-limit'
import { sendProblem } from './http'
import { addressOf, logRefusal, type RefusalLog } from './refusals'
import type { ServerState } from './state'

/**
 * uWS cuts a socket itself (no frame, the platform sees 1006) for a message over its maxPayloadLength
 * and for a text frame that is not UTF-8, and reports the cut in the close handler with these reasons.
 * The gateway cannot answer either: it counts them under their own outcome instead of `abandoned`.
 */
const UWS_CUTS: Record<string, 'too_large_cut' | 'invalid_utf8'> = {
  'Received too big message': 'too_large_cut',
  'Received too big message, or other inflation error': 'too_large_cut',
  'Received invalid UTF-8': 'invalid_utf8'
}

/**
 * uWS reads messages up to this many times `uws.maxPayloadBytes` (at most 64 MiB), so the gateway sees a
 * message over the limit and answers it (ERROR MESSAGE_TOO_LARGE, 1009); past that, uWS cuts the socket
 * without a frame, which bounds what one socket can make the gateway buffer.
 */
export const OVERSIZE_READ_FACTOR = 16
const OVERSIZE_READ_MAX = 64 * 1024 * 1024

/** A platform socket's stage: upgraded (its leg not made yet), open with its leg, or closed (its leg told). */
export type SocketStage =
  | { readonly stage: 'upgraded' }
  | { readonly stage: 'open'; readonly leg: AudioLeg }
  | { readonly stage: 'closed' }

export interface LegData {
  route: RouteRuntime
  socket: SocketStage
  /** The leg's span (telemetry/tracing.ts): the platform's trace continued, or a new one; the vendor upgrades carry it. */
  span: TraceSpan
  /** The platform's address: its socket's, or (a relayed leg) the one its relay token asserts. */
  address: string
  /** A leg relayed here by another process of the fleet (fleet listener only). */
  relayed: RelayClaims | undefined
}

/** What an upgrade becomes: a leg's data, or a refusal (answered by `refuse`, unless the client went away). */
export type Upgraded =
  | { readonly ok: true; readonly data: LegData }
  | { readonly ok: false; readonly refuse: () => void }

/**
 * The WebSocket behaviour of an audio hook, on the public listener (`/audio/:route`) and on the fleet
 * listener (server/fleet-listener.ts). `accept` reads what it needs from the upgrade request (it MUST
 * copy out of `req` now: uWS frees it after the call); its verdict may come later (a promise).
 */
export function audioBehavior(
  state: ServerState,
  accept: (res: uWS.HttpResponse, req: uWS.HttpRequest, route: RouteRuntime) => Upgraded | Promise<Upgraded>
): uWS.WebSocketBehavior<LegData> {
  const cfg = state.config
  const limit = cfg.uws.maxPayloadBytes
  return {
    compression: uWS.DISABLED,
    maxPayloadLength: Math.max(limit, Math.min(limit * OVERSIZE_READ_FACTOR, OVERSIZE_READ_MAX)),
    idleTimeout: cfg.uws.idleTimeoutSeconds,
    maxLifetime: 0,
    maxBackpressure: cfg.uws.maxBackpressureBytes,
    closeOnBackpressureLimit: 0, // false: a slow platform reader pauses the vendor instead (typed as a number)
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => {
      // MUST read everything from req now: it is stack-allocated and gone after this call.
      const route = state.routes.get(req.getParameter(0) ?? '')
      const key = req.getHeader('sec-websocket-key')
      const protocol = req.getHeader('sec-websocket-protocol')
      const extensions = req.getHeader('sec-websocket-extensions')
      const bad = upgradeProblem(req, state.metrics)
      if (bad !== null) return refuseUpgrade(res, bad, state)
      const refused = (code: ErrorCode, headers: Record<string, string> = {}): void => {
        logRefusal(state, 'upgrade_refused', code, { address: addressOf(res), path: req.getUrl().slice(0, 200) })
        sendProblem(res, code, [], headers)
      }
      if (route === undefined || route.mapping.audio === null) return refused('ROUTE_NOT_FOUND')
      if (state.draining) return refused('SHUTTING_DOWN')
      if (headerBytesOver(req, state, 'audio')) return refused('HEADERS_TOO_LARGE', { connection: 'close' })
      const upgraded = accept(res, req, route)
      if (!(upgraded instanceof Promise)) return finishUpgrade(res, upgraded, key, protocol, extensions, context)
      // Decided later: MUST watch for the client going away now (uWS), and touch res only if it has not.
      let aborted = false
      res.onAborted(() => {
        aborted = true
      })
      upgraded.then(
        u => {
          if (!aborted) res.cork(() => finishUpgrade(res, u, key, protocol, extensions, context))
        },
        () => {
          if (!aborted) sendProblem(res, 'INTERNAL')
        }
      )
    },
    open: ws => openLeg(state, ws),
    message: (ws, message, isBinary) => {
      const socket = ws.getUserData().socket
      // uWS delivers messages only between open and close: the leg is there.
      if (socket.stage !== 'open') return
      const leg = socket.leg
      if (message.byteLength > limit) leg.refuse('MESSAGE_TOO_LARGE')
      else if (isBinary) leg.onPlatformBinary(message)
      else leg.onPlatformText(message)
    },
    drain: ws => {
      const socket = ws.getUserData().socket
      if (socket.stage === 'open') socket.leg.onPlatformDrain()
    },
    close: (ws, code, message) => {
      const data = ws.getUserData()
      const was = data.socket
      data.socket = { stage: 'closed' }
      if (was.stage === 'open') {
        state.legs.delete(was.leg)
        const cut = code === 1006 ? UWS_CUTS[Buffer.from(message).toString('utf8')] : undefined
        was.leg.onPlatformClose(code, cut)
      }
    }
  }
}

function finishUpgrade(
  res: uWS.HttpResponse,
  u: Upgraded,
  key: string,
  protocol: string,
  extensions: string,
  context: uWS.us_socket_context_t
): void {
  if (u.ok) res.upgrade<LegData>(u.data, key, protocol, extensions, context)
  else u.refuse()
}

/** WS /audio/{route} on the public listener: the platform's legs. No internal header is read here. */
export function mountAudio(app: uWS.TemplatedApp, state: ServerState): void {
  app.ws<LegData>(
    '/audio/:route',
    audioBehavior(state, (res, req, route) => ({
      ok: true,
      data: {
        route,
        socket: { stage: 'upgraded' },
        span: state.tracing.start('leg', req.getHeader('traceparent')),
        address: Buffer.from(res.getRemoteAddressAsText()).toString('utf8'),
        relayed: undefined
      }
    }))
  )
  // uWS hands a GET to the upgrade handler above only with a 24-character sec-websocket-key; any other GET
  // of an audio path (no key, a key of another length, a plain GET) falls through to here: refused per RFC 6455.
  app.get('/audio/:route', (res, req) => {
    const bad = upgradeProblem(req, state.metrics) ?? {
      code: 'UPGRADE_INVALID' as const,
      detail: 'sec-websocket-key must be base64 of 16 bytes',
      headers: {}
    }
    refuseUpgrade(res, bad, state)
  })
}

function openLeg(state: ServerState, ws: uWS.WebSocket<LegData>): void {
  const data = ws.getUserData()
  const cfg = state.config
  const platform: PlatformLeg = {
    sendText: text => {
      if (data.socket.stage === 'closed') return 2
      let status = 2
      ws.cork(() => {
        status = ws.send(text, false)
      })
      return status
    },
    end: (code, reason) => {
      if (data.socket.stage !== 'closed') ws.cork(() => ws.end(code, reason))
    },
    bufferedAmount: () => (data.socket.stage === 'closed' ? 0 : ws.getBufferedAmount())
  }
  const legId = randomUUID()
  const leg = new AudioLeg(platform, {
    route: data.route,
    settings: cfg.audio,
    metrics: state.metrics,
    store: state.store,
    registry: state.sessions,
    placement: state.placement,
    log: state.log.child({ route: data.route.name, legId, clientAddress: data.address }),
    clock: systemClock,
    legId,
    traceparent: data.span.traceparent,
    span: data.span,
    platformHighWaterBytes: Math.floor(cfg.uws.maxBackpressureBytes / 2),
    admission: state.admission,
    auth: () => state.config.auth,
    clientAddress: data.address,
    initMessageBytes: cfg.limits.initMessageBytes,
    relayed: data.relayed,
    relayTokens: state.relayTokens,
    callerKey: state.fleetKey.callerKey,
    calls: state.calls,
    logLimit: state.logLimit
  })
  // Closed while the leg was made (its close handler has run): it stays closed.
  if (data.socket.stage === 'upgraded') data.socket = { stage: 'open', leg }
  state.legs.add(leg)
  if (state.draining) {
    platform.sendText(errorFrame(new GatewayError('SHUTTING_DOWN')))
    platform.end(1012, 'SHUTTING_DOWN')
  }
}

/** An upgrade refused by the front door: answered and closed, one line (rate-limited) with the address. */
export function refuseUpgrade(res: uWS.HttpResponse, bad: UpgradeRefusal, r: RefusalLog): void {
  logRefusal(r, 'upgrade_refused', bad.code, { address: addressOf(res), detail: bad.detail })
  closeAfterParse(res, () =>
    sendProblem(res, new GatewayError(bad.code, { detail: bad.detail }), [], bad.headers, true)
  )
}
