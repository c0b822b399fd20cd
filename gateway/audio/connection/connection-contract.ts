import type { ResultTimeline } from '../feed/result-timeline'
import type { Clock } from '../../clock'
import type { AudioSettings } from '../../config/types'
import type { AudioMapping, PreviousSession } from '../../mapping/audio'
import type { MappingInput } from '../../mapping/run'
import type { ContinuedSession, Store } from '../../store/port'
import type { RouteRuntime } from '../../route'
import type { Logger } from '../../telemetry/log'
import type { LegCounters, Metrics } from '../../telemetry/metrics'
import type { Replica } from '../../upstream/pool'
import type { SocketFailure } from '../../upstream/ws-leg'
import type { ControlChain } from './control-chain'
import type { AudioSink, LossReport } from '../feed/feed'

// The seam between a vendor session and its vendor connections (audio/connection/vendor-connection.ts): what a
// connection tells, what the session may ask of it, and the factory unit tests replace.

/**
 * Why a vendor connection failed, as a value. unreachable: it never opened (`socket` says why; an
 * `upgrade` 4xx is the vendor's verdict on the request, not a sick replica). closed: the vendor closed it.
 * not-ready: no readiness within `readyTimeoutSeconds`. refused: the vendor's own refusal message.
 * mapping: the mapping could not build what this connection needs (`error` is the expression's text:
 * for logs only). replica-down: its replica was marked down (probe or ejection). ended: a control rule
 * of the mapping ended the session on the vendor's word (`then`: fail over, or end the leg).
 */
export type VendorFailure =
  | { readonly kind: 'unreachable'; readonly socket: SocketFailure }
  | { readonly kind: 'closed'; readonly code: number; readonly reason: string; readonly socket: SocketFailure | null }
  | { readonly kind: 'not-ready' }
  | { readonly kind: 'refused'; readonly vendorMessage: string | undefined }
  | { readonly kind: 'mapping'; readonly stage: 'url' | 'headers' | 'template' | 'open'; readonly error: string }
  | { readonly kind: 'replica-down'; readonly why: string }
  | { readonly kind: 'ended'; readonly then: 'failover' | 'leg'; readonly vendorMessage: string | undefined }

/** What a connection tells its session. No ready, refused or lost after `abort` or `goodbye`. */
export interface ConnectionEvents {
  /** The vendor session is ready for audio (`params`: the mapping's `ready.parameters`). */
  ready: (conn: Connection, params: Record<string, unknown>) => void
  /** It failed before it was ready. The connection is already over. */
  refused: (conn: Connection, failure: VendorFailure) => void
  /** It failed once ready. The connection is already over. */
  lost: (conn: Connection, failure: VendorFailure) => void
  /** A message for the platform (a PlatformWebSocketMessage as JSON text). */
  result: (text: string, channel?: number | null) => void
  /**
   * The replica of a ready connection was marked down: true when the session takes it from here (a
   * parked session ends with the mapping's close sequence); otherwise the connection is lost as usual.
   */
  replicaDown?: (conn: Connection) => boolean
  /** The vendor asked for a new session (a control rule's `reconnect`); this one carries audio until it is ready. */
  reconnect?: (conn: Connection) => void
  /**
   * Rebalancing (upstream/rebalance.ts) asks to move this ready connection's call to `to`: a new vendor
   * session there, make-before-break. True when the move began.
   */
  move?: (conn: Connection, to: Replica) => boolean
  /**
   * A connection saying goodbye (retired by a handover, or its session closing) ended without the
   * vendor's close: a frozen or stalled vendor never read what it was sent since its last sign of life
   * (`lossReport`). The session counts that audio as lost; a handover cannot replay it, since the new
   * vendor session has already had the audio that came after.
   */
  unconfirmed?: (conn: Connection) => void
}

