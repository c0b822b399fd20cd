import type { Admission } from '../../auth/admission'
import type { RelayClaims, RelayTokens } from '../../auth/relay-token'
import type { AuthSettings } from '../../config/types'
import type { Logger } from '../../telemetry/log'
import type { TraceSpan } from '../../telemetry/tracing'
import type { LogLimiter } from '../../telemetry/log-limit'
import type { CallBook } from './call-book'
import type { HandshakeCheck } from './handshake'
import type { SessionFate } from './leg-call'
import type { LegSessionDeps } from './leg-session'
import type { Place } from '../placement/placement'
import type { RelayLinkFactory } from '../placement/relay-link'
import type { Session, SessionEvents } from '../session/session-contract'
import { unhandled } from '../../result'

// The seam between the uWS adapter (server/audio-route.ts) and a platform leg (audio/leg/leg.ts), and the
// leg's states with what every event does in each: total tables, so a new state does not compile until
// every table says what it does there.

/** The platform socket as the leg sees it (the uWS adapter lives in server/audio-route.ts). */
export interface PlatformLeg {
  /** uWS semantics: 1 sent, 0 sent but backpressure built up, 2 dropped (backpressure limit). */
  sendText: (text: string) => number
  /** Send a close frame; the adapter then reports `onPlatformClose` synchronously. */
  end: (code: number, reason: string) => void
  bufferedAmount: () => number
}

export interface LegDeps extends LegSessionDeps {
  log: Logger
  /** The leg's span (telemetry/tracing.ts): its handshake, placement, vendor sessions and end as events; `traceparent` is its. */
  span?: TraceSpan
  /** Above this many bytes queued towards the platform, reading from the vendor pauses. */
  platformHighWaterBytes: number
  /** The gateway's failure budget and leg limits (auth/admission.ts). */
  admission: Admission
  /** `auth.failureDelayMs` of the config in force. */
  auth: () => AuthSettings
  /** The platform's address: as its socket shows it, or as a relay token asserted it. The failure budget's key. */
  clientAddress: string
  /** Largest init message in bytes (`limits.initMessageBytes`; absent: only uws.maxPayloadBytes). */
  initMessageBytes?: number
  /** A leg relayed here by another process (server/fleet-listener.ts): what its relay token asserted. */
  relayed?: RelayClaims
  /** Signs what this process asserts when it relays a leg (audio/placement/relay-link.ts). */
  relayTokens: RelayTokens
  /** The fleet's caller-tag key (auth/fleet-key.ts): a static credential is compared by its keyed hash. */
  callerKey: Buffer
  /** How relay links are made (default: real ones); unit tests pass fakes. */
  relayLink?: RelayLinkFactory
  /** This process's call records (`GET /admin/calls`); absent in unit tests. */
  calls?: CallBook
  /** Lines an unauthenticated client can cause (a refused leg's `leg_failed`) are rate-limited here. */
  logLimit?: LogLimiter
}

/**
 * Platform leg states.
 * - AWAIT_INIT: upgraded, waiting for the init message.
 * - VERIFYING: the init message is being checked (failure budget, credential, schema); audio is held.
 * - REFUSING: a refused credential waits out `auth.failureDelayMs`; audio is dropped, text ignored.
 * - PLACING: checked; where its session is (audio/placement/placement.ts) and its slot under the leg limits are
 *   being found; audio is held.
 * - CONNECTING: its session is here and opening; audio goes to it (held there until the vendor is ready).
 * - STREAMING: CONNECTED sent; audio goes to its session.
 * - RELAYING: its session is in another process; audio goes to it over a relay link (audio/placement/relay-link.ts).
 * - CLOSED: over (the platform closed, or a failure or a drain ended it).
 */
export type LegState =
  | 'AWAIT_INIT'
  | 'VERIFYING'
  | 'REFUSING'
  | 'PLACING'
  | 'CONNECTING'
  | 'STREAMING'
  | 'RELAYING'
  | 'CLOSED'

/** A leg's checked init message, its session key and when it was accepted (clock ms): the leg's from PLACING on. */
export interface AcceptedLeg {
  readonly checked: Extract<HandshakeCheck, { ok: true }>
  readonly key: string
  readonly at: number
}

/** A relay link as the leg holds it (audio/placement/relay-link.ts). */
export type LegLink = ReturnType<RelayLinkFactory>

/**
 * The leg's state with what it holds there, and only there: its accepted init from PLACING on, its
 * session while CONNECTING or STREAMING, the owner and relay link while RELAYING. No field of the leg
 * is null in one state and read with `!` in another.
 */
export type LegPhase =
  | { readonly state: 'AWAIT_INIT' | 'VERIFYING' | 'REFUSING' | 'CLOSED' }
  | { readonly state: 'PLACING'; readonly accepted: AcceptedLeg }
  | { readonly state: 'CONNECTING' | 'STREAMING'; readonly accepted: AcceptedLeg; readonly session: Session }
  | {
      readonly state: 'RELAYING'
      readonly accepted: AcceptedLeg
      readonly relayedTo: Extract<Place, { kind: 'relay' }>
      readonly link: LegLink
    }

/** The phases that hold nothing, made once. */
export const BARE = {
  AWAIT_INIT: { state: 'AWAIT_INIT' },
  VERIFYING: { state: 'VERIFYING' },
  REFUSING: { state: 'REFUSING' },
  CLOSED: { state: 'CLOSED' }
} as const satisfies Record<string, LegPhase>

/** What a phase holds that the leg lets go when it ends, or pauses under platform backpressure. */
export interface LegTies {
  readonly session: Session | null
  readonly link: LegLink | null
}

const NOTHING: LegTies = { session: null, link: null }

