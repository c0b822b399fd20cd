import type { HealthSettings, RouteConfig, UpstreamConfig } from '../config/types'
import type { Store } from '../store/port'

/** Something using a replica that must move off it when the replica goes down (an audio session). */
export interface ReplicaUser {
  lose: (why: string) => void
}

/** One replica of a route's vendor: this instance's live counts and its health as seen from here. */
export class Replica {
  /** Audio streams this instance has open on the replica. */
  activeStreams = 0
  /** Text requests in flight from this instance. */
  inFlight = 0
  /** Vendor sockets being opened from this instance. */
  pendingHandshakes = 0
  /** Passive health: gateway-side failures in a row, ejections so far, ejected until (ms epoch). */
  consecutiveFailures = 0
  ejections = 0
  ejectedUntil = 0
  ejectReason = ''
  ejectedSince = 0
  readonly key: string
  /** Audio sessions of this instance currently on the replica. */
  readonly sessions = new Set<ReplicaUser>()
  constructor(
    readonly route: string,
    readonly config: UpstreamConfig,
    private readonly store: Store
  ) {
    this.key = `${route}/${config.name}`
  }

  get name(): string {
    return this.config.name
  }

  /** The fleet's active-probe verdict (unknown counts as up). */
  get probedUp(): boolean {
    return this.store.sharedHealth().get(this.key)?.state !== 'down'
  }

  get ejected(): boolean {
    return this.ejectedUntil > Date.now()
  }

  get healthy(): boolean {
    return this.probedUp && !this.ejected
  }

  /** Streams on this replica fleet-wide: other instances' (from the store) plus ours. */
  get fleetStreams(): number {
    return this.store.otherStreams(this.key) + this.activeStreams
  }

  /** State, reason and since, for /admin/upstreams. */
  describe(): { state: 'up' | 'down' | 'ejected'; reason: string; since: string | null } {
    const probed = this.store.sharedHealth().get(this.key)
    if (probed?.state === 'down')
      return { state: 'down', reason: probed.reason, since: new Date(probed.since).toISOString() }
    if (this.ejected)
      return { state: 'ejected', reason: this.ejectReason, since: new Date(this.ejectedSince).toISOString() }
    return {
      state: 'up',
      reason: probed?.reason ?? 'no failures seen',
      since: probed === undefined ? null : new Date(probed.since).toISOString()
    }
  }
}

/**
 * Picks replicas for a route. Audio: least active streams counted fleet-wide, relative to weight,
 * among replicas with an audio URL, good health and room under their limits; ties keep config order.
 * Passive ejection (gateway-side failures only) backs off 30 s × n up to 300 s and never ejects the
 * last healthy replica.
 */
export class UpstreamPool {
  readonly replicas: readonly Replica[]
  constructor(
    route: RouteConfig,
    store: Store,
    private readonly health: HealthSettings
  ) {
    this.replicas = route.upstreams.map(u => new Replica(route.name, u, store))
  }

  /** Audio replicas in the order to try them; `exclude` are tried last (a failed replica is still better than none). */
  audioCandidates(exclude: ReadonlySet<Replica> = new Set()): Replica[] {
    const ok = this.replicas.filter(
      r =>
        r.config.audio !== undefined &&
        r.healthy &&
        r.activeStreams < r.config.maxStreams &&
        r.pendingHandshakes < r.config.maxPendingHandshakes
    )
    ok.sort(
      (a, b) =>
        (exclude.has(a) ? 1 : 0) - (exclude.has(b) ? 1 : 0) ||
        a.fleetStreams / a.config.weight - b.fleetStreams / b.config.weight
    )
    return ok
  }

  byName(name: string): Replica | undefined {
    return this.replicas.find(r => r.name === name)
  }

  /** True when some replica could take an audio stream now (readiness, dry-run handshakes). */
  hasAudioCapacity(): boolean {
    return this.audioCandidates().length > 0
  }

  /** A gateway-side failure (connect/TLS error, upgrade ≠ 101, abnormal close, not ready in time). */
  recordFailure(r: Replica, reason: string): boolean {
    r.consecutiveFailures++
    if (r.consecutiveFailures < this.health.passive.consecutiveFailures || r.ejected) return false
    const othersHealthy = this.replicas.some(o => o !== r && o.healthy)
    if (!othersHealthy) return false
    r.ejections++
    const seconds = Math.min(
      this.health.passive.baseEjectionSeconds * r.ejections,
      this.health.passive.maxEjectionSeconds
    )
    r.ejectedSince = Date.now()
    r.ejectedUntil = r.ejectedSince + seconds * 1000
    r.ejectReason = `${r.consecutiveFailures} failures in a row, last: ${reason}; ejected for ${seconds} s`
    r.consecutiveFailures = 0
    return true
  }

  recordSuccess(r: Replica): void {
    r.consecutiveFailures = 0
  }
}
