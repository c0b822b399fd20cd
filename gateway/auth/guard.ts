import type { Clock } from '../clock'
import type { AuthSettings } from '../config/types'
import type { Store } from '../store/port'

/** Most addresses held as blocked at once on this instance (a flood of addresses stays bounded). */
const MAX_BLOCKED = 100_000

/**
 * Abuse resistance of authentication (issue 11 item 4), for both hooks:
 * - a failed authentication is answered no sooner than `auth.failureDelayMs`, on a clock timer (the
 *   event loop and every other leg keep going meanwhile);
 * - each failure counts against the client address's budget in the store (`auth.failureBudget`: at most
 *   `failures` in a fixed window of `windowSeconds`, shared by the fleet with Redis). Once an address has
 *   spent it, this instance refuses the address before any credential check until the window ends:
 *   text 429 with `retry-after`, audio ERROR TOO_MANY_FAILURES and 1008.
 *
 * An instance learns that the fleet's budget is spent from its own next failure of that address (the
 * store's count is the fleet's); so past the budget at most one more attempt per instance reaches a
 * credential check in a window, and it is counted and delayed like any other.
 */
export class AuthGuard {
  /** Address → clock time its block ends. */
  private readonly blocked = new Map<string, number>()

  constructor(
    private readonly settings: () => AuthSettings,
    private readonly store: Pick<Store, 'countFailure'>,
    private readonly clock: Clock
  ) {}

  /** Seconds until `address` may try again (its budget is spent), or 0: go ahead. Synchronous. */
  retryAfterSeconds(address: string): number {
    if (this.blocked.size === 0) return 0
    const until = this.blocked.get(address)
    if (until === undefined) return 0
    const left = until - this.clock.now()
    if (left > 0) return Math.max(1, Math.ceil(left / 1000))
    this.blocked.delete(address)
    return 0
  }

  /**
   * A failed authentication from `address`: counted against its budget, and `answer` (the refusal) is
   * called no sooner than `auth.failureDelayMs` from now (at once when that is 0).
   */
  failed(address: string, answer: () => void): void {
    const { failureDelayMs, failureBudget } = this.settings()
    if (failureBudget.failures > 0 && address !== '') {
      const windowMs = failureBudget.windowSeconds * 1000
      this.store.countFailure(address, windowMs, this.clock.now()).then(
        w => {
          if (w.count >= failureBudget.failures) this.block(address, w.resetInMs)
        },
        () => {} // the store counts its own errors; the refusal goes out regardless
      )
    }
    if (failureDelayMs <= 0) answer()
    else this.clock.setTimeout(answer, failureDelayMs)
  }

  private block(address: string, forMs: number): void {
    const now = this.clock.now()
    if (this.blocked.size >= MAX_BLOCKED) {
      for (const [a, until] of this.blocked) if (until <= now) this.blocked.delete(a)
      for (const a of this.blocked.keys()) {
        if (this.blocked.size < MAX_BLOCKED) break
        this.blocked.delete(a)
      }
    }
    this.blocked.set(address, Math.max(this.blocked.get(address) ?? 0, now + forMs))
  }
}
