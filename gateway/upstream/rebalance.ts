import type { Clock, TimerHandle } from '../clock'
import type { RebalanceSettings } from '../config/types'
import type { Replica, UpstreamPool } from './pool'

/**
 * Load that comes back. When a replica recovers or joins, new legs go to it by balancing, but the
 * calls already up stay where they are for hours. Once a second, for each route, while the busiest
 * healthy replica leads the least busy one by more than `spread` streams per unit of weight (counted
 * fleet-wide through the store), this instance moves some of its own calls from the busiest to the
 * least busy: make-before-break, as a rotation (audio/session/session.ts), oldest first, at most `perSecond`
 * a second, so a recovered replica is not stormed. Only calls whose mapping is `movable` move; the
 * others decline (`moveTo` false). `moved` hears of each move begun (metrics, logs).
 *
 * Only an imbalance that lasts `settleSeconds` moves anything: fleet-wide counts lag by a sync interval
 * or two, and in a rolling restart the calls of a draining instance are briefly counted twice (on it and
 * on the instance they re-attached to), which looks like an imbalance toward their replicas for a moment.
 */
export class Rebalancer {
  private timer: TimerHandle | null = null
  private credit = 0
  /** Per pool: when its replicas were first seen too far apart (since then without a break). */
  private readonly apart = new Map<UpstreamPool, number>()

  constructor(
    private readonly pools: () => readonly UpstreamPool[],
    private readonly settings: () => RebalanceSettings,
    private readonly clock: Clock,
    private readonly moved: (from: Replica, to: Replica) => void
  ) {}

  start(): void {
    if (this.timer === null) this.timer = this.clock.setInterval(() => this.tick(), 1000)
  }

  stop(): void {
    if (this.timer !== null) this.clock.clearInterval(this.timer)
    this.timer = null
  }

  /** One second's moves (tests call it on a fake clock). */
  tick(): void {
    const { spread, perSecond, settleSeconds } = this.settings()
    if (perSecond <= 0) return
    // Unused moves do not pile up: at most one second's worth (or one move, for a rate under 1/s) waits.
    this.credit = Math.min(Math.max(1, perSecond), this.credit + perSecond)
    const now = this.clock.now()
    const pools = this.pools()
    for (const pool of this.apart.keys()) if (!pools.includes(pool)) this.apart.delete(pool)
    for (const pool of pools) {
      if (this.pair(pool, spread) === null) {
        this.apart.delete(pool)
        continue
      }
      const since = this.apart.get(pool) ?? now
      this.apart.set(pool, since)
      if (now - since < settleSeconds * 1000) continue
      while (this.credit >= 1 && this.moveOne(pool, spread)) this.credit--
      if (this.credit < 1) return
    }
  }

  /** The busiest healthy replica and the least busy candidate, when they are more than `spread` apart. */
  private pair(pool: UpstreamPool, spread: number): { from: Replica; to: Replica } | null {
    const candidates = pool.audioCandidates()
    if (candidates.length < 2) return null
    const load = (r: Replica): number => r.fleetStreams / r.config.weight
    // audioCandidates is sorted least busy first; the busiest may be one without room (it is still a source).
    // Never onto a replica whose sessions are failing right now (upstream/pool.ts `failing`).
    const to = candidates.find(r => !r.failing)
    if (to === undefined) return null
    let from: Replica | null = null
    for (const r of pool.replicas) if (r.healthy && r !== to && (from === null || load(r) > load(from))) from = r
    return from === null || load(from) - load(to) <= spread ? null : { from, to }
  }

  /** Moves one call of this instance from the busiest replica to the least busy, when they are too far apart. */
  private moveOne(pool: UpstreamPool, spread: number): boolean {
    const apart = this.pair(pool, spread)
    if (apart === null) return false
    const { from, to } = apart
    for (const lease of from.leases) {
      if (lease.user.moveTo?.(to) === true) {
        this.moved(from, to)
        return true
      }
    }
    return false
  }
}

/** One worker's part of the instance's pace (`serve --workers N`: each moves its own calls at perSecond / N). */
export function workerShare(settings: RebalanceSettings, workers: number): RebalanceSettings {
  return workers > 1 ? { ...settings, perSecond: settings.perSecond / workers } : settings
}
