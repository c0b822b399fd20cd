// The per-state tables of a joined contact (audio/session/join.ts Join): total, so a new state does not
// compile without a row in each.

/**
 * A joined contact's states.
 * - GATHERING: its legs arrive; none has started yet and the vendor session is not open.
 * - WAITING: one leg started; its partner is waited for `join.waitSeconds`.
 * - OPEN: the vendor session was started (both legs came, or the wait ran out).
 * - OVER: the vendor session closed; every channel ended. A new leg of the call makes a new join.
 */
export type JoinState = 'GATHERING' | 'WAITING' | 'OPEN' | 'OVER'

/** A leg of the call arrives: it takes its channel here (late, counted, once the session is open), or a new join is made. */
export const ON_NEW_LEG: Record<JoinState, 'partner' | 'late-partner' | 'new-join'> = {
  GATHERING: 'partner',
  WAITING: 'partner',
  OPEN: 'late-partner',
  OVER: 'new-join'
}

/**
 * A leg starts: the vendor session opens when both legs are here (else the wait begins), opens now if the
 * partner came during the wait (the first wait stands otherwise), the leg is told ready if audio flows, or nothing.
 */
export const ON_LEG_START: Record<JoinState, 'open-or-wait' | 'open-if-paired' | 'tell-ready' | 'ignore'> = {
  GATHERING: 'open-or-wait',
  WAITING: 'open-if-paired',
  OPEN: 'tell-ready',
  OVER: 'ignore'
}

/** Whether the vendor session may be started (by both legs, or the wait running out) in each state. */
export const OPENS: Record<JoinState, boolean> = {
  GATHERING: true,
  WAITING: true,
  OPEN: false,
  OVER: false
}

/** Whether audio the legs sent and no tick took yet still goes to the feed (before a park or a close). */
export const DRAINS: Record<JoinState, boolean> = {
  GATHERING: true,
  WAITING: true,
  OPEN: true,
  OVER: false
}

/**
 * The contact's 20 ms clock: idle (no audio pending, nobody sending), or running since `t0` (clock ms) with
 * `emitted` stereo frames sent to the feed since. The first audio starts it; it stops when nothing is left.
 */
export type MixClock = { readonly state: 'IDLE' } | { readonly state: 'RUNNING'; readonly t0: number; emitted: number }

export const MIX_IDLE: MixClock = { state: 'IDLE' }
