import type { LimitSettings } from '../config/types'

export type LegLimit = 'legs_per_route' | 'legs_per_client'

/**
 * Live audio legs per route and per client on one gateway (`limits.legsPerRoute`, `limits.legsPerClient`;
 * 0: no limit); with `serve --workers N` the main process counts them for every worker. A client is the
 * caller that opened the leg (a token's subject, or a static credential, by its tag); legs of routes that
 * ask for no credential are counted per route only.
 */
export class LegLimits {
  private readonly byRoute = new Map<string, number>()
  private readonly byClient = new Map<string, number>()

  constructor(private readonly settings: () => LimitSettings) {}

  /**
   * Take a place for a leg: a release function (call it once, when the leg ends), or the limit that
   * refuses it. `force`: take the place whatever the counts (a leg taking over its own session).
   */
  acquire(route: string, caller: string, force = false): (() => void) | LegLimit {
    const { legsPerRoute, legsPerClient } = this.settings()
    const client = caller === '' || caller === 'anonymous' ? null : caller
    if (!force) {
      if (legsPerRoute > 0 && (this.byRoute.get(route) ?? 0) >= legsPerRoute) return 'legs_per_route'
      if (client !== null && legsPerClient > 0 && (this.byClient.get(client) ?? 0) >= legsPerClient)
        return 'legs_per_client'
    }
    add(this.byRoute, route, 1)
    if (client !== null) add(this.byClient, client, 1)
    let released = false
    return () => {
      if (released) return
      released = true
      add(this.byRoute, route, -1)
      if (client !== null) add(this.byClient, client, -1)
    }
  }
}

function add(map: Map<string, number>, key: string, n: number): void {
  const v = (map.get(key) ?? 0) + n
  if (v <= 0) map.delete(key)
  else map.set(key, v)
}
