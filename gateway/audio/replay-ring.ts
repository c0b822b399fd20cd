import { FrameRing } from './frame-ring'

/**
 * The last `capacity` bytes of audio written to the vendor, write by write (a platform frame, or a
 * coalesced chunk of whole frames), kept so a replacement vendor session can be given what the failed
 * one may not have processed. Preallocated: keeping a write is one copy into the ring, nothing is
 * allocated. On failover its content goes in front of the leg's queue (`FrameQueue.prependFrom`).
 */
export class ReplayRing extends FrameRing {
  constructor(capacity: number) {
    super(capacity, Math.max(64, Math.ceil(capacity / 80)))
  }

  /** Keep one write of `frames` platform frames; the oldest writes make room. */
  keep(data: Uint8Array, frames: number): void {
    const n = data.length
    if (this.capacity === 0) return
    if (n > this.capacity) {
      this.clear()
      return
    }
    while (this.bytes + n > this.capacity || this.length === this.lens.length) this.dropFront()
    this.put(data, frames)
  }
}
