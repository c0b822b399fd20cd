import type { VendorFailure } from '../connection/connection-contract'
import type { SessionState } from './session-contract'

// The per-state tables of the vendor session state machine (audio/session/session.ts): total, so a new state
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
 * What a failure of the current connection leads to: the state's AFTER_FAILURE row, refined by the
 * failure. `final`: the judgement says every replica would answer the same (audio/session/failover.ts `judge`).
 */
export function afterFailure(
  state: SessionState,
  failure: VendorFailure,
  final: boolean,
  hasNext: boolean
): 'end' | 'end-leg' | 'walk' | 'recover' | 'ignore' {
  // A control rule ended the session on the vendor's word and wants the leg to end with it.
  if (failure.kind === 'ended' && failure.then === 'leg') return 'end-leg'
  if (final) return 'end'
  switch (AFTER_FAILURE[state]) {
    case 'walk-or-end':
      // Unreachable or never ready (charged to the replica): the next replica. Any other answer is the vendor's.
      return failure.kind === 'unreachable' || (failure.kind === 'not-ready' && hasNext) ? 'walk' : 'end'
    case 'walk-or-wait':
      return 'walk'
    case 'recover':
      return 'recover'
    case 'ignore':
      return 'ignore'
  }
}

/**
 * Whether audio flows to a ready vendor connection in each state: then an attached leg (one attaching later
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
