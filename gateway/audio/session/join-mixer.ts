/** One tick of the join clock: 20 ms of 8 kHz µ-law, 160 samples per channel. */
export const JOIN_TICK_MS = 20
export const TICK_SAMPLES = 160
/** µ-law silence (decodes to PCM16 0). */
export const MULAW_SILENCE = 0xff

/**
 * One side of a joined contact: the platform µ-law bytes that came since the last ticks, in a
 * preallocated ring. Over capacity the oldest bytes go first (counted in `dropped`).
 */
export class ChannelQueue {
  readonly ring: Uint8Array
  start = 0
  size = 0
  /** Bytes dropped because the side ran ahead of the clock by more than the ring holds. */
  dropped = 0

  constructor(readonly capacity: number) {
    this.ring = new Uint8Array(capacity)
  }

  /** Per-frame path: a copy into the ring, no allocation. */
  push(src: Uint8Array): void {
    const n = src.length
    const cap = this.capacity
    let from = 0
    if (n > cap) {
      this.dropped += n - cap
      from = n - cap
    }
    const over = this.size + (n - from) - cap
    if (over > 0) {
      this.start = (this.start + over) % cap
      this.size -= over
      this.dropped += over
    }
    const pos = (this.start + this.size) % cap
    const ring = this.ring
    if (from === 0 && pos + n <= cap) ring.set(src, pos)
    else {
      // Wrapping (or over capacity): byte by byte, still no allocation.
      let at = pos
      for (let i = from; i < n; i++) {
        ring[at] = src[i]
        at = at + 1 === cap ? 0 : at + 1
      }
    }
    this.size += n - from
  }

  /** The next byte; the caller checks `size` first. */
  shift(): number {
    const b = this.ring[this.start]
    this.start = this.start + 1 === this.capacity ? 0 : this.start + 1
    this.size--
    return b
  }

  clear(): void {
    this.start = 0
    this.size = 0
  }
}

/**
 * The stereo mixer of one joined contact: each tick takes up to 160 samples of each side (what came
 * since, in arrival order) and interleaves them sample by sample into one preallocated 20 ms stereo
 * frame, channel 0 first. A side with fewer samples is filled with µ-law silence, counted per channel
 * in `filled`. Nothing here allocates after construction.
 */
export class StereoMixer {
  readonly sides: readonly [ChannelQueue, ChannelQueue]
  /** The 20 ms stereo frame, rewritten every tick (its buffer is exactly the frame). */
  readonly frame = new Uint8Array(TICK_SAMPLES * 2)
  /** Silence samples filled in, per channel. */
  readonly filled = [0, 0]
  /** Ticks mixed. */
  ticks = 0

  constructor(capacityBytes: number) {
    this.sides = [new ChannelQueue(capacityBytes), new ChannelQueue(capacityBytes)]
  }

  /** Per-frame path: platform audio of `channel` (0 or 1). */
  push(channel: number, data: Uint8Array): void {
    this.sides[channel].push(data)
  }

  /** One tick: the next 20 ms stereo frame. */
  mix(): Uint8Array {
    const out = this.frame
    for (let ch = 0; ch < 2; ch++) {
      const q = this.sides[ch]
      const have = Math.min(q.size, TICK_SAMPLES)
      const ring = q.ring
      const cap = q.capacity
      let at = q.start
      let i = 0
      for (; i < have; i++) {
        out[2 * i + ch] = ring[at]
        at = at + 1 === cap ? 0 : at + 1
      }
      q.start = at
      q.size -= have
      for (; i < TICK_SAMPLES; i++) out[2 * i + ch] = MULAW_SILENCE
      this.filled[ch] += TICK_SAMPLES - have
    }
    this.ticks++
    return out
  }

  /** Samples waiting on either side. */
  get pending(): number {
    return this.sides[0].size + this.sides[1].size
  }

  get dropped(): number {
    return this.sides[0].dropped + this.sides[1].dropped
  }
}
