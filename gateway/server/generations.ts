import type { Config } from '../config/types'
import { routePools } from '../route'
import type { UpstreamPool } from '../upstream/pool'
import { buildGeneration, type Generation, type GenerationDeps } from './reload'

/**
 * The generation of routes in force (server/reload.ts builds one per config snapshot) and the pools of
 * the routes a reload replaced or removed, kept while live legs still hold streams on them.
 */
export class Generations {
  private gen: Generation
  private readonly retired = new Set<UpstreamPool>()

  constructor(
    config: Config,
    private readonly deps: GenerationDeps
  ) {
    this.gen = buildGeneration(config, deps, null)
  }

  get current(): Generation {
    return this.gen
  }

  /** Every pool a stream may be on: the current routes' and the retired ones still in use. */
  pools(): UpstreamPool[] {
    for (const p of this.retired) if (p.replicas.every(r => r.activeStreams === 0)) this.retired.delete(p)
    return [...[...this.gen.routes.values()].flatMap(routePools), ...this.retired]
  }

  /** Build `next`'s generation and swap it in: the replaced routes' pools retire, the probers swap. Returns the previous one. */
  swap(next: Config): Generation {
    const prev = this.gen
    this.gen = buildGeneration(next, this.deps, prev)
    this.deps.metrics.reseed()
    for (const [name, r] of prev.routes)
      if (this.gen.routes.get(name) !== r) for (const p of routePools(r)) this.retired.add(p)
    prev.prober.stop()
    this.gen.prober.start()
    return prev
  }

  /** Every replica of the current routes, for the replica health gauge. */
  replicaHealth(): { route: string; upstream: string; healthy: boolean }[] {
    return [...this.gen.routes.values()].flatMap(rt =>
      routePools(rt).flatMap(p => p.replicas.map(r => ({ route: r.route, upstream: r.name, healthy: r.healthy })))
    )
  }

  /** This instance's stream counts per replica key, for the fleet. */
  streamCounts(): Map<string, number> {
    const counts = new Map<string, number>()
    for (const p of this.pools())
      for (const r of p.replicas) counts.set(r.key, (counts.get(r.key) ?? 0) + r.activeStreams)
    return counts
  }
}
