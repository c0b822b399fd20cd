import type * as uWS from 'uWebSockets.js'
import { sendJson, send } from './http'
import type { ServerState } from './state'

/** Readiness: not draining, and every route has somewhere to send a new leg. */
export function readiness(state: ServerState): { ready: boolean; reasons: string[] } {
  const reasons: string[] = []
  if (state.draining || state.leaving) reasons.push('draining')
  if (!state.store.up()) reasons.push('shared store (Redis) unreachable')
  for (const r of state.routes.values()) {
    if (r.mapping.audio !== null && r.config.upstreams.some(u => u.audio !== undefined) && !r.pool.hasAudioCapacity())
      reasons.push(`route ${r.name}: no healthy audio upstream`)
    if (
      r.mapping.text !== null &&
      r.config.upstreams.some(u => u.text !== undefined) &&
      !r.pool.replicas.some(p => p.config.text !== undefined && p.healthy)
    )
      reasons.push(`route ${r.name}: no healthy text upstream`)
  }
  return { ready: reasons.length === 0, reasons }
}

export function mountHealth(app: uWS.TemplatedApp, state: ServerState): void {
  app.get('/livez', res => sendJson(res, 200, { live: true }))
  app.get('/readyz', res => {
    const r = readiness(state)
    sendJson(res, r.ready ? 200 : 503, r)
  })
}

/** The admin listener: /metrics, /admin/upstreams, /livez, /readyz. Not for the platform network. */
export function mountAdmin(app: uWS.TemplatedApp, state: ServerState): void {
  mountHealth(app, state)
  app.get('/metrics', res => {
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    state.metrics.registry.metrics().then(
      text => {
        if (!aborted) send(res, 200, state.metrics.registry.contentType, text)
      },
      err => {
        state.log.error({ event: 'metrics_failed', err }, 'collecting metrics failed')
        if (!aborted) send(res, 500, 'text/plain', 'metrics collection failed\n')
      }
    )
  })
  app.get('/admin/upstreams', res => {
    const routes = [...state.routes.values()].map(r => ({
      route: r.name,
      vendor: r.mapping.vendor,
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
}
