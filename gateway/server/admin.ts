import type * as uWS from 'uWebSockets.js'
import { probeKind } from '../mapping/health'
import { sendJson, send } from './http'
import { readiness, readinessDetail } from './readiness'
import type { ServerState } from './state'

export function mountHealth(app: uWS.TemplatedApp, state: ServerState): void {
  app.get('/livez', res => sendJson(res, 200, { live: true }))
  app.get('/readyz', (res, req) => {
    const verbose = /(?:^|&)verbose(?:[=&]|$)/.test(req.getQuery() ?? '')
    const r = verbose ? readinessDetail(state) : readiness(state)
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
}
