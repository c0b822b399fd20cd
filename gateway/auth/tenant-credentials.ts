import { CredentialList } from './credentials'

/** The accepted outcome of a static credential (auth/route-auth.ts `StaticAccepted`), with its tenant. */
export type StaticAccepted = { readonly ok: true; readonly principal: { kind: 'static'; tenant: string } }

/** The tenant label of a caller no tenant claims (a refused credential, an unknown route). */
export const UNKNOWN_TENANT = 'unknown'

/**
 * One hook's accepted credentials on one route, by tenant: the route's own list (a tenant named after the
 * route) and the lists of the tenants the route admits. A presented value is compared with every list in
 * constant time and with no early exit, so timing tells neither whether it matched nor whose it is. A
 * credential belongs to one tenant (`check` refuses one that two tenants list: TENANT_CREDENTIAL_SHARED).
 */
export class TenantCredentials {
  private readonly lists: readonly { readonly tenant: string; readonly list: CredentialList }[]
  /** The accepted outcome per tenant, made once (the text hook checks a credential per request). */
  private readonly outcomes = new Map<string, StaticAccepted>()

  constructor(
    entries: readonly { readonly tenant: string; readonly values: readonly string[] | undefined }[],
    /**
     * Demand a credential even when no list is configured: a route that names its tenants, or admits
     * configured tenants, is never open to anonymous callers (a tenant without a list for this hook
     * opens nothing on it).
     */
    private readonly demand = false
  ) {
    this.lists = entries
      .map(e => ({ tenant: e.tenant, list: new CredentialList(e.values) }))
      .filter(e => e.list.required)
    for (const { tenant } of this.lists) this.outcomes.set(tenant, { ok: true, principal: { kind: 'static', tenant } })
  }

  /** One list of one tenant (a route's own auth alone; tests). */
  static single(values: readonly string[] | undefined, tenant: string): TenantCredentials {
    return new TenantCredentials([{ tenant, values }])
  }

  /** True when the hook demands a credential (a list is configured for the route or a tenant it admits). */
  get required(): boolean {
    return this.lists.length > 0 || this.demand
  }

  /** One presented value, raw or as `Bearer <value>`: true when some tenant of the route lists it. */
  accepts(value: string): boolean {
    return this.tenantOf(value) !== undefined
  }

  /** The tenant whose credential `value` is (raw or `Bearer <value>`), or undefined. */
  tenantOf(value: string): string | undefined {
    let found: string | undefined
    for (const e of this.lists) if (e.list.accepts(value) && found === undefined) found = e.tenant
    return found
  }

  /** The accepted outcome of `value` (its tenant's principal, one object per tenant), or undefined. */
  outcomeOf(value: string): StaticAccepted | undefined {
    const tenant = this.tenantOf(value)
    return tenant === undefined ? undefined : this.outcomes.get(tenant)
  }
}
