import { type Clock, systemClock } from '../clock'
import type { AudioSettings, HealthSettings, RouteConfig, TextSettings, UpstreamConfig } from '../config/types'
import type { Store } from '../store/port'

/** Something holding a stream on a replica that must move off it when the replica goes down (a vendor connection). */
export interface ReplicaUser {
  replicaDown: (why: string) => void
  /**
   * Move this stream to `to` (upstream/rebalance.ts): a new vendor session there, made ready before this
   * one says goodbye. False when it cannot move now (not ready, its mapping not `movable`, a move or
   * rotation already under way).
   */
  moveTo?: (to: Replica) => boolean
}

/** Where a "replica down" verdict came from: the active prober (here or fleet-wide), or passive ejection. */
export type DownSource = 'probe' | 'audio' | 'text' | 'breaker'

/** One replica of a route's vendor: this instance's live counts and its health as seen from here. */
export class Replica {
  /** Audio streams this instance has open on the replica. Changed only by leases (`UpstreamPool.leaseStream`). */
  activeStreams = 0
  /** Text requests in flight from this instance. Changed only by `TextBalancer.begin`/`end`. */
  inFlight = 0
  /** Vendor sockets being opened from this instance. Changed only by leases. */
  pendingHandshakes = 0
  /** Passive health: gateway-side failures in a row, ejections so far, ejected until (clock ms). */
  consecutiveFailures = 0
  ejections = 0
  ejectedUntil = 0
  ejectReason = ''
  ejectedSince: string | null = null
  /** Session-open breaker: when recent vendor sessions were lost soon after they opened (clock ms, oldest first). */
  readonly quickLosses: number[] = []
  /** Benched by the session-open breaker until (clock ms): not even a last resort. */
  breakerUntil = 0
  /**
   * Failing right now: a vendor session of this process on it failed gateway-side (a connect error, an
   * upgrade never answered, a missed pong, an abnormal close) and nothing on it has answered since. A
   * failover (and rebalancing) does not go to it until it proves itself again (`answered`). New legs
   * still may: their failures are what passive ejection counts.
   */
  failing = false
  /** Gateway-side audio failures seen here, and proofs of life since the start (counters, never reset). */
  failures = 0
  proofs = 0
  readonly key: string
  /** The streams of this instance on the replica, so a down verdict can move them. */
  readonly leases = new Set<StreamLease>()
  constructor(
    readonly route: string,
    readonly config: UpstreamConfig,
    private readonly store: Store,
    private readonly clock: Clock
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
    return this.ejectedUntil > this.clock.now()
  }

  get benched(): boolean {
    return this.breakerUntil > this.clock.now()
  }

  get healthy(): boolean {
    return this.probedUp && !this.ejected
  }

  /** A vendor session on it failed gateway-side: failing until it answers again. */
  failed(): void {
    this.failures++
    this.failing = true
  }

  /**
   * The replica answered: a vendor session on it became ready, a pong or a vendor message arrived, a
   * probe passed. `since`: the failure count when the evidence started (a probe that started before the
   * latest failure proves nothing about it); absent, the evidence is of now.
   */
  answered(since: number = this.failures): void {
    if (since !== this.failures) return
    this.failing = false
    this.proofs++
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
    if (this.ejected) return { state: 'ejected', reason: this.ejectReason, since: this.ejectedSince }
    return {
      state: 'up',
      reason: probed?.reason ?? 'no failures seen',
      since: probed === undefined ? null : new Date(probed.since).toISOString()
    }
  }
}

/**
 * One audio stream on a replica: counted in `activeStreams` (and `pendingHandshakes` until the
 * handshake is over) from `leaseStream` to `release`, so a replica's counts cannot drift whatever
 * path a stream ends by. Both ends are idempotent.
 */
export class StreamLease {
  private pending = true
  private released = false
  constructor(
    readonly replica: Replica,
    readonly user: ReplicaUser
  ) {
    replica.activeStreams++
    replica.pendingHandshakes++
    replica.leases.add(this)
  }

