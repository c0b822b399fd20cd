import type { HealthSettings, RouteConfig, TeeConfig } from './config/types'
import { CredentialList } from './auth/credentials'
import type { HookAuth } from './auth/route-auth'
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
  readonly audioAuth: CredentialList
  readonly textAuth: CredentialList
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
    tokens: trustedIssuers(route.config.auth.tokens).length > 0
  }
}

export function buildRoute(
  config: RouteConfig,
  mapping: CompiledMapping,
  store: Store,
  health: HealthSettings,
  verifier?: TokenVerifier
): RouteRuntime {
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
    audioAuth: new CredentialList(config.auth.audio),
    textAuth: new CredentialList(config.auth.text),
    pool: new UpstreamPool(config, store, health),
    verifier,
    ...(tees.length > 0 ? { tees } : {})
  }
}
