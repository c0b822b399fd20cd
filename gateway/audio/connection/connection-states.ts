import type { SocketFailure } from '../../upstream/ws-leg'
import type { ConnectionState, VendorFailure } from './connection-contract'
import type { ReadPhase } from './vendor-message'

// The per-state tables of a vendor connection (audio/connection/vendor-connection.ts): total, so a new state does
// not compile without a row in each.

/** How a vendor text frame is read in each state (null: not at all). */
export const READ: Record<ConnectionState, ReadPhase | null> = {
  BUILDING: null,
  CONNECTING: null,
  OPENING: 'awaiting-ready',
  READY: 'ready',
  CLOSING: 'closing',
  CLOSED: null
}

/** What the socket closing means in each state: a failure before or after readiness, or nothing new. */
export const ON_CLOSE: Record<ConnectionState, 'refused' | 'lost' | 'over'> = {
  BUILDING: 'refused',
  CONNECTING: 'refused',
  OPENING: 'refused',
  READY: 'lost',
  CLOSING: 'over',
  CLOSED: 'over'
}

/** The socket closed, as a failure: the vendor closed an open socket, or it never opened. */
export function closeFailure(
  code: number,
  reason: string,
  opened: boolean,
  socket: SocketFailure | null
): VendorFailure {
  return opened
    ? { kind: 'closed', code, reason, socket }
    : { kind: 'unreachable', socket: socket ?? { kind: 'closed-before-open' } }
}
