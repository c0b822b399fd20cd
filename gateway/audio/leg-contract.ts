import type { AuthGuard } from '../auth/guard'
import type { LegLimits } from '../auth/leg-limits'
import type { Logger } from '../telemetry/log'
import type { RelayHop } from './join-relay'
import type { LegSessionDeps } from './leg-session'

// The seam between the uWS adapter (server/audio-route.ts) and a platform leg (audio/leg.ts).

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
  /** Above this many bytes queued towards the platform, reading from the vendor pauses. */
  platformHighWaterBytes: number
  /** Failure delay and per-address failure budget (auth/guard.ts; absent: refused at once, no budget). */
  guard?: AuthGuard
  /** Live legs per route and per client (absent: no limits). */
  legLimits?: LegLimits
  /** The platform's address as its socket shows it: the failure budget's key. */
  clientAddress?: string
  /** Largest init message in bytes (`limits.initMessageBytes`; absent: only uws.maxPayloadBytes). */
  initMessageBytes?: number
  /** How this leg arrived (a relay from another instance or worker: audio/join-relay.ts RELAY_HEADER). */
  relayedIn?: RelayHop
}

/**
 * Platform leg states. AWAIT_INIT: upgraded, waiting for the init message. CONNECTING: init accepted,
 * the vendor session is opening (audio is held in it). STREAMING: CONNECTED sent, audio relayed.
 * CLOSED: over (platform closed, or a failure ended it).
 */
export type LegState = 'AWAIT_INIT' | 'CONNECTING' | 'STREAMING' | 'CLOSED'

/** What a binary platform frame means in each state (a total table: a new state will not compile without a row). */
export const BINARY_IN: Record<LegState, 'session' | 'refuse' | 'count-late'> = {
  AWAIT_INIT: 'refuse',
  CONNECTING: 'session',
  STREAMING: 'session',
  CLOSED: 'count-late'
}
