import { randomUUID } from 'node:crypto'
import { type Clock, Timer } from '../clock'
import type { Quota, QuotaName, RouteConfig, TenantConfig } from '../config/types'
import type { QuotaStore } from '../store/port'

/** A fleet lease of a live leg lives this long unless its owner refreshes it (every LEASE_REFRESH_MS). */
export const LEASE_TTL_MS = 10_000
export const LEASE_REFRESH_MS = 3_000

/** Whose quota: the tenant's (`tenants.<t>.limits`) or the route's (`routes.<r>.limits`, all tenants together). */
export type QuotaScope = 'tenant' | 'route'

/**
 * A quota that refused a leg or an utterance, as the bounded `limit` label of `limit_refusals_total` and the
 * `limit` parameter of the refusal: `<scope>_<name>` in snake case (`tenant_legs`, `route_legs_per_second`,
 * `tenant_utterances_per_second`).
 */
export type QuotaLimit = `${QuotaScope}_${SnakeQuota}`
type SnakeQuota = 'legs' | 'legs_per_second' | 'utterances_per_second'
const SNAKE: { readonly [name in QuotaName]: SnakeQuota } = {
  legs: 'legs',
  legsPerSecond: 'legs_per_second',
  utterancesPerSecond: 'utterances_per_second'
}
export const QUOTA_LIMITS: readonly QuotaLimit[] = (['tenant', 'route'] as const).flatMap(scope =>
  Object.values(SNAKE).map((n): QuotaLimit => `${scope}_${n}`)
)

/** A refusal: the quota, and when to try again (whole seconds, at least 1; `Retry-After`). */
export interface QuotaRefusal {
  readonly limit: QuotaLimit
  readonly retryAfterSeconds: number
}

interface Scope {
  readonly scope: QuotaScope
  readonly name: string
  /** This gateway's count's key. */
  readonly key: string
  readonly quota: Quota
}

/** What the quotas read: the tenants' and the routes' limits of the config in force. */
export interface QuotaSettings {
  readonly tenants?: Readonly<Record<string, Pick<TenantConfig, 'limits'>>>
  readonly routes?: Readonly<Record<string, Pick<RouteConfig, 'limits'>>>
}

/**
 * The quotas of one gateway (all its workers: in `serve --workers N` this lives in the main process, as the
 * leg limits do): live legs, new legs per second and utterances per second, per tenant and per route. Rates
 * are fixed one-second windows on the gateway's clock. Synchronous, one map entry per counted key.
 *
 * - A leg takes a slot under both scopes' `legs` and a unit of both `legsPerSecond` windows, or is refused
 *   by the first quota it would exceed (nothing is taken then). `force` (a leg taking over its own live
 *   session: not a new leg) takes its slot whatever the counts and spends no rate.
 * - An utterance spends a unit of both `utterancesPerSecond` windows, or is refused.
 *
 * Never more is admitted than a quota; nothing is refused under it (tests/unit/auth/quotas.test.ts).
 */
export class Quotas {
  private readonly live = new Map<string, number>()
  private readonly windows = new Map<string, { second: number; used: number }>()
  /** This gateway's fleet leases of live legs: id → quota key (refreshed while the leg lives). */
  private readonly leases = new Map<string, string>()
  private readonly leasePrefix = randomUUID()
  private nextLease = 1
  private readonly timer: Timer

  constructor(
    private readonly settings: () => QuotaSettings,
    private readonly clock: Clock,
    /** The fleet's count (Redis); absent, or while Redis is down: this gateway's count alone. */
    private readonly fleet?: QuotaStore
  ) {
    this.timer = new Timer(clock)
  }

  /**
   * A new leg of `tenant` on `route`: its release (call once, when the leg ends), or the quota that refuses
   * it. Synchronous on this gateway's count; with a fleet, the fleet's count decides after this one admits.
   */
  takeLeg(
    route: string,
    tenant: string,
    force = false
  ): (() => void) | QuotaRefusal | Promise<(() => void) | QuotaRefusal> {
    const scopes = this.scopes(route, tenant)
    if (!force) {
      for (const s of scopes) {
        if (s.quota.legs > 0 && (this.live.get(s.key) ?? 0) >= s.quota.legs)
          return { limit: `${s.scope}_legs`, retryAfterSeconds: 1 }
        const wait = this.full(`${s.key}\nlegs/s`, s.quota.legsPerSecond)
        if (wait > 0) return { limit: `${s.scope}_legs_per_second`, retryAfterSeconds: wait }
      }
    }
    const fleet = this.fleet
    if (fleet === undefined || !fleet.up() || !scopes.some(s => s.quota.legs > 0 || s.quota.legsPerSecond > 0))
      return this.grant(scopes, force, [])
    return this.fleetLeg(fleet, scopes, force).then(r => (Array.isArray(r) ? this.grant(scopes, force, r) : r))
  }

  /** An utterance of `tenant` on `route`: true, or the quota that refuses it. */
  takeUtterance(route: string, tenant: string): true | QuotaRefusal | Promise<true | QuotaRefusal> {
    const scopes = this.scopes(route, tenant)
    for (const s of scopes) {
      const wait = this.full(`${s.key}\nutt/s`, s.quota.utterancesPerSecond)
      if (wait > 0) return { limit: `${s.scope}_utterances_per_second`, retryAfterSeconds: wait }
    }
    const fleet = this.fleet
    const counted = scopes.filter(s => s.quota.utterancesPerSecond > 0)
    if (fleet === undefined || !fleet.up() || counted.length === 0) return this.spendUtterance(scopes)
    return this.fleetRates(fleet, counted, 'utterancesPerSecond').then(r =>
      r === null ? this.spendUtterance(scopes) : r
    )
  }

