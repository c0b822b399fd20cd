import { type Clock, systemClock, Timer } from '../clock'
import type { HealthSettings } from '../config/types'
import type { Store } from '../store/port'
import type { Replica, UpstreamPool } from './pool'
import { configPlan, type ProbeOutcome, type ProbePlan, runProbe } from './probes'

export interface ProbeEvents {
  /** One probe ran: `ok`, and whether the vendor refused the credential (401/403 or the protocol's refusal). */
  checked: (replica: Replica, ok: boolean, credentialRefused: boolean) => void
  /** The replica's verdict changed. */
  changed: (replica: Replica, state: 'up' | 'down', reason: string) => void
}

/**
 * Active health: every `intervalSeconds` each replica is probed as its route's plan says (probes.ts:
 * upgrade, http, protocol, tcp; `none` skips the route). Down after `unhealthyThreshold` failures in a
 * row, or at once when the vendor refuses the credential (a misconfiguration: reason "credential
 * refused"); up after `healthyThreshold` successes. The reason is rewritten after every probe, so it is
 * always the latest verdict. With a shared store only the instance with the lease probes, and writes its verdicts
 * for the fleet; every other instance reads them on its store sync.
 */
export class Prober {
  private readonly timer: Timer
  private readonly streak = new Map<
    string,
    { ok: number; fail: number; state: 'up' | 'down'; since: number; reason: string }
  >()
  private running = false

  constructor(
    private readonly pools: readonly UpstreamPool[],
    private readonly settings: HealthSettings['active'],
    private readonly store: Store,
    private readonly events: ProbeEvents,
    clock: Clock = systemClock,
    /** Each pool's plan; a pool without one probes as the config alone says (`configPlan`). */
    private readonly plans: ReadonlyMap<UpstreamPool, ProbePlan> = new Map()
  ) {
    this.timer = new Timer(clock)
    // A failover's proof of a replica that failed (pool.ts `prove`): one probe of the route's kind, here,
    // whoever holds the probing lease.
    for (const pool of pools) {
      const plan = this.planOf(pool)
      pool.probe =
        plan.kind === 'none'
          ? null
          : async r => (await runProbe(plan, r.config, this.settings.timeoutSeconds * 1000)).ok
    }
  }

  private planOf(pool: UpstreamPool): ProbePlan {
    let plan = this.plans.get(pool)
    if (plan === undefined) {
      plan = configPlan(this.settings)
      ;(this.plans as Map<UpstreamPool, ProbePlan>).set(pool, plan)
    }
    return plan
  }

  start(): void {
    if (this.pools.every(p => this.planOf(p).kind === 'none')) return
    this.timer.every(this.settings.intervalSeconds * 1000, () => {
      void this.round()
    })
    void this.round()
  }

  stop(): void {
    this.timer.clear()
  }

  /** One probe of every replica, concurrently. Skipped while another instance has the lease. */
  async round(): Promise<void> {
    if (this.running || !this.store.isLeader()) return
    this.running = true
    try {
      const probes = this.pools.flatMap(p => {
        const plan = this.planOf(p)
        return plan.kind === 'none' ? [] : p.replicas.map(async r => await this.probeOne(r, plan))
      })
      await Promise.all(probes)
    } finally {
      this.running = false
    }
  }

  private async probeOne(r: Replica, plan: ProbePlan): Promise<void> {
    const since = r.failures
    const outcome: ProbeOutcome = await runProbe(plan, r.config, this.settings.timeoutSeconds * 1000)
    // A probe that passed proves the replica answers (unless a session failed on it meanwhile).
    if (outcome.ok) r.answered(since)
    const refused = !outcome.ok && outcome.credentialRefused
    this.events.checked(r, outcome.ok, refused)
    // `since` is wall-clock time on purpose: the fleet reads it (/admin/upstreams), unlike the timers.
    let s = this.streak.get(r.key)
    if (s === undefined) {
      const shared = this.store.sharedHealth().get(r.key)
      s = { ok: 0, fail: 0, state: shared?.state ?? 'up', since: shared?.since ?? Date.now(), reason: '' }
      this.streak.set(r.key, s)
    }
    if (outcome.ok) {
      s.ok++
      s.fail = 0
    } else {
      s.fail++
      s.ok = 0
    }
    const { unhealthyThreshold: down, healthyThreshold: up } = this.settings
    const before = s.state
    if (s.state === 'up' && (refused || s.fail >= down)) s.state = 'down'
    else if (s.state === 'down' && s.ok >= up) s.state = 'up'
    if (s.state !== before) s.since = Date.now()
    // The reason always says what the latest probe found, whatever the state.
    if (outcome.ok)
      s.reason =
        s.state === 'up'
          ? `${plan.kind} probe ok (${s.ok} in a row)`
          : `down; ${s.ok} of ${up} good ${plan.kind} probes`
    else if (refused) s.reason = `${outcome.reason}; ${plan.kind} probe`
    else
      s.reason =
        s.state === 'down'
          ? `${s.fail} failed probes: ${outcome.reason}`
          : `up; ${s.fail} of ${down} failed ${plan.kind} probes: ${outcome.reason}`
    if (s.state !== before) this.events.changed(r, s.state, s.reason)
    // Written every round, so a verdict survives a Redis restart and a new leader starts from it.
    this.store.writeHealth(r.key, { state: s.state, reason: s.reason, since: s.since, by: this.store.instanceId })
  }
}
