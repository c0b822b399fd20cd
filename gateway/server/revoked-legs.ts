import type { ServerState } from './state'

/** End this process's live legs opened with token `jti` (ERROR TOKEN_REVOKED, 1008); how many. */
export function endLegsOf(state: ServerState, jti: string): number {
  let n = 0
  for (const leg of [...state.legs]) {
    if (leg.tokenJti !== jti || leg.state === 'CLOSED') continue
    leg.shutdown('TOKEN_REVOKED')
    n++
  }
  if (n > 0) state.log.info({ event: 'revoked_legs_ended', jti, legs: n }, 'live legs of a revoked token ended')
  return n
}

/**
 * Revocation reaches live legs fleet-wide: `POST /admin/tokens/revoke` ends the legs of that token on the
 * instance (every worker) it is sent to at once, and every other instance finds them here: every
 * `store.syncIntervalSeconds` it asks the store about each distinct token id its live legs were opened
 * with. Returns the stop function.
 */
export function sweepRevokedLegs(state: ServerState, nowMs: () => number = Date.now): () => void {
  let running = false
  const timer = setInterval(
    () => {
      if (running || !state.store.shared) return
      const jtis = new Set<string>()
      for (const leg of state.legs) if (leg.tokenJti !== undefined && leg.state !== 'CLOSED') jtis.add(leg.tokenJti)
      if (jtis.size === 0) return
      running = true
      Promise.all(
        [...jtis].map(async jti => {
          if (await state.store.isTokenRevoked(jti, nowMs())) endLegsOf(state, jti)
        })
      ).then(
        () => {
          running = false
        },
        () => {
          running = false
        }
      )
    },
    Math.max(100, state.config.store.syncIntervalSeconds * 1000)
  )
  timer.unref()
  return () => clearInterval(timer)
}
