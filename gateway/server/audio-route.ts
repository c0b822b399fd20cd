import { randomUUID } from 'node:crypto'
import * as uWS from 'uWebSockets.js'
import { AudioLeg, type LegDeps, type PlatformLeg } from '../audio/leg'
import { systemClock } from '../clock'
import { GatewayError } from '../errors'
import { errorFrame } from '../audio/handshake'
import { RELAY_HEADER, RELAYED_FOR_HEADER, type RelayHop, relayHop } from '../audio/join-relay'
import { relayedAddress } from '../auth/hook-auth'
import type { RouteRuntime } from '../route'
import { scrubberFor } from '../telemetry/scrub'
import { traceFrom } from '../telemetry/trace'
import { closeAfterParse, upgradeProblem, type UpgradeRefusal } from './front-door'
import { headerBytesOver } from './header-limit'
import { sendProblem } from './http'
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

interface LegData {
  route: RouteRuntime
  leg: AudioLeg | null
  closed: boolean
  /** W3C trace context for the leg's vendor upgrades: the platform's continued, or a new trace. */
  traceparent: string
  /** A leg relayed here by another instance or worker (a join, audio/join-relay.ts). */
  relayedIn: RelayHop
  /** Its platform's address, when the relaying process signed it (else the socket's address counts). */
  relayedFor: string | null
}

/** The leg's failure delay, failure budget (keyed by the platform's address) and limits (auth/guard.ts, auth/leg-limits.ts). */
function abuseGuards(
  state: ServerState,
  ws: uWS.WebSocket<LegData>
): Pick<LegDeps, 'guard' | 'legLimits' | 'clientAddress' | 'initMessageBytes'> {
  return {
    guard: state.guard,
    legLimits: state.legLimits,
    clientAddress: ws.getUserData().relayedFor ?? Buffer.from(ws.getRemoteAddressAsText()).toString('utf8'),
    initMessageBytes: state.config.limits.initMessageBytes
  }
}

/** WS /audio/{route}: upgrade (unknown route refused before it) → open → message → drain → close, all handed to audio/leg. */
export function mountAudio(app: uWS.TemplatedApp, state: ServerState): void {
  const cfg = state.config
  // Every text frame to the platform (CONNECTED, MESSAGE, ERROR) passes here: configured secrets never
  // reach it. The matcher of the config in force (cached per secrets list; a reload may bring new ones).
  const limit = cfg.uws.maxPayloadBytes
  app.ws<LegData>('/audio/:route', {
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
      const traceparent = traceFrom(req.getHeader('traceparent')).traceparent
      const relayedIn = relayHop(req.getHeader(RELAY_HEADER))
      const relayedFor = relayedIn === null ? null : relayedAddress(req.getHeader(RELAYED_FOR_HEADER))
      const bad = upgradeProblem(req, state.metrics)
      if (bad !== null) return refuseUpgrade(res, bad)
      if (route === undefined || route.mapping.audio === null) {
        sendProblem(res, 'ROUTE_NOT_FOUND')
        return
      }
      if (state.draining) {
        sendProblem(res, 'SHUTTING_DOWN')
        return
      }
      if (headerBytesOver(req, state, 'audio')) {
        sendProblem(res, 'HEADERS_TOO_LARGE', [], { connection: 'close' })
        return
      }
      res.upgrade<LegData>(
        { route, leg: null, closed: false, traceparent, relayedIn, relayedFor },
        key,
        protocol,
        extensions,
        context
      )
    },
    open: ws => {
      const data = ws.getUserData()
      const platform: PlatformLeg = {
        sendText: text => {
          if (data.closed) return 2
          let status = 2
          ws.cork(() => {
            status = ws.send(scrubberFor(state.config.secrets).json(text), false)
          })
          return status
        },
        end: (code, reason) => {
          if (!data.closed) ws.cork(() => ws.end(code, reason))
        },
        bufferedAmount: () => (data.closed ? 0 : ws.getBufferedAmount())
      }
      const legId = randomUUID()
      data.leg = new AudioLeg(platform, {
        route: data.route,
        settings: state.config.audio,
        metrics: state.metrics,
        store: state.store,
        registry: state.sessions,
        log: state.log.child({ route: data.route.name, legId }),
        clock: systemClock,
        legId,
        traceparent: data.traceparent,
        platformHighWaterBytes: Math.floor(cfg.uws.maxBackpressureBytes / 2),
        joins: state.joins,
        relayedIn: data.relayedIn,
        ...abuseGuards(state, ws)
      })
      state.legs.add(data.leg)
      if (state.draining) {
        platform.sendText(errorFrame(new GatewayError('SHUTTING_DOWN')))
        platform.end(1012, 'SHUTTING_DOWN')
      }
    },
    message: (ws, message, isBinary) => {
      const leg = ws.getUserData().leg!
      if (message.byteLength > limit) leg.refuse('MESSAGE_TOO_LARGE')
      else if (isBinary) leg.onPlatformBinary(message)
      else leg.onPlatformText(message)
    },
    drain: ws => {
      ws.getUserData().leg?.onPlatformDrain()
    },
    close: (ws, code, message) => {
      const data = ws.getUserData()
      data.closed = true
      if (data.leg !== null) {
        state.legs.delete(data.leg)
        const cut = code === 1006 ? UWS_CUTS[Buffer.from(message).toString('utf8')] : undefined
        data.leg.onPlatformClose(code, cut)
      }
    }
  })
  // uWS hands a GET to the upgrade handler above only with a 24-character sec-websocket-key; any other GET
  // of an audio path (no key, a key of another length, a plain GET) falls through to here: refused per RFC 6455.
  app.get('/audio/:route', (res, req) => {
    const bad = upgradeProblem(req, state.metrics) ?? {
      code: 'UPGRADE_INVALID' as const,
      detail: 'sec-websocket-key must be base64 of 16 bytes',
      headers: {}
    }
    refuseUpgrade(res, bad)
  })
}

function refuseUpgrade(res: uWS.HttpResponse, bad: UpgradeRefusal): void {
  closeAfterParse(res, () =>
    sendProblem(res, new GatewayError(bad.code, { detail: bad.detail }), [], bad.headers, true)
  )
}