  /** The vendor socket opened, or failed to: it no longer counts against `maxPendingHandshakes`. */
  handshakeDone(): void {
    if (!this.pending) return
    this.pending = false
    this.replica.pendingHandshakes--
  }

  release(): void {
    if (this.released) return
    this.handshakeDone()
    this.released = true
    this.replica.activeStreams--
    this.replica.leases.delete(this)
  }
}

/** Told of every down verdict, whatever its source (logs and metrics; streams are moved by the pool itself). */
export type DownListener = (replica: Replica, source: DownSource, reason: string) => void

/**
 * The replicas of one route and everything about their state: audio balancing (least active streams
 * counted fleet-wide, relative to weight, among replicas with an audio URL, good health and room under
 * their limits; ties keep config order), stream leases, passive ejection (gateway-side failures only;
 * 30 s × n up to 300 s; never the last healthy replica) and the one `markDown` every down verdict goes
 * through.
 */
export class UpstreamPool {
  readonly replicas: readonly Replica[]
  private readonly listeners: DownListener[] = []
  /** Replicas whose probe verdict was down at the last `refreshProbes`. */
  private readonly probedDown = new Set<Replica>()

  constructor(
    route: RouteConfig,
    store: Store,
    private readonly health: HealthSettings,
    private readonly clock: Clock = systemClock
  ) {
    this.replicas = route.upstreams.map(u => new Replica(route.name, u, store, clock))
  }

  /**
   * Audio replicas in the order to try them: by load, `exclude` last (a failed replica is still better
   * than none). A failover holds back the replicas failing right now (audio/session/failover.ts `ReplicaWalk`).
   */
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

  /** Count a stream on `replica` until the lease is released; `user` is moved off when the replica goes down. */
  leaseStream(replica: Replica, user: ReplicaUser): StreamLease {
    return new StreamLease(replica, user)
  }

  onDown(listener: DownListener): void {
    this.listeners.push(listener)
  }

  /**
   * A gateway-side failure (connect/TLS error, upgrade ≠ 101, abnormal close, not ready in time, a text
   * connect failure, timeout or 502/503/504). True when it ejected the replica (through `markDown`).
   */
  recordFailure(r: Replica, reason: string, source: 'audio' | 'text' = 'text'): boolean {
    if (source === 'audio') r.failed()
    r.consecutiveFailures++
    if (r.consecutiveFailures < this.health.passive.consecutiveFailures || r.ejected) return false
    if (!this.replicas.some(o => o !== r && o.healthy)) return false
    this.markDown(r, source, reason)
    return true
  }

  recordSuccess(r: Replica): void {
    r.consecutiveFailures = 0
  }

  /** Set by the prober (upstream/health.ts): one probe of a replica as its route's plan says; null: the route is not probed. */
  probe: ((r: Replica) => Promise<boolean>) | null = null
  private readonly proving = new Map<Replica, Promise<boolean>>()

  /**
   * Whether `r` answers now, proven by a probe of its route's kind started now (one at a time per
   * replica, shared by every caller): true when the probe passes (the replica is then no longer
   * failing) or when the route has no probe (a session attempt is the only proof left); false when it
   * fails. A replica not failing needs no proof.
   */
  async prove(r: Replica, force = false): Promise<boolean> {
    if (!r.failing && !force) return true
    const probe = this.probe
    if (probe === null) return true
    let running = this.proving.get(r)
    if (running === undefined) {
      const since = r.failures
      running = probe(r).then(
        ok => {
          if (ok) r.answered(since)
          return ok
        },
        () => false
      )
      this.proving.set(r, running)
      void running.finally(() => this.proving.delete(r))
    }
    return await running
  }

