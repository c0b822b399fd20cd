import { FrameRing } from './frame-ring'

/** The first storage a ring takes when it is first written (it doubles from there up to its capacity). */
const FIRST_BYTES = 4096
const FIRST_ENTRIES = 16

/**
 * The last `capacity` bytes of audio written to the vendor, write by write (a platform frame, or a
 * coalesced chunk of whole frames), kept so a replacement vendor session can be given what the failed
 * one may not have processed. Keeping a write is one copy into the ring. Its storage is taken as it
 * fills: nothing until the first write, then doubling up to `capacity` bytes (a few times in a leg's
 * life, not per frame), and its entry table grows the same way, so a leg that is connected but not
 * streaming, or writes coalesced chunks (a few dozen entries, not one per 80 bytes), holds only what it
 * uses. On failover its content goes in front of the leg's queue (`FrameQueue.prependFrom`).
 */
export class ReplayRing extends FrameRing {
  private readonly maxBytes: number
  /** Room for writes as small as 80 bytes (a 10 ms µ-law frame) over the whole capacity. */
  private readonly maxEntries: number

  constructor(capacity: number) {
    super(0, 0)
    this.maxBytes = capacity
    this.maxEntries = Math.max(64, Math.ceil(capacity / 80))
  }

  /** Bytes it keeps at most (its storage may be smaller until it has filled). */
  override get capacity(): number {
    return this.maxBytes
  }

  /** Keep one write of `frames` platform frames; the oldest writes make room once it has its full size. */
  keep(data: Uint8Array, frames: number): void {
    const n = data.length
    if (this.maxBytes === 0) return
    if (n > this.maxBytes) {
      this.clear()
      return
    }
    if (
      (this.bytes + n > this.buf.length && this.buf.length < this.maxBytes) ||
      (this.length === this.lens.length && this.lens.length < this.maxEntries)
    )
      this.grow(this.bytes + n, this.length + 1)
    while (this.bytes + n > this.buf.length || this.length === this.lens.length) this.dropFront()
    this.put(data, frames)
  }

  /** Larger storage (doubling, at most the capacity), the content copied in oldest first. */
  private grow(bytes: number, entries: number): void {
    let cap = Math.max(FIRST_BYTES, this.buf.length)
    while (cap < bytes) cap *= 2
    cap = Math.min(cap, this.maxBytes)
    let slots = Math.max(FIRST_ENTRIES, this.lens.length)
    while (slots < entries) slots *= 2
    slots = Math.min(slots, this.maxEntries)
    if (cap === this.buf.length && slots === this.lens.length) return
    const buf = Buffer.allocUnsafeSlow(cap)
    const lens = new Uint32Array(slots)
    const counts = new Uint32Array(slots)
    this.copyOut(buf, 0, lens, counts, 0)
    this.buf = buf
    this.lens = lens
    this.counts = counts
    this.start = 0
    this.head = 0
  }
}
