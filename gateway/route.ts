import type { HealthSettings, RouteConfig } from './config/types'
import { CredentialList } from './auth/credentials'
import type { HookAuth } from './auth/route-auth'
import { trustedIssuers } from './auth/token-config'
import type { TokenVerifier } from './auth/token-verify'
import type { CompiledMapping } from './mapping/compile'
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
  return {
    name: config.name,
    config,
    mapping,
    audioAuth: new CredentialList(config.auth.audio),
    textAuth: new CredentialList(config.auth.text),
    pool: new UpstreamPool(config, store, health),
    verifier
  }
}