  /**
   * The session-open rate limit (a circuit breaker): a vendor session on `r` that ended (lost or refused,
   * never a graceful close) `livedMs` after it was opened. `quickLosses` of them within `windowSeconds`,
   * each under `quickLossSeconds`, bench the replica for `holdOffSeconds`: no new session goes to it,
   * even when it is the route's last (legs recovering onto it wait, within their failover deadline);
   * its live streams stay. Counted and logged as an ejection (source `breaker`). True when it tripped.
   */
  recordSessionLoss(r: Replica, livedMs: number, b: AudioSettings['sessionBreaker']): boolean {
    if (b.quickLossSeconds <= 0 || livedMs >= b.quickLossSeconds * 1000) return false
    const now = this.clock.now()
    const q = r.quickLosses
    q.push(now)
    while (q.length > 0 && q[0] <= now - b.windowSeconds * 1000) q.shift()
    if (q.length < b.quickLosses || r.ejected) return false
    q.length = 0
    r.ejections++
    r.ejectedSince = new Date().toISOString()
    r.ejectedUntil = r.breakerUntil = now + b.holdOffSeconds * 1000
    r.ejectReason =
      `${b.quickLosses} vendor sessions lost within ${b.quickLossSeconds} s of opening; ` +
      `no new session for ${b.holdOffSeconds} s`
    for (const listener of this.listeners) listener(r, 'breaker', r.ejectReason)
    return true
  }

  /**
   * The one way a replica goes down, whatever said so: a passive source ejects it for a while (the
   * probe's verdict lives in the store), listeners are told, and every stream of this instance on it
   * is moved off now rather than at its next error.
   */
  markDown(r: Replica, source: DownSource, reason: string): void {
    if (source !== 'probe') {
      r.ejections++
      const seconds = Math.min(
        this.health.passive.baseEjectionSeconds * r.ejections,
        this.health.passive.maxEjectionSeconds
      )
      r.ejectedSince = new Date().toISOString()
      r.ejectedUntil = this.clock.now() + seconds * 1000
      r.ejectReason = `${r.consecutiveFailures} failures in a row, last: ${reason}; ejected for ${seconds} s`
      r.consecutiveFailures = 0
    }
    for (const listener of this.listeners) listener(r, source, source === 'probe' ? reason : r.ejectReason)
    for (const lease of [...r.leases]) lease.user.replicaDown(`replica ${r.name} marked down`)
  }

  /** Read the probe verdicts (this instance's or the fleet's, via the store): a replica newly down goes through `markDown`. */
  refreshProbes(): void {
    for (const r of this.replicas) {
      if (r.probedUp) this.probedDown.delete(r)
      else if (!this.probedDown.has(r)) {
        this.probedDown.add(r)
        this.markDown(r, 'probe', r.describe().reason)
      }
    }
  }
}

/**
 * Text balancing over a pool's replicas: round-robin, or the less busy of two random ones (p2c), among
 * replicas with a text URL, healthy and under `maxInFlight`. It also keeps the in-flight counts p2c reads.
 */
export class TextBalancer {
  private cursor = 0
  constructor(
    private readonly replicas: readonly Replica[],
    private readonly policy: TextSettings['balancing']
  ) {}

  /** An eligible replica not in `exclude`, or null. */
  pick(exclude: ReadonlySet<Replica>): Replica | null {
    const all = this.replicas
    const n = all.length
    const eligible = (r: Replica): boolean =>
      !exclude.has(r) && r.config.text !== undefined && r.healthy && r.inFlight < r.config.maxInFlight
    if (this.policy === 'p2c') {
      const ok = all.filter(eligible)
      if (ok.length <= 1) return ok[0] ?? null
      const a = ok[Math.floor(Math.random() * ok.length)]
      let b = ok[Math.floor(Math.random() * (ok.length - 1))]
      if (b === a) b = ok[ok.length - 1]
      return b.inFlight / b.config.weight < a.inFlight / a.config.weight ? b : a
    }
    for (let i = 0; i < n; i++) {
      const r = all[(this.cursor + i) % n]
      if (eligible(r)) {
        this.cursor = (this.cursor + i + 1) % n
        return r
      }
    }
    return null
  }

  begin(r: Replica): void {
    r.inFlight++
  }

  end(r: Replica): void {
    r.inFlight--
  }
}
