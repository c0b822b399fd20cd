/** Bytes of 8 kHz µ-law per millisecond of real time. */
const BYTES_PER_MS = 8

/**
 * A token bucket over audio bytes: backlog (replay, queued audio) goes to a vendor session at most
 * `rate` × real time. The bucket holds at most `burstMs` of credit, so in any window of W ms a vendor
 * sees at most rate × (W + burstMs) ms of audio; a timer tick that comes late (a busy event loop) keeps
 * the credit it earned up to that bound instead of losing the rate. No timer of its own (the relay's one timer
 * asks it), and nothing allocated per frame.
 */
export class Pacer {
  private credit = 0
  private last = 0
  private readonly bytesPerMs: number
  private readonly burst: number

  /** `rate` > 0: × real time. */
  constructor(
    readonly rate: number,
    burstMs: number
  ) {
    if (!(rate > 0)) throw new TypeError('Pacer rate must be > 0; use no pacer for unpaced audio')
    this.bytesPerMs = rate * BYTES_PER_MS
    this.burst = Math.max(160, this.bytesPerMs * burstMs)
  }

  /** A new backlog starts now with one frame of credit. */
  start(now: number): void {
    this.last = now
    this.credit = 160
  }

  /** Add the credit earned since the last call (capped at `burstMs`). */
  refill(now: number): void {
    this.credit = Math.min(this.burst, this.credit + (now - this.last) * this.bytesPerMs)
    this.last = now
  }

  /** True (and spent) when `bytes` may go now. */
  take(bytes: number): boolean {
    if (bytes > this.credit) return false
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