/** What every connection of one session shares. The session replaces `log` when a leg re-attaches. */
export interface ConnectionContext {
  readonly route: RouteRuntime
  readonly settings: AudioSettings
  readonly metrics: Metrics
  readonly clock: Clock
  readonly chain: ControlChain
  readonly counters: LegCounters
  /** W3C `traceparent` for the upgrade, unless the mapping's headers set their own. */
  readonly traceparent?: string
  /** The leg's delivered finals (audio/feed/result-timeline.ts): absent, results are not placed on the call's timeline. */
  readonly results?: ResultTimeline
  /** The shared store (a session's connections have it): a mapping's setup steps share a contact's results there. */
  readonly store?: Store
  /** The opening tenant's namespace on the route (audio/session/session-contract.ts `SessionDeps`). */
  readonly namespace: string
  /** The session's membership of its contact's group (audio/connection/setup-steps.ts): a session's connections share it. */
  readonly group?: LegGroup
  log: Logger
}

/**
 * Whether a leg joined its contact's group (a connection's setup succeeded while it was still being built), and
 * on which replica: the session's end leaves the group whenever it joined, ready or not (audio/session/teardown.ts).
 */
export interface LegGroup {
  joinedOn: Replica | null
}

/**
 * BUILDING: URL and headers being evaluated. CONNECTING: the upgrade is under way. OPENING: open frame
 * sent, readiness awaited. READY: carries audio. CLOSING: the goodbye is under way. CLOSED: over.
 */
export type ConnectionState = 'BUILDING' | 'CONNECTING' | 'OPENING' | 'READY' | 'CLOSING' | 'CLOSED'

/** A vendor connection as its session sees it. */
export interface Connection extends AudioSink {
  readonly replica: Replica
  readonly state: ConnectionState
  /** The call's frame its audio starts at (audio/feed/result-timeline.ts), set by the session when audio flows to it. */
  startFrame?: number
  /**
   * Rotation: take over the audio `old` holds for an incomplete chunk; returns how many platform frames
   * that was (they come before the feed's next frame on the new connection's timeline).
   */
  takeOver: (old: Connection) => number
  /** A handover made it current while `old` says goodbye: its results wait for `old`'s last ones. */
  follow?: (old: Connection) => void
  /** `fn` once it is over (at once if it is). */
  whenClosed?: (fn: () => void) => void
  /** Audio held for an incomplete chunk, given up (rotation). */
  takeRemainder: () => Uint8Array | null
  /** What a new session that continues this one is told of it (mapping input `previous`). */
  handover?: () => PreviousSession
  /** Send the mapping's pause or resume frame (if any) on the control chain, then call `done`. */
  control: (kind: 'pause' | 'resume', done?: () => void) => void
  /** Stop / restart reading from the vendor (the platform side is backed up). */
  pause: () => void
  resume: () => void
  /** Close gracefully: encoder remainder, the mapping's close frame, the vendor's goodbye or a timeout; `reason` in the close frame. */
  goodbye: (reason?: string) => void
  /** Its mapping session id and frame counters (kept in the store when a drain hands the leg off). */
  continuation?: () => ContinuedSession
  /** End at once, telling nobody. */
  abort: () => void
  /**
   * `done` once the vendor has shown (a pong) that it read all it was sent so far; at once when no pings
   * run; never when the connection is lost first. A handover switches only then (audio/session/handover.ts).
   */
  confirm?: (done: () => void) => void
  /** Once lost: what the vendor may not have processed, and its last sign of life (clock ms). */
  lossReport?: () => LossReport & { readonly lastLifeAt: number }
}

/** The audio mapping of a route a vendor session is opened on: a route without one opens none (a bug if it does). */
export function audioMappingOf(route: RouteRuntime): AudioMapping {
  const audio = route.mapping.audio
  if (audio === null) throw new TypeError(`route ${route.name}: a vendor session needs a mapping with an audio section`)
  return audio
}

export type ConnectionFactory = (
  ctx: ConnectionContext,
  replica: Replica,
  input: MappingInput,
  events: ConnectionEvents
) => Connection
