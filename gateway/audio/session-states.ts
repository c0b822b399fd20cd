import type { SessionState } from './session-contract'

// The per-state tables of the vendor session state machine (audio/session.ts): total, so a new state
// does not compile without a row in each.

/** What a failed current connection leads to in each state. */
export const AFTER_FAILURE: Record<SessionState, 'walk-or-end' | 'recover' | 'walk-or-wait' | 'ignore'> = {
  OPENING: 'walk-or-end',
  READY: 'recover',
  RESUMING: 'recover',
  RECOVERING: 'walk-or-wait',
  CLOSED: 'ignore'
}

/**
 * Whether audio flows to a ready vendor connection in each state: then an owner (a leg attaching later,
 * too) is told ready at once, and a close can say goodbye (queued audio, the close frame, the handshake).
 */
export const FLOWING: Record<SessionState, boolean> = {
  OPENING: false,
  READY: true,
  RESUMING: true,
  RECOVERING: false,
  CLOSED: false
}

/** Whether the vendor session outlives its platform leg in each state (kept for a re-attach). */
export const KEEPS: Record<SessionState, boolean> = {
  OPENING: false,
  READY: true,
  RESUMING: true,
  RECOVERING: true,
  CLOSED: false
}
