/**
 * GET /admin/upstreams of `serve --workers N` (workers/main-admin.ts): every worker's view merged into
 * one. Counts add up (streams, requests in flight, parked sessions, ejections); `fleetStreams` is the
 * largest (each worker already counts the others', as of its last sync); a replica is `healthy` when it
 * is on every worker, and `workers` lists each worker's state of it (and its count of the fleet's streams),
 * so a passive ejection or a sync that lags seen by one worker shows.
 */

type Json = Record<string, unknown>

interface WorkerView {
  worker: number
  view: Json
}

const SUMMED = ['activeStreams', 'inFlight', 'ejections'] as const

export function mergeUpstreams(views: readonly WorkerView[], instance: string): Json {
  const first = views[0]?.view ?? {}
  const routes = ((first.routes as Json[] | undefined) ?? []).map((route, r) => ({
    ...route,
    replicas: ((route.replicas as Json[] | undefined) ?? []).map((replica, p) => {
      const each = views.map(v => ({ worker: v.worker, replica: replicaAt(v.view, r, p, replica.name) }))
      const merged: Json = { ...replica }
      for (const key of SUMMED) merged[key] = each.reduce((n, e) => n + num(e.replica?.[key]), 0)
      merged.fleetStreams = Math.max(...each.map(e => num(e.replica?.fleetStreams)))
      merged.consecutiveFailures = Math.max(...each.map(e => num(e.replica?.consecutiveFailures)))
      merged.healthy = each.every(e => e.replica?.healthy === true)
      merged.workers = each.map(e => ({
        worker: e.worker,
        healthy: e.replica?.healthy === true,
        state: e.replica?.state,
        reason: e.replica?.reason,
        activeStreams: num(e.replica?.activeStreams),
        fleetStreams: num(e.replica?.fleetStreams)
      }))
      return merged
    })
  }))
  return {
    instance,
    // The store is up when it is up for every worker (each holds its own connection to Redis).
    store: {
      ...(first.store as Json | undefined),
      up: views.every(v => (v.view.store as Json | undefined)?.up === true)
    },
    workers: views.length,
    parkedSessions: views.reduce((n, v) => n + num(v.view.parkedSessions), 0),
    routes
  }
}

/** The same replica in another worker's view (same route index and name: every worker runs one config). */
function replicaAt(view: Json, route: number, index: number, name: unknown): Json | undefined {
  const replicas = ((view.routes as Json[] | undefined)?.[route]?.replicas as Json[] | undefined) ?? []
  const at = replicas[index]
  return at?.name === name ? at : replicas.find(x => x.name === name)
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0
}

/**
 * GET /admin/readiness of `serve --workers N`: the same shape as one process's (server/readiness.ts
 * `readinessDetail`), for the gateway: ready while some worker is and it is not draining; a route servable
 * when some worker can serve it; the store up when it is for every worker; every worker's degradations.
 * Each worker's own view is under `workers`.
 */
export function mergeReadiness(
  answers: readonly { worker: number; status: number; view: Json }[],
  instance: string,
  leaving: boolean
): Json & { ready: boolean; reasons: string[] } {
  const views = answers.map(a => a.view)
  const reasons: string[] = []
  if (leaving) reasons.push('draining')
  // No worker ready: their own reasons (every worker runs one config), or that none answered.
  if (!answers.some(a => a.status === 200)) {
    const theirs = views.flatMap(v => (v.reasons as string[] | undefined) ?? [])
    reasons.push(...(theirs.length > 0 ? theirs : ['no worker is ready']))
  }
  const first = views[0] ?? {}
  const routes = ((first.routes as Json[] | undefined) ?? []).map(route => {
    const each = views.map(v => ((v.routes as Json[] | undefined) ?? []).find(r => r.route === route.route))
    return { ...route, servable: each.some(r => r?.servable === true) }
  })
  const degraded = [...new Set(views.flatMap(v => (v.degraded as string[] | undefined) ?? []))]
  return {
    ready: reasons.length === 0,
    reasons: [...new Set(reasons)],
    draining: leaving || views.some(v => v.draining === true),
    instance,
    store: { ...(first.store as Json | undefined), up: views.every(v => (v.store as Json | undefined)?.up === true) },
    routes,
    degraded,
    workers: answers.map(a => ({ worker: a.worker, ...a.view }))
  }
}
