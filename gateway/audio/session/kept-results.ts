/** The most results kept for a leg that is not there to take them (before CONNECTED, or parked). */
export const EARLY_RESULTS_MAX = 64
export const EARLY_RESULTS_MAX_CHARS = 64 * 1024

/** One vendor result for the platform, with its channel on a joined (stereo) session (null: every leg). */
export interface KeptResult {
  readonly text: string
  readonly channel: number | null
}

/**
 * Vendor results kept, in order, for a leg that cannot take them yet, bounded at 64 messages and 64 KiB:
 * - before its CONNECTED goes out (a vendor may answer before it says ready: audio/leg/early-results.ts);
 * - while its session is parked (a lost platform connection): the leg that re-attaches gets them. A final
 *   among them has moved the leg's delivered-finals mark (audio/feed/result-timeline.ts), so no later vendor
 *   session transcribes that audio again: dropping it here would lose it for good.
 * What does not fit is not kept, and the keeper says so (`keep` answers false).
 */
export class KeptResults {
  private kept: KeptResult[] = []
  private chars = 0

  get size(): number {
    return this.kept.length
  }

  /** Keep one; false when it does not fit (it is not kept). */
  keep(text: string, channel: number | null = null): boolean {
    if (this.kept.length >= EARLY_RESULTS_MAX || this.chars + text.length > EARLY_RESULTS_MAX_CHARS) return false
    this.kept.push({ text, channel })
    this.chars += text.length
    return true
  }

  /** Everything kept, in order, and forget it. */
  release(): KeptResult[] {
    const out = this.kept
    this.kept = []
    this.chars = 0
    return out
  }
}
