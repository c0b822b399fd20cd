/** The most results held for a leg that is not there to take them (before CONNECTED, or parked). */
export const EARLY_RESULTS_MAX = 64
export const EARLY_RESULTS_MAX_CHARS = 64 * 1024

/**
 * Results a parked session's vendor sends while its platform leg is away (a lost connection, a hold): kept,
 * in order and bounded like the results that come before CONNECTED (64 messages, 64 KiB), and delivered
 * to the leg that re-attaches. A final among them has moved the leg's delivered-finals mark
 * (audio/feed/result-timeline.ts), so no later vendor session transcribes that audio again: dropping it here
 * would lose it for good. What does not fit, or is still kept when the session ends, is lost (each was counted
 * as `audio_vendor_messages_total{result="parked"}` when it came).
 */
export class ParkedResults {
  private held: { text: string; channel: number | null }[] = []
  private chars = 0

  /** Keep one, unless it does not fit (it is lost). */
  hold(text: string, channel: number | null): void {
    if (this.held.length >= EARLY_RESULTS_MAX || this.chars + text.length > EARLY_RESULTS_MAX_CHARS) return
    this.held.push({ text, channel })
    this.chars += text.length
  }

  /** Everything kept, in order, and forget it. */
  release(): { text: string; channel: number | null }[] {
    const out = this.held
    this.held = []
    this.chars = 0
    return out
  }
}