/** What ended on its own side before the leg did (failed, taken by another leg): it is not let go again. */
export type Gone = 'session' | 'link' | null

/** More fields of a leg's ERROR frame and its log line (retryAfterSeconds, detail). */
export type Extra = Record<string, unknown>

/** The session or relay link `phase` holds (none before CONNECTING, nor in REFUSING or CLOSED), but what is `gone`. */
export function tiesOf(phase: LegPhase, gone: Gone = null): LegTies {
  switch (phase.state) {
    case 'CONNECTING':
    case 'STREAMING':
      return gone === 'session' ? NOTHING : { session: phase.session, link: null }
    case 'RELAYING':
      return gone === 'link' ? NOTHING : { session: null, link: phase.link }
    case 'AWAIT_INIT':
    case 'VERIFYING':
    case 'REFUSING':
    case 'PLACING':
    case 'CLOSED':
      return NOTHING
    default:
      return unhandled(phase)
  }
}

/** Platform backpressure: reading from the vendor side (the session, or the relay link) pauses, or resumes. */
export function pauseVendorSide(phase: LegPhase, pause: boolean): void {
  const { session, link } = tiesOf(phase)
  session?.readVendor(!pause)
  if (pause) link?.pause()
  else link?.resume()
}

/** A binary frame from the platform: refused (not the init), held, dropped, passed to the sink, or counted late. */
export const ON_BINARY: Record<LegState, 'refuse' | 'hold' | 'drop' | 'pass' | 'late'> = {
  AWAIT_INIT: 'refuse',
  VERIFYING: 'hold',
  REFUSING: 'drop',
  PLACING: 'hold',
  CONNECTING: 'pass',
  STREAMING: 'pass',
  RELAYING: 'pass',
  CLOSED: 'late'
}

/** A text frame from the platform: the init message, or ignored (logged at debug, or silently). */
export const ON_TEXT: Record<LegState, 'init' | 'ignore' | 'silent'> = {
  AWAIT_INIT: 'init',
  VERIFYING: 'ignore',
  REFUSING: 'silent',
  PLACING: 'ignore',
  CONNECTING: 'ignore',
  STREAMING: 'ignore',
  RELAYING: 'ignore',
  CLOSED: 'silent'
}

/**
 * What the leg's session or relay becomes when the leg ends: a streaming session is parked (a re-attach
 * may continue it), one not yet ready is closed, a relay link is closed (the owner parks its side).
 */
export const ON_END: Record<LegState, 'nothing' | 'close-session' | 'park-session' | 'close-link'> = {
  AWAIT_INIT: 'nothing',
  VERIFYING: 'nothing',
  REFUSING: 'nothing',
  PLACING: 'nothing',
  CONNECTING: 'close-session',
  STREAMING: 'park-session',
  RELAYING: 'close-link',
  CLOSED: 'nothing'
}

/** uWS cut the platform socket for a frame it will not deliver (over its read limit, or text not UTF-8): a leg outcome. */
export type PlatformCut = 'too_large_cut' | 'invalid_utf8'

/** How a leg ends: its session parked (the platform left), closed (a failure), neither (relayed), or handed off (a drain). */
export type LegEnd = 'park' | 'close' | 'nothing' | { handOffSeconds: number }

/**
 * What `ON_END` says, done: the leg that ended in state `was` lets its session go (parked for a re-attach,
 * closed, or handed off in a drain), unless another leg took it meanwhile, or closes its relay link.
 * Returns what became of the session.
 */
export function letGo({ session, link }: LegTies, leg: SessionEvents, was: LegState, how: LegEnd): SessionFate {
  if (ON_END[was] === 'close-link') link?.close()
  if (session === null) return 'none'
  if (session.attached !== leg) return 'taken'
  if (how === 'nothing') return 'none'
  switch (ON_END[was]) {
    case 'park-session':
      if (how === 'close') break
      if (how === 'park') {
        session.park()
        return session.state === 'CLOSED' ? 'closed' : 'parked'
      }
      session.handOff('gateway instance draining; the leg continues on another instance', how.handOffSeconds)
      return 'handed_off'
    case 'close-session':
      session.close(how !== 'park')
      return 'closed'
    default:
      return 'none'
  }
  session.close(true)
  return 'closed'
}

/** The outcome the leg counts (`audio_sessions_total{outcome}`) when the platform closes it in this state. */
export const CLOSE_OUTCOME: Record<LegState, 'abandoned' | 'ok' | 'relayed' | null> = {
  AWAIT_INIT: 'abandoned',
  VERIFYING: 'abandoned',
  REFUSING: 'abandoned',
  PLACING: 'abandoned',
  CONNECTING: 'abandoned',
  STREAMING: 'ok',
  RELAYING: 'relayed',
  CLOSED: null
}

/** A vendor result for the platform: held until CONNECTED, sent, or dropped (the leg is not the session's). */
export const ON_RESULT: Record<LegState, 'early' | 'send' | 'drop'> = {
  AWAIT_INIT: 'drop',
  VERIFYING: 'drop',
  REFUSING: 'drop',
  PLACING: 'drop',
  CONNECTING: 'early',
  STREAMING: 'send',
  RELAYING: 'send',
  CLOSED: 'drop'
}

/** The handshake timer (`audio.handshakeTimeoutSeconds`) fires: only a leg still without a checked init fails. */
export const ON_HANDSHAKE_TIMEOUT: Record<LegState, 'fail' | 'ignore'> = {
  AWAIT_INIT: 'fail',
  VERIFYING: 'fail',
  REFUSING: 'ignore',
  PLACING: 'ignore',
  CONNECTING: 'ignore',
  STREAMING: 'ignore',
  RELAYING: 'ignore',
  CLOSED: 'ignore'
}
