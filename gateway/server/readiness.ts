import type { RouteRuntime } from '../route'
import type { ServerState } from './state'

/**
 * Readiness by convention (Kubernetes, Envoy): "this instance can take new work". It is listening and
 * its config is loaded (it answers at all), it is not draining, and at least one route can take a
 * new leg or request. Neither a Redis outage (the store serves on local state) nor one route's or one
 * vendor's outage makes it unready: every instance would be equally affected, and taking them all
 * out of rotation would turn a partial outage into a total one. Those go to the verbose view,
 * /admin/upstreams and the metrics.
 */
export interface Readiness {
  ready: boolean
  /** Why not, when not ready. */
  reasons: string[]
}

interface RouteView {
  route: string
  /** Can take a new leg or request of at least one kind. */
  servable: boolean
  audio: { configured: boolean; capacity: boolean } | null
  text: { configured: boolean; healthyReplicas: number } | null
  replicas: { name: string; healthy: boolean; state: string; reason: string }[]
}

function routeView(r: RouteRuntime): RouteView {
  const audioConfigured = r.mapping.audio !== null && r.config.upstreams.some(u => u.audio !== undefined)
  const textConfigured = r.mapping.text !== null && r.config.upstreams.some(u => u.text !== undefined)
  const audioCapacity = audioConfigured && r.pool.hasAudioCapacity()
  const textHealthy = textConfigured ? r.pool.replicas.filter(p => p.config.text !== undefined && p.healthy).length : 0
  return {
    route: r.name,
    servable: audioCapacity || textHealthy > 0,
    audio: audioConfigured ? { configured: true, capacity: audioCapacity } : null,
    text: textConfigured ? { configured: true, healthyReplicas: textHealthy } : null,
    replicas: r.pool.replicas.map(p => {
      const d = p.describe()
      return { name: p.name, healthy: p.healthy, state: d.state, reason: d.reason }
    })
  }
}

export function readiness(state: ServerState): Readiness {
  const reasons: string[] = []
  if (state.draining || state.leaving) reasons.push('draining')
  if (state.routes.size === 0) reasons.push('no route configured')
  else if (![...state.routes.values()].some(r => routeView(r).servable))
    reasons.push('no route can take new work (every replica of every route is down or full)')
  return { ready: reasons.length === 0, reasons }
}

/** /readyz?verbose: the verdict, plus what does not decide it (routes, replicas, the shared store). */
export function readinessDetail(state: ServerState): Readiness & Record<string, unknown> {
  const routes = [...state.routes.values()].map(routeView)
  return {
    ...readiness(state),
    draining: state.draining || state.leaving,
    instance: state.store.instanceId,
    store: { kind: state.store.kind, up: state.store.up() },
    routes,
    degraded: [
      ...(state.store.up() ? [] : ['shared store (Redis) unreachable: serving on local state']),
      ...routes.filter(r => !r.servable).map(r => `route ${r.route}: no replica can take new work`)
    ]
  }
}
