import { escapePointer } from '../validate/compile'

// The `tenants:` section and `routes.<r>.tenants` (config/load.ts): the cross-field rules the schema cannot
// say. Two forms name a tenant: an entry of `tenants:` (its credentials, clients and quotas), and a route's
// own `auth` (a tenant of its own, named after the route, admitted on that route only).

/** The stable code of a credential (or token client) that two tenants claim: it would not say who calls. */
export const TENANT_CREDENTIAL_SHARED = 'TENANT_CREDENTIAL_SHARED'

/** True when the route's own `auth` names credentials or takes tokens: it is then a tenant of its own. */
export function hasOwnAuth(route: Record<string, any>): boolean {
  const a = route.auth ?? {}
  return (a.audio?.length ?? 0) > 0 || (a.text?.length ?? 0) > 0 || (a.tokens !== undefined && a.tokens !== false)
}

/**
 * Names each tenant, fills its defaults, and lists the problems: a route naming a tenant that does not exist,
 * a tenant named like a route that has its own auth (two tenants of one name), a token client that is not
 * configured, and a credential or client that belongs to two tenants (`TENANT_CREDENTIAL_SHARED`). The same
 * credential on two routes' own auth stays allowed: each of those tenants is admitted on its own route only.
 * Never quotes a credential.
 */
export function tenantProblems(cfg: Record<string, any>): { pointer: string; message: string }[] {
  const out: { pointer: string; message: string }[] = []
  const tenants = (cfg.tenants ?? {}) as Record<string, any>
  cfg.tenants = tenants
  for (const [name, tenant] of Object.entries(tenants)) {
    tenant.name = name
    tenant.credentials ??= {}
    tenant.limits ??= { legs: 0, legsPerSecond: 0, utterancesPerSecond: 0 }
    const route = cfg.routes[name]
    if (route !== undefined && hasOwnAuth(route))
      out.push({
        pointer: `/tenants/${escapePointer(name)}`,
        message:
          `route ${name} has its own auth, which makes it a tenant named ${name} too: rename the tenant, or move ` +
          `the route's credentials into tenants.${name}.credentials and list it in routes.${name}.tenants`
      })
  }
  for (const [name, route] of Object.entries(cfg.routes as Record<string, any>)) {
    ;((route.tenants ?? []) as string[]).forEach((t, i) => {
      if (!Object.hasOwn(tenants, t))
        out.push({
          pointer: `/routes/${escapePointer(name)}/tenants/${i}`,
          message: `no tenant named ${t} under tenants:`
        })
    })
  }
  const clientIds = new Set(((cfg.tokens?.clients ?? []) as { id: string }[]).map(c => c.id))
  // Whom each credential (per value) and each client belongs to: a configured tenant, or a route's own auth.
  const belongsTo = new Map<string, { tenant: string; pointer: string; route: boolean }>()
  const claim = (key: string, tenant: string, pointer: string, route: boolean): void => {
    const first = belongsTo.get(key)
    if (first === undefined) return void belongsTo.set(key, { tenant, pointer, route })
    if (first.tenant === tenant || (first.route && route)) return
    out.push({
      pointer,
      message:
        `${TENANT_CREDENTIAL_SHARED}: this ${key.startsWith('client\n') ? 'token client' : 'credential'} also ` +
        `belongs to ${first.route ? 'the own auth of route' : 'tenant'} ${first.tenant} (${first.pointer}): a ` +
        'credential names one tenant; give each tenant its own'
    })
  }
  for (const [name, tenant] of Object.entries(tenants)) {
    const at = `/tenants/${escapePointer(name)}/credentials`
    for (const hook of ['audio', 'text'])
      ((tenant.credentials[hook] ?? []) as string[]).forEach((v, i) => {
        if (v !== '') claim(`value\n${v}`, name, `${at}/${hook}/${i}`, false)
      })
    ;((tenant.credentials.clients ?? []) as string[]).forEach((id, i) => {
      if (!clientIds.has(id))
        out.push({ pointer: `${at}/clients/${i}`, message: `no token client ${id} under tokens.clients` })
      claim(`client\n${id}`, name, `${at}/clients/${i}`, false)
    })
  }
  for (const [name, route] of Object.entries(cfg.routes as Record<string, any>))
    for (const hook of ['audio', 'text'])
      ((route.auth?.[hook] ?? []) as string[]).forEach((v, i) => {
        if (v !== '') claim(`value\n${v}`, name, `/routes/${escapePointer(name)}/auth/${hook}/${i}`, true)
      })
  return out
}

/**
 * The tenants a route admits, in one line for `check`: the two forms, and which of them this route takes.
 */
export function describeTenants(
  route: { readonly name: string; readonly tenants?: readonly string[]; readonly auth: object },
  all: readonly string[]
): string {
  const own = hasOwnAuth(route) ? `its own auth (tenant ${route.name})` : null
  const listed =
    route.tenants !== undefined
      ? `tenants ${route.tenants.join(', ') || '(none)'} (routes.${route.name}.tenants)`
      : all.length > 0
        ? `every tenant (${all.join(', ')}; no routes.${route.name}.tenants)`
        : null
  const who = [own, listed].filter(s => s !== null).join(' and ')
  return `route ${route.name}: ${who === '' ? `no credential asked (anonymous callers, tenant ${route.name})` : who}`
}
