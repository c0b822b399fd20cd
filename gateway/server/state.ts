import type { AudioLeg } from '../audio/leg'
import type { JoinDirectory } from '../audio/join-relay'
import type { AuthGuard } from '../auth/guard'
import type { LegLimits } from '../auth/leg-limits'
import type { SessionRegistry } from '../audio/registry'
import type { Store } from '../store/port'
import type { Config } from '../config/types'
import type { RouteRuntime } from '../route'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'

/** What the server's route handlers share. Built by server/app.ts from one config snapshot. */
export interface ServerState {
  config: Config
  routes: Map<string, RouteRuntime>
  defaultRoute: RouteRuntime | null
  metrics: Metrics
  log: Logger
  /** Stop accepting: new upgrades and text requests get SHUTTING_DOWN. */
  draining: boolean
  /** A drain has begun: /readyz is 503 at once, while new work is still served for shutdown.drainDelaySeconds. */
  leaving: boolean
  /** Live audio legs, so shutdown can end them. */
  legs: Set<AudioLeg>
  uwsNative: boolean
  store: Store
  sessions: SessionRegistry
  /** Failure delay and per-address failure budget of both hooks (auth.*). */
  guard: AuthGuard
  /** Live legs per route and per client (limits.*). */
  legLimits: LegLimits
  /** Joined calls' owners across processes (a shared store: Redis, or the workers' main process); absent: joins are local. */
  joins?: JoinDirectory
}
