import type { Clock } from '../clock'
import type { AuthSettings } from '../config/types'
import type { FailureWindow } from '../store/port'

/** Most addresses one budget keeps at once: past it, ended windows are swept, then the oldest go. */
const MAX_ADDRESSES = 100_000

/**
 * The budget's answer on a credential check that ran: `true`, answer as checked (the caller is in, or hears
 * why its credential was refused); a number, the address has spent its budget: refuse with
 * TOO_MANY_FAILURES, retry after that many seconds, whatever the check found.
 */
export type BudgetVerdict = true | number

interface Window {
  /** Failed checks counted in this window (this gateway's count). */
  failures: number
  /** Clock ms when the window ends (the count starts again from 0). */
  endsAt: number
  /** Clock ms until which the fleet's count (the store's) keeps the address out. */
  fleetSpentUntil: number
  /** Failures whose fleet count is still on its way back. */
  pending: number
  /** Verdicts on successful checks waiting for those counts (see `admit`). */
  waiting: (() => void)[]
}

/**
 * `auth.failureBudget` of one gateway (all its workers): at most `failures` failed credential checks per
 * client address in a fixed window of `windowSeconds`. It counts failures, and nothing else: checks run
 * as they arrive, however many at once, and each is judged after it ran (`admit`). A valid credential is
 * refused only when its address has already spent the budget; a check in flight never takes room.
 *
 * - A failure is counted, then answered as a failure while the count stays within the budget; past it, the
 *   address is out (TOO_MANY_FAILURES) until the window ends. So an address hears "wrong credential" at
 *   most `failures` times per window, however its attempts interleave.
 * - A success is admitted unless the address is out. An address that is out gets TOO_MANY_FAILURES for
 *   every check, right or wrong: the answer tells a guesser nothing.
 *
 * With a fleet (a store other instances share), each failure also goes to the fleet's count, and the
 * fleet's count decides its answer: past the budget there, the address is out of this gateway too until
 * the fleet's window ends. A success waits for this gateway's failures of its address still on their way
 * to that count, so a burst of guesses cannot slip a right one in before the count comes back.
 *
 * With `serve --workers N` this object lives in the main process, and the workers ask it over IPC
 * (workers/admission-client.ts): one answer per check, counted once for every worker.
 */
export class FailureBudget {
  private readonly windows = new Map<string, Window>()

  constructor(
    private readonly settings: () => AuthSettings,
    private readonly clock: Clock,
    /** The fleet's count (the store's `countFailure`); absent: this gateway's count alone. */
    private readonly fleetCount?: (address: string, windowMs: number, nowMs: number) => Promise<FailureWindow>
  ) {}

  /**
   * A credential check from `address` ran; `failed`: its credential was refused. The verdict is
   * synchronous unless a failure's answer waits for the fleet's count (or a success waits for such a failure).
   */
  admit(address: string, failed: boolean): BudgetVerdict | Promise<BudgetVerdict> {
    const { failures, windowSeconds } = this.settings().failureBudget
    if (failures <= 0 || address === '') return true
    const windowMs = windowSeconds * 1000
    const w = this.window(address, windowMs)
    const out = this.outFor(w, failures)
    if (out > 0) return out
    if (!failed) {
      if (w.pending === 0) return true
      return new Promise(resolve => w.waiting.push(() => resolve(this.admit(address, false))))
    }
    w.failures++
    if (this.fleetCount === undefined) return true
    w.pending++
    return this.fleetCount(address, windowMs, this.clock.now()).then(
      fleet => {
        if (fleet.count > failures) w.fleetSpentUntil = Math.max(w.fleetSpentUntil, this.clock.now() + fleet.resetInMs)
        return this.counted(w, fleet.count > failures ? Math.max(1, this.outFor(w, failures)) : true)
      },
      // The store counts its own errors; this gateway's count still holds.
      () => this.counted(w, true)
    )
  }

  /** Seconds until `address` may be checked again, or 0 when it has not spent its budget (tests, metrics). */
  outSeconds(address: string): number {
    const { failures } = this.settings().failureBudget
    const w = this.windows.get(address)
    return failures <= 0 || w === undefined ? 0 : this.outFor(w, failures)
  }

  /** Addresses with a window open now (tests, the memory bound). */
  get tracked(): number {
    return this.windows.size
  }

  /** Seconds until the address is back in, or 0 while it has room in the budget. */
  private outFor(w: Window, failures: number): number {
    const now = this.clock.now()
    const until = Math.max(w.failures >= failures ? w.endsAt : 0, w.fleetSpentUntil)
    return until > now ? Math.max(1, Math.ceil((until - now) / 1000)) : 0
  }

  /** A failure's fleet count came back: successes that waited for it are judged now. */
  private counted(w: Window, verdict: BudgetVerdict): BudgetVerdict {
    w.pending--
    if (w.pending === 0 && w.waiting.length > 0) for (const wake of w.waiting.splice(0)) wake()
    return verdict
  }

  private window(address: string, windowMs: number): Window {
    const now = this.clock.now()
    let w = this.windows.get(address)
    if (w !== undefined && w.endsAt <= now && w.pending === 0 && w.fleetSpentUntil <= now) {
      this.windows.delete(address)
      w = undefined
    }
    if (w === undefined) {
      if (this.windows.size >= MAX_ADDRESSES) this.sweep(now)
      w = { failures: 0, endsAt: now + windowMs, fleetSpentUntil: 0, pending: 0, waiting: [] }
      this.windows.set(address, w)
    } else if (w.endsAt <= now) {
      // A new window for an address whose fleet counts are still on their way: the count starts again.
      w.failures = 0
      w.endsAt = now + windowMs
    }
    return w
  }

  private sweep(now: number): void {
    for (const [a, w] of this.windows)
      if (w.endsAt <= now && w.fleetSpentUntil <= now && w.pending === 0) this.windows.delete(a)
    for (const [a, w] of this.windows) {
      if (this.windows.size < MAX_ADDRESSES) break
      if (w.pending === 0) this.windows.delete(a)
    }
  }
}

/**
 * A refusal of a failed authentication, answered no sooner than `auth.failureDelayMs` from now, on the
 * clock (nothing waits meanwhile; at once when the delay is 0).
 */
export function afterFailureDelay(settings: AuthSettings, clock: Clock, answer: () => void): void {
  if (settings.failureDelayMs <= 0) answer()
  else clock.setTimeout(answer, settings.failureDelayMs)
}
