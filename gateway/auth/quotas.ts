import type { Clock } from '../clock'
import type { Quota, QuotaName, RouteConfig, TenantConfig } from '../config/types'

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
 * - A leg takes a place under both scopes' `legs` and a unit of both `legsPerSecond` windows, or is refused
 *   by the first quota it would exceed (nothing is taken then). `force` (a leg taking over its own live
 *   session: not a new leg) takes its place whatever the counts and spends no rate.
 * - An utterance spends a unit of both `utterancesPerSecond` windows, or is refused.
 *
 * Never more is admitted than a quota; nothing is refused under it (tests/unit/auth/quotas.test.ts).
 */
export class Quotas {
  private readonly live = new Map<string, number>()
  private readonly windows = new Map<string, { second: number; used: number }>()

  constructor(
    private readonly settings: () => QuotaSettings,
    private readonly clock: Clock
  ) {}

  /** A new leg of `tenant` on `route`: its release (call once, when the leg ends), or the quota that refuses it. */
  takeLeg(route: string, tenant: string, force = false): (() => void) | QuotaRefusal {
    const scopes = this.scopes(route, tenant)
    if (!force) {
      for (const s of scopes) {
        if (s.quota.legs > 0 && (this.live.get(s.key) ?? 0) >= s.quota.legs)
          return { limit: `${s.scope}_legs`, retryAfterSeconds: 1 }
        const wait = this.full(`${s.key}\nlegs/s`, s.quota.legsPerSecond)
        if (wait > 0) return { limit: `${s.scope}_legs_per_second`, retryAfterSeconds: wait }
      }
      for (const s of scopes) this.spend(`${s.key}\nlegs/s`, s.quota.legsPerSecond)
    }
    for (const s of scopes) this.add(s.key, 1)
    let released = false
    return () => {
      if (released) return
      released = true
      for (const s of scopes) this.add(s.key, -1)
    }
  }

  /** An utterance of `tenant` on `route`: true, or the quota that refuses it. */
  takeUtterance(route: string, tenant: string): true | QuotaRefusal {
    const scopes = this.scopes(route, tenant)
    for (const s of scopes) {
      const wait = this.full(`${s.key}\nutt/s`, s.quota.utterancesPerSecond)
      if (wait > 0) return { limit: `${s.scope}_utterances_per_second`, retryAfterSeconds: wait }
    }
    for (const s of scopes) this.spend(`${s.key}\nutt/s`, s.quota.utterancesPerSecond)
    return true
  }

  /** Live legs counted now under `scope` (tests, the admin view). */
  legs(scope: QuotaScope, name: string): number {
    return this.live.get(`${scope}\n${name}`) ?? 0
  }

  private scopes(route: string, tenant: string): { scope: QuotaScope; key: string; quota: Quota }[] {
    const s = this.settings()
    const out: { scope: QuotaScope; key: string; quota: Quota }[] = []
    const t = Object.hasOwn(s.tenants ?? {}, tenant) ? s.tenants![tenant]!.limits : undefined
    if (t !== undefined) out.push({ scope: 'tenant', key: `tenant\n${tenant}`, quota: t })
    const r = Object.hasOwn(s.routes ?? {}, route) ? s.routes![route]!.limits : undefined
    if (r !== undefined) out.push({ scope: 'route', key: `route\n${route}`, quota: r })
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
