import type { Clock } from '../clock'
import type { AuthSettings } from '../config/types'
import type { FailureWindow } from '../store/port'

/** Most addresses one budget keeps at once: past it, ended windows are swept, then the oldest go. */
const MAX_ADDRESSES = 100_000

interface Window {
  /** Failed checks counted in this window. */
  failures: number
  /** Checks begun and not yet settled. */
  inFlight: number
  /** Clock ms when the window ends (the count starts again from 0). */
  endsAt: number
  /** Clock ms until which the fleet's count (the store's) keeps the address out. */
  fleetBlockedUntil: number
}

/**
 * `auth.failureBudget` of one gateway (all its workers): at most `failures` failed credential checks per
 * client address in a fixed window of `windowSeconds`. Exact under concurrency: a check is begun before
 * it runs (`begin`) and settled once it has (`settle`), and a check may begin only while the failures so
 * far plus the checks still running stay under the budget. So a burst of 300 wrong credentials at once
 * runs 20 checks, not as many as arrive before the first failure is counted.
 *
 * With `serve --workers N` this object lives in the main process and the workers ask it over IPC
 * (workers/admission-client.ts); each failure also goes to the fleet's count in the store, and a count
 * past the budget there keeps the address out of this gateway too until the store's window ends.
 */
export class FailureBudget {
  private readonly windows = new Map<string, Window>()

  constructor(
    private readonly settings: () => AuthSettings,
    private readonly clock: Clock,
    /** The fleet's count (the store's `countFailure`); absent: this gateway's count alone. */
    private readonly fleetCount?: (address: string, windowMs: number, nowMs: number) => Promise<FailureWindow>
  ) {}

  /** A credential check from `address` may run (true; settle it later), or seconds until it may. */
  begin(address: string): true | number {
    const { failures, windowSeconds } = this.settings().failureBudget
    if (failures <= 0 || address === '') return true
    const w = this.window(address, windowSeconds * 1000)
    const now = this.clock.now()
    if (w.fleetBlockedUntil > now) return Math.max(1, Math.ceil((w.fleetBlockedUntil - now) / 1000))
    if (w.failures + w.inFlight >= failures) return Math.max(1, Math.ceil((w.endsAt - now) / 1000))
    w.inFlight++
    return true
  }

  /** A begun check ended: `failed` counts against the address's budget (here and in the fleet's count). */
  settle(address: string, failed: boolean): void {
    const { failures, windowSeconds } = this.settings().failureBudget
    if (failures <= 0 || address === '') return
    const w = this.windows.get(address)
    if (w !== undefined && w.inFlight > 0) w.inFlight--
    if (!failed) return
    const windowMs = windowSeconds * 1000
    this.window(address, windowMs).failures++
    this.fleetCount?.(address, windowMs, this.clock.now()).then(
      fleet => {
        if (fleet.count < failures) return
        const mine = this.window(address, windowMs)
        mine.fleetBlockedUntil = Math.max(mine.fleetBlockedUntil, this.clock.now() + fleet.resetInMs)
      },
      () => {} // the store counts its own errors; this gateway's count still holds
    )
  }

  /** Addresses with a window open now (tests, the memory bound). */
  get tracked(): number {
    return this.windows.size
  }

  private window(address: string, windowMs: number): Window {
    const now = this.clock.now()
    let w = this.windows.get(address)
    if (w !== undefined && w.endsAt <= now && w.inFlight === 0 && w.fleetBlockedUntil <= now) {
      this.windows.delete(address)
      w = undefined
    }
    if (w === undefined) {
      if (this.windows.size >= MAX_ADDRESSES) this.sweep(now)
      w = { failures: 0, inFlight: 0, endsAt: now + windowMs, fleetBlockedUntil: 0 }
      this.windows.set(address, w)
    } else if (w.endsAt <= now) {
      // A new window for an address whose checks are still running: the count starts again, the running stay.
      w.failures = 0
      w.endsAt = now + windowMs
    }
    return w
  }

  private sweep(now: number): void {
    for (const [a, w] of this.windows) if (w.endsAt <= now && w.fleetBlockedUntil <= now) this.windows.delete(a)
    for (const a of this.windows.keys()) {
      if (this.windows.size < MAX_ADDRESSES) break
      this.windows.delete(a)
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
