/**
 * Vendor results that come before CONNECTED (a vendor may answer before it says ready) are kept for it,
 * in order, up to this many messages and this many characters; later ones are dropped and counted as
 * `audio_vendor_messages_total{result="dropped_before_connected"}`. The platform never sees MESSAGE first.
 */
import { EARLY_RESULTS_MAX, EARLY_RESULTS_MAX_CHARS, KeptResults } from '../session/kept-results'

export { EARLY_RESULTS_MAX, EARLY_RESULTS_MAX_CHARS }

/** Vendor results kept for a leg until its CONNECTED goes out, bounded; what does not fit is reported. */
export class EarlyResults {
  private readonly kept = new KeptResults()
  private reported = false

  /** `dropped(n, first)`: n results will never go out; `first` the first time this leg drops any. */
  constructor(private readonly dropped: (n: number, first: boolean) => void) {}

  get size(): number {
    return this.kept.size
  }

  keep(text: string): void {
    if (!this.kept.keep(text)) this.report(1)
  }

  /** CONNECTED is out: the kept results, in order, to send now. */
  release(): string[] {
    return this.kept.release().map(r => r.text)
  }

  /** The leg ended before CONNECTED: what was kept is counted as dropped. */
  drop(): void {
    const n = this.kept.release().length
    if (n > 0) this.report(n)
  }

  private report(n: number): void {
    const first = !this.reported
    this.reported = true
    this.dropped(n, first)
  }
}
