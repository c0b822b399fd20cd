import { randomUUID } from 'node:crypto'
import * as uWS from 'uWebSockets.js'
import { AudioLeg, type PlatformLeg } from '../audio/leg'
import { systemClock } from '../clock'
import { GatewayError } from '../errors'
import { errorFrame } from '../audio/handshake'
import type { RouteRuntime } from '../route'
import { sendProblem } from './http'
import type { ServerState } from './state'

interface LegData {
  route: RouteRuntime
  leg: AudioLeg | null
  closed: boolean
}

/** WS /audio/{route}: upgrade (unknown route refused before it) → open → message → drain → close, all handed to audio/leg. */
export function mountAudio(app: uWS.TemplatedApp, state: ServerState): void {
  const cfg = state.config
  app.ws<LegData>('/audio/:route', {
    compression: uWS.DISABLED,
    maxPayloadLength: cfg.uws.maxPayloadBytes,
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
      if (route === undefined || route.mapping.audio === null) {
        sendProblem(res, 'ROUTE_NOT_FOUND')
        return
      }
      if (state.draining) {
        sendProblem(res, 'SHUTTING_DOWN')
        return
      }
      res.upgrade<LegData>({ route, leg: null, closed: false }, key, protocol, extensions, context)
    },
    open: ws => {
      const data = ws.getUserData()
      const platform: PlatformLeg = {
        sendText: text => {
          if (data.closed) return 2
          let status = 2
          ws.cork(() => {
            status = ws.send(text, false)
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
        platformHighWaterBytes: Math.floor(cfg.uws.maxBackpressureBytes / 2)
      })
      state.legs.add(data.leg)
      if (state.draining) {
        platform.sendText(errorFrame(new GatewayError('SHUTTING_DOWN')))
        platform.end(1012, 'SHUTTING_DOWN')
      }
    },
    message: (ws, message, isBinary) => {
      const leg = ws.getUserData().leg!
      if (isBinary) leg.onPlatformBinary(message)
      else leg.onPlatformText(message)
    },
    drain: ws => {
      ws.getUserData().leg?.onPlatformDrain()
    },
    close: (ws, code) => {
      const data = ws.getUserData()
      data.closed = true
      if (data.leg !== null) {
        state.legs.delete(data.leg)
        data.leg.onPlatformClose(code)
      }
    }
  })
}
