/**
 * Vendor results that come before CONNECTED (a vendor may answer before it says ready) are held for it,
 * in order, up to this many messages and this many characters; later ones are dropped and counted as
 * `audio_vendor_messages_total{result="dropped_before_connected"}`. The platform never sees MESSAGE first.
 */
export const EARLY_RESULTS_MAX = 64
export const EARLY_RESULTS_MAX_CHARS = 64 * 1024

/** Vendor results held for a leg until its CONNECTED goes out, bounded; what does not fit is reported. */
export class EarlyResults {
  private held: string[] = []
  private chars = 0
  private reported = false

  /** `dropped(n, first)`: n results will never go out; `first` the first time this leg drops any. */
  constructor(private readonly dropped: (n: number, first: boolean) => void) {}

  get size(): number {
    return this.held.length
  }

  hold(text: string): void {
    if (this.held.length < EARLY_RESULTS_MAX && this.chars + text.length <= EARLY_RESULTS_MAX_CHARS) {
      this.held.push(text)
      this.chars += text.length
      return
    }
    this.report(1)
  }

  /** CONNECTED is out: the held results, in order, to send now. */
  release(): string[] {
    const out = this.held
    this.held = []
    this.chars = 0
    return out
  }

  /** The leg ended before CONNECTED: what was held is counted as dropped. */
  drop(): void {
    if (this.held.length > 0) this.report(this.held.length)
    this.release()
  }

  private report(n: number): void {
    const first = !this.reported
    this.reported = true
    this.dropped(n, first)
  }
}
