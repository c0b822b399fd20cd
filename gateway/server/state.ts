import type { CallBook } from '../audio/leg/call-book'
import type { AudioLeg } from '../audio/leg/leg'
import type { Placement } from '../audio/placement/placement'
import type { SessionRegistry } from '../audio/session/registry'
import type { Admission } from '../auth/admission'
import type { FleetKey } from '../auth/fleet-key'
import type { RelayTokens } from '../auth/relay-token'
import type { Config } from '../config/types'
import type { RouteRuntime } from '../route'
import type { Store } from '../store/port'
import type { Logger } from '../telemetry/log'
import type { LogLimiter } from '../telemetry/log-limit'
import type { Metrics } from '../telemetry/metrics'
import type { Tracing } from '../telemetry/tracing'

/** What the server's route handlers share. Built by server/app.ts from one config snapshot. */
export interface ServerState {
  config: Config
  routes: Map<string, RouteRuntime>
  defaultRoute: RouteRuntime | null
  metrics: Metrics
  log: Logger
  /** Stop accepting: new upgrades and text requests get SHUTTING_DOWN (the lifecycle's stage says, server/lifecycle.ts). */
  readonly draining: boolean
  /** A drain has begun: /readyz is 503 at once, while new work is still served for shutdown.drainDelaySeconds. */
  readonly leaving: boolean
  /** Live audio legs, so shutdown can end them. */
  legs: Set<AudioLeg>
  uwsNative: boolean
  store: Store
  sessions: SessionRegistry
  /** The sessions this process owns and, with a shared store, where the others' are (audio/placement/placement.ts). */
  placement: Placement
  /** The gateway's failure budget and leg limits (this process's, or the main process's for a worker). */
  admission: Admission
  /** The key this process shares with its fleet (caller tags, relay tokens). */
  fleetKey: FleetKey
  /** Signs and checks relay tokens (auth/relay-token.ts). */
  relayTokens: RelayTokens
  /** This process's call records (`GET /admin/calls`, audio/leg/call-book.ts). */
  calls: CallBook
  /** Lines a client can flood (refusals, 404s) are rate-limited here (telemetry/log-limit.ts). */
  logLimit: LogLimiter
  /** Where the spans of utterances and legs start (telemetry/tracing.ts; off: the trace context only passed on). */
  tracing: Tracing
}
