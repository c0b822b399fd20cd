/** Bytes of 8 kHz µ-law per millisecond of real time. */
const BYTES_PER_MS = 8

/**
 * A token bucket over audio bytes: backlog (replay, queued audio) goes to a vendor session at most
 * `rate` × real time. The bucket holds at most `burstMs` of credit, so in any window of W ms a vendor
 * sees at most rate × (W + burstMs) ms of audio; a timer tick that comes late (a busy event loop) keeps
 * the credit it earned up to that bound instead of losing the rate. No timer of its own (the feed's one timer
 * asks it), and nothing allocated per frame.
 */
export class Pacer {
  private credit = 0
  private last = 0
  private readonly bytesPerMs: number
  private readonly burst: number
  private readonly first: number

  /**
   * `rate` > 0: × real time. `chunkBytes`: the feed's write (coalesced chunk; 0: a platform frame):
   * a backlog starts with one write of credit and the bucket holds at least one.
   */
  constructor(
    readonly rate: number,
    burstMs: number,
    chunkBytes = 0
  ) {
    if (!(rate > 0)) throw new TypeError('Pacer rate must be > 0; use no pacer for unpaced audio')
    this.bytesPerMs = rate * BYTES_PER_MS
    this.first = Math.max(160, chunkBytes)
    this.burst = Math.max(this.first, this.bytesPerMs * burstMs)
  }

  /** A new backlog starts now with one write of credit. */
  start(now: number): void {
    this.last = now
    this.credit = this.first
  }

  /** Add the credit earned since the last call (capped at `burstMs`). */
  refill(now: number): void {
    this.credit = Math.min(this.burst, this.credit + (now - this.last) * this.bytesPerMs)
    this.last = now
  }

  /**
   * True (and spent) when `bytes` may go now. A write larger than the bucket goes once the bucket is
   * full, and the credit goes below zero: the rate holds over the writes that follow.
   */
  take(bytes: number): boolean {
    if (bytes > this.credit && this.credit < this.burst) return false
    this.credit -= bytes
    return true
  }
}

/**
 * The rate a session's backlog goes at: the mapping's limit lowers the gateway's; 0 (unpaced) stays
 * unpaced unless the mapping sets one.
 */
export function effectiveReplayRate(gateway: number, mapping: number | null): number {
  if (mapping === null) return gateway
  return gateway === 0 ? mapping : Math.min(gateway, mapping)
}
