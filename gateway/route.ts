import type { HealthSettings, RouteConfig } from './config/types'
import { CredentialList } from './auth/credentials'
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
}

export function buildRoute(
  config: RouteConfig,
  mapping: CompiledMapping,
  store: Store,
  health: HealthSettings
): RouteRuntime {
  return {
    name: config.name,
    config,
    mapping,
    audioAuth: new CredentialList(config.auth.audio),
    textAuth: new CredentialList(config.auth.text),
    pool: new UpstreamPool(config, store, health)
  }
}
