import type { FailureWindow } from './port'

/** Most keys each map keeps: past it, ended entries are pruned, then the oldest go (an address flood stays bounded). */
const MAX_ENTRIES = 100_000

/**
 * The auth state one process keeps: revoked token ids and failure windows per client address. The
 * memory store's whole answer, and the Redis store's fallback while Redis is away. Times are the
 * caller's (`nowMs`), so tests drive them with a fake clock.
 */
export class LocalAuthState {
  private readonly revoked = new Map<string, number>()
  private readonly windows = new Map<string, { count: number; endsAt: number }>()

  revoke(jti: string, untilEpochMs: number, nowMs: number): void {
    if (untilEpochMs <= nowMs) return
    bound(this.revoked, nowMs, until => until)
    this.revoked.set(jti, Math.max(untilEpochMs, this.revoked.get(jti) ?? 0))
  }

  isRevoked(jti: string, nowMs: number): boolean {
    const until = this.revoked.get(jti)
    if (until === undefined) return false
    if (until > nowMs) return true
    this.revoked.delete(jti)
    return false
  }

  countFailure(key: string, windowMs: number, nowMs: number): FailureWindow {
    let w = this.windows.get(key)
    if (w === undefined || w.endsAt <= nowMs) {
      bound(this.windows, nowMs, v => v.endsAt)
      w = { count: 0, endsAt: nowMs + windowMs }
      this.windows.set(key, w)
    }
    w.count++
    return { count: w.count, resetInMs: w.endsAt - nowMs }
  }
}

/** Before adding to a full map: drop the entries whose time is over, then (still full) the oldest. */
function bound<V>(map: Map<string, V>, nowMs: number, endOf: (v: V) => number): void {
  if (map.size < MAX_ENTRIES) return
  for (const [k, v] of map) if (endOf(v) <= nowMs) map.delete(k)
  for (const k of map.keys()) {
    if (map.size < MAX_ENTRIES) break
    map.delete(k)
  }
}
