import type { Clock } from '../../clock'
import type { AudioSettings } from '../../config/types'
import type { GatewayError } from '../../errors'
import type { RouteRuntime } from '../../route'
import type { ContinuedSession, Store } from '../../store/port'
import type { Logger } from '../../telemetry/log'
import type { SpanAttributes } from '../../telemetry/tracing'
import type { LegCounters, Metrics } from '../../telemetry/metrics'
import type { Replica } from '../../upstream/pool'
import type { Connection, ConnectionFactory, VendorFailure } from '../connection/connection-contract'
import type { Placement } from '../placement/placement'
import type { VendorFeed } from '../feed/feed'
import type { SessionStats } from './session-stats'

// The seam between a platform leg (audio/leg/leg.ts), the registry (audio/session/registry.ts) and the vendor
// session state machine (audio/session/session.ts).

/** The platform leg a session currently serves (audio/leg/leg.ts). */
export interface SessionEvents {
  /** The vendor session is ready (first time, after a failover, or for a leg that re-attached). May come more than once. */
  sessionReady: (parameters: Record<string, unknown>) => void
  /** The session gave up; the attached leg ends its platform connection with this error. The session has closed itself. */
  sessionFailed: (error: GatewayError, extra: Record<string, unknown>) => void
  /**
   * A MESSAGE for the platform (already a PlatformWebSocketMessage in JSON). `channel`: the mapping's
   * `results[].channel` for a joined (stereo) session (audio/session/join.ts); absent or null: every leg.
   */
  deliver: (text: string, channel?: number | null) => void
  /** A newer leg with the same identity took the session over. */
  superseded: () => void
  /**
   * Something the vendor session did that its leg's trace shows as an event (telemetry/tracing.ts): a
   * vendor connection ready, one that could not be opened, a failover begun, done or failed. Never per frame.
   */
  sessionEvent: (name: SessionEventName, attributes: SpanAttributes) => void
}

/** The vendor session's moments a leg's span records. */
export type SessionEventName =
  | 'vendor.connected'
  | 'vendor.connect_failed'
  | 'failover.start'
  | 'failover.done'
  | 'failover.failed'

/** Who keeps sessions findable for a re-attach (audio/session/registry.ts). */
export interface SessionHost {
  parked: (s: Session) => void
  unparked: (s: Session) => void
  closed: (s: Session) => void
}

export interface SessionDeps {
  route: RouteRuntime
  settings: AudioSettings
  metrics: Metrics
  store: Store
  clock: Clock
  host: SessionHost
  log: Logger
  /** How a vendor connection is made; unit tests pass fake connections here. */
  connect?: ConnectionFactory
  /** Jitter of the recovery backoff, in [0, 1); unit tests pass a fixed one. */
  random?: () => number
  /** W3C `traceparent` the vendor upgrades carry, unless the mapping's headers set their own. */
  traceparent?: string
  /** Who opened the session (auth/hook-auth.ts `callerTag`), kept in its affinity record for the fleet. */
  caller?: string
  /**
   * The opening tenant's namespace on the route (route.ts `namespaceOf`): the contact's
   * shared setup results (a conversation) are kept within it, so no other tenant's leg or chat finds them.
   */
  namespace: string
  /** The sessions this process owns (audio/placement/placement.ts): a joined call is held there while it lives. */
  placement?: Placement
}

/**
 * Vendor session states. OPENING: the first vendor connection is being opened (audio is held).
 * READY: audio flows. RESUMING: a leg re-attached to a paused vendor session; audio queues until the
 * mapping's resume frame is out. RECOVERING: the vendor connection was lost mid-call; a replacement is
 * being opened (audio is queued, the platform leg stays open). CLOSED: over.
 */
export type SessionState = 'OPENING' | 'READY' | 'RESUMING' | 'RECOVERING' | 'CLOSED'

/** Where a leg writes platform audio (audio/feed/feed.ts `VendorFeed`, audio/session/join.ts a channel of a joined session). */
export type AudioInput = Pick<VendorFeed, 'write'>

/** A vendor session as its leg and the registry see it. */
export interface Session {
  readonly key: string
  readonly id: string
  readonly state: SessionState
  readonly attached: SessionEvents | null
  readonly counters: LegCounters
  /** Replicas, failovers and gap (audio/session/session-stats.ts): a joined leg reads its call's. */
  readonly stats: SessionStats
  /** The per-frame path: the leg writes platform audio here (an VendorFeed, or a join's channel input). */
  readonly feed: AudioInput
  /** Open the first vendor connection, on `preferred` first when given (affinity), else by balancing. */
  start: (preferred: Replica | null, continued?: ContinuedSession) => void
  /** The platform leg is gone: keep the vendor session for the re-attach grace, if there is one. */
  park: () => void
  /** A leg with the same identity came back: it continues this session (the leg attached before is superseded). */
  attach: (leg: SessionEvents, init: Record<string, unknown>, log: Logger) => void
  /** End the session; `graceful`: queued audio, the mapping's close frame, then the close handshake. */
  close: (graceful: boolean) => void
  /**
   * Shutdown drain: the leg continues on another instance. Close gracefully with this reason but keep
   * the affinity for `ttlSeconds`, so the next instance opens its vendor session on the same replica.
   */
  handOff: (reason: string, ttlSeconds: number) => void
  /** Stop (false) or restart (true) reading from the vendor: the platform side is backed up, or drained. */
  readVendor: (on: boolean) => void
}

/**
 * Why a session cannot go on as it is. connection: a vendor connection failed (judged by
 * audio/session/failover.ts: walk on, recover, or end). fatal: end the leg with this error (`internal`: logged
 * as the detail, never sent to the platform).
 */
export type SessionFailure =
  | {
      readonly kind: 'connection'
      readonly conn: Connection
      readonly failure: VendorFailure
      readonly when: 'refused' | 'lost'
    }
  | {
      readonly kind: 'fatal'
      readonly error: GatewayError
      readonly extra?: Record<string, unknown>
      readonly internal?: string
    }