  private spendUtterance(scopes: readonly Scope[]): true {
    for (const s of scopes) this.spend(`${s.key}\nutt/s`, s.quota.utterancesPerSecond)
    return true
  }

  /** This gateway's count of an admitted leg (and its fleet leases): its release. */
  private grant(scopes: readonly Scope[], force: boolean, leases: readonly { key: string; id: string }[]): () => void {
    if (!force) for (const s of scopes) this.spend(`${s.key}\nlegs/s`, s.quota.legsPerSecond)
    for (const s of scopes) this.add(s.key, 1)
    for (const l of leases) this.leases.set(l.id, l.key)
    if (leases.length > 0 && !this.timer.pending) this.timer.every(LEASE_REFRESH_MS, () => this.refresh())
    let released = false
    return () => {
      if (released) return
      released = true
      for (const s of scopes) this.add(s.key, -1)
      for (const l of leases) {
        this.leases.delete(l.id)
        this.fleet?.releaseLease(l.key, l.id)
      }
      if (this.leases.size === 0) this.timer.clear()
    }
  }

  /**
   * The fleet's verdict on a leg: a lease under each `legs` quota (atomic in Redis: never more live leases
   * than the quota), then a unit of each `legsPerSecond` window. Refused: what it took is given back. A
   * quota Redis did not answer is left to this gateway's count.
   */
  private async fleetLeg(
    fleet: QuotaStore,
    scopes: readonly Scope[],
    force: boolean
  ): Promise<{ key: string; id: string }[] | QuotaRefusal> {
    const leases: { key: string; id: string }[] = []
    const giveBack = (): void => {
      for (const l of leases) fleet.releaseLease(l.key, l.id)
    }
    for (const s of scopes) {
      if (s.quota.legs <= 0) continue
      const key = `legs:${s.scope}:${s.name}`
      const id = `${this.leasePrefix}:${this.nextLease++}`
      const took = await fleet.takeLease(key, force ? 0 : s.quota.legs, id, LEASE_TTL_MS)
      if (took === false) {
        giveBack()
        return { limit: `${s.scope}_legs`, retryAfterSeconds: 1 }
      }
      if (took === true) leases.push({ key, id })
    }
    if (force) return leases
    const rated = await this.fleetRates(
      fleet,
      scopes.filter(s => s.quota.legsPerSecond > 0),
      'legsPerSecond'
    )
    if (rated !== null && rated !== true) {
      giveBack()
      return rated
    }
    return leases
  }

  /** One unit of each scope's window of `name` in the fleet: true, the refusal, or null (Redis did not answer). */
  private async fleetRates(
    fleet: QuotaStore,
    scopes: readonly Scope[],
    name: 'legsPerSecond' | 'utterancesPerSecond'
  ): Promise<true | QuotaRefusal | null> {
    const spent: { key: string; rate: number }[] = []
    let answered = false
    for (const s of scopes) {
      const key = `${name}:${s.scope}:${s.name}`
      const rate = s.quota[name]
      const wait = await fleet.consumeRate(key, rate)
      if (wait === null) continue
      answered = true
      if (wait > 0) {
        for (const x of spent) fleet.refundRate(x.key, x.rate)
        return { limit: `${s.scope}_${SNAKE[name]}`, retryAfterSeconds: Math.max(1, Math.ceil(wait / 1000)) }
      }
      spent.push({ key, rate })
    }
    return answered ? true : null
  }

  private refresh(): void {
    if (this.fleet === undefined || this.leases.size === 0) return
    this.fleet.refreshLeases(
      [...this.leases].map(([id, key]) => ({ key, id })),
      LEASE_TTL_MS
    )
  }

  close(): void {
    this.timer.clear()
  }

  /** Live legs counted now under `scope` (tests, the admin view). */
  legs(scope: QuotaScope, name: string): number {
    return this.live.get(`${scope}\n${name}`) ?? 0
  }

  private scopes(route: string, tenant: string): Scope[] {
    const s = this.settings()
    const out: Scope[] = []
    const tenants = s.tenants ?? {}
    const t = Object.hasOwn(tenants, tenant) ? tenants[tenant].limits : undefined
    if (t !== undefined) out.push({ scope: 'tenant', name: tenant, key: `tenant\n${tenant}`, quota: t })
    const routes = s.routes ?? {}
    const r = Object.hasOwn(routes, route) ? routes[route].limits : undefined
    if (r !== undefined) out.push({ scope: 'route', name: route, key: `route\n${route}`, quota: r })
    return out
  }

  /** Seconds until the window of `key` has room (0: room now, or no limit). */
  private full(key: string, limit: number): number {
    if (limit <= 0) return 0
    const now = this.clock.now()
    const second = Math.floor(now / 1000)
    const w = this.windows.get(key)
    if (w === undefined || w.second !== second || w.used < limit) return 0
    return Math.max(1, Math.ceil(((second + 1) * 1000 - now) / 1000))
  }

  private spend(key: string, limit: number): void {
    if (limit <= 0) return
    const second = Math.floor(this.clock.now() / 1000)
    const w = this.windows.get(key)
    if (w === undefined || w.second !== second) {
      if (this.windows.size > 10_000) this.sweep(second)
      this.windows.set(key, { second, used: 1 })
    } else w.used++
  }

  private sweep(second: number): void {
    for (const [k, w] of this.windows) if (w.second !== second) this.windows.delete(k)
  }

  private add(key: string, n: number): void {
    const v = (this.live.get(key) ?? 0) + n
    if (v <= 0) this.live.delete(key)
    else this.live.set(key, v)
  }
}
