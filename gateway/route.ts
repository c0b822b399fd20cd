import type { HealthSettings, RouteConfig, TeeConfig, TenantConfig } from './config/types'
import { anonymousOutcome } from './auth/hook-auth'
import type { HookAuth, RouteAuthOutcome } from './auth/route-auth'
import { TenantCredentials } from './auth/tenant-credentials'
import { trustedIssuers } from './config/tokens'
import type { TokenVerifier } from './auth/token-verify'
import { type CompiledMapping, loadMapping } from './mapping/compile'
import type { Store } from './store/port'
import { UpstreamPool } from './upstream/pool'

/** Everything a route needs at run time, built once from a config snapshot. */
export interface RouteRuntime {
  readonly name: string
  readonly config: RouteConfig
  readonly mapping: CompiledMapping
  /** Accepted credentials by tenant (the route's own auth, a tenant named after the route, and its tenants'). */
  readonly audioAuth: TenantCredentials
  readonly textAuth: TenantCredentials
  /** The configured tenants this route admits (`routes.<r>.tenants`, else every tenant). */
  readonly tenants: readonly TenantConfig[]
  /** Token client id → its tenant (null: a tenant this route does not admit). */
  readonly clients: ReadonlyMap<string, string | null>
  /** The outcome of a caller of a route that asks for no credential: the route's own tenant. */
  readonly anonymous: RouteAuthOutcome
  readonly pool: UpstreamPool
  /** Bearer token verification, when the config has a tokens section. */
  readonly verifier?: TokenVerifier
  /** Fan-out vendors (config `tee`), each with its own mapping and pool; absent: none. */
  readonly tees?: readonly TeeRuntime[]
}

/**
 * One fan-out vendor of a route. `runtime` is a route of its own named `<route>/<tee>` (its pool, its
 * replicas' health and metrics labels); it never takes platform connections itself.
 */
export interface TeeRuntime {
  readonly name: string
  readonly route: string
  readonly results: 'drop' | 'forward'
  readonly runtime: RouteRuntime
  /** Its own queue bound (config `bufferBytes`), else audio.bufferBytes. */
  readonly bufferBytes?: number
}

/** The route label of a tee's vendor sessions and replicas: never a route name (those have no `/`). */
export function teeLabel(route: string, tee: string): string {
  return `${route}/${tee}`
}

/** The route config a tee's own runtime is built from. */
export function teeRouteConfig(route: RouteConfig, tee: TeeConfig): RouteConfig {
  return {
    name: teeLabel(route.name, tee.name),
    default: false,
    async: true,
    mapping: tee.mapping,
    auth: {},
    params: tee.params ?? route.params,
    ...(tee.health !== undefined ? { health: tee.health } : {}),
    upstreams: tee.upstreams
  }
}

/** Every pool of a route: its own, then its tees' (probes, ejections, fleet stream counts). */
export function routePools(route: RouteRuntime): UpstreamPool[] {
  return [route.pool, ...(route.tees ?? []).map(t => t.runtime.pool)]
}

/** True when the hook demands a credential (static list or tokens): mappings then never forward it. */
export function demandsCredential(route: RouteRuntime, hook: 'audio' | 'text'): boolean {
  const h = hookAuth(route, hook)
  return h.list.required || h.tokens
}

/** One hook's credential check: its static list, and bearer tokens when the route's `auth.tokens` takes them. */
export function hookAuth(route: RouteRuntime, hook: 'audio' | 'text'): HookAuth {
  return {
    route: route.name,
    hook,
    list: hook === 'audio' ? route.audioAuth : route.textAuth,
    tokens: trustedIssuers(route.config.auth.tokens).length > 0,
    clients: route.clients
  }
}

/** The configured tenants a route admits: those `routes.<r>.tenants` names, else every tenant. */
export function admittedTenants(
  config: RouteConfig,
  tenants: Readonly<Record<string, TenantConfig>> | undefined
): TenantConfig[] {
  const all = Object.values(tenants ?? {})
  return config.tenants === undefined ? all : all.filter(t => config.tenants!.includes(t.name))
}

export function buildRoute(
  config: RouteConfig,
  mapping: CompiledMapping,
  store: Store,
  health: HealthSettings,
  verifier?: TokenVerifier,
  /** Every configured tenant (`tenants:`); the route admits those its `tenants` names, else all. */
  allTenants?: Readonly<Record<string, TenantConfig>>
): RouteRuntime {
  const tenants = admittedTenants(config, allTenants)
  // A route that names its tenants, or admits configured ones, is never open to anonymous callers.
  const demand = config.tenants !== undefined || tenants.length > 0
  const lists = (hook: 'audio' | 'text'): TenantCredentials =>
    new TenantCredentials(
      [
        { tenant: config.name, values: config.auth[hook] },
        ...tenants.map(t => ({ tenant: t.name, values: t.credentials[hook] }))
      ],
      demand
    )
  const clients = new Map<string, string | null>()
  for (const t of Object.values(allTenants ?? {}))
    for (const id of t.credentials.clients ?? []) clients.set(id, tenants.includes(t) ? t.name : null)
  const tees = (config.tee ?? []).map(
    (tee): TeeRuntime => ({
      name: tee.name,
      route: config.name,
      results: tee.results,
      runtime: buildRoute(teeRouteConfig(config, tee), loadMapping(tee.mapping), store, health),
      ...(tee.bufferBytes !== undefined ? { bufferBytes: tee.bufferBytes } : {})
    })
  )
  return {
    name: config.name,
    config,
    mapping,
    audioAuth: lists('audio'),
    textAuth: lists('text'),
    tenants,
    clients,
    anonymous: anonymousOutcome(config.name),
    pool: new UpstreamPool(config, store, health),
    verifier,
    ...(tees.length > 0 ? { tees } : {})
  }
}

/**
 * The namespace of a tenant's calls on a route: the route's own tenant (its own auth, or no credential at all)
 * keeps the route's name, so its keys read as before; a configured tenant's are `<tenant>@<route>` (`@` is in
 * neither a route's nor a tenant's name). Every key of a call (owner record, placement, re-attach, join,
 * affinity, a mapping's shared setup results) starts with it, so no tenant can claim, own, block or find another's contact.
 */
export function namespaceOf(route: string, tenant: string): string {
  return tenant === route ? route : `${tenant}@${route}`
}
