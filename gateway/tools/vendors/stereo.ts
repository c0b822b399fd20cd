import { createHash } from 'node:crypto'

/** What a stereo emulator reports of one channel of a session (deinterleaved). */
export interface ChannelReport {
  /** Samples received on this channel. */
  samples: number
  /** Silence samples (µ-law 0xFF, linear16 0) before the first other sample, and after the last. */
  leadingSilence: number
  trailingSilence: number
  /** Silence samples in all. */
  silence: number
  /** Hex sha256 of the channel's bytes with the leading and trailing silence taken off. */
  sha256: string
}

/** At most this many bytes per channel are kept for the report (an emulator is a test tool). */
const KEEP_BYTES = 4 * 1024 * 1024

/**
 * A stereo stream as interleaved samples (channel 0 first): split per channel, kept (bounded), and
 * reported per channel, so a test can compare each channel with what one leg sent.
 */
export class ChannelSplit {
  private readonly bytes: Buffer[]
  private readonly used: number[]
  private carry = Buffer.alloc(0)

  constructor(
    readonly channels: number,
    readonly bytesPerSample: 1 | 2
  ) {
    this.bytes = Array.from({ length: channels }, () => Buffer.alloc(KEEP_BYTES))
    this.used = Array(channels).fill(0)
  }

  add(data: Buffer): void {
    const all = this.carry.length > 0 ? Buffer.concat([this.carry, data]) : data
    const frame = this.channels * this.bytesPerSample
    const whole = all.length - (all.length % frame)
    const bps = this.bytesPerSample
    for (let off = 0; off < whole; off += frame)
      for (let ch = 0; ch < this.channels; ch++) {
        if (this.used[ch] + bps > KEEP_BYTES) continue
        all.copy(this.bytes[ch], this.used[ch], off + ch * bps, off + (ch + 1) * bps)
        this.used[ch] += bps
      }
    this.carry = Buffer.from(all.subarray(whole))
  }

  /** The bytes of one channel so far. */
  channel(ch: number): Buffer {
    return this.bytes[ch].subarray(0, this.used[ch])
  }

  report(): ChannelReport[] {
    return this.bytes.map((_b, ch) => {
      const buf = this.channel(ch)
      const bps = this.bytesPerSample
      const n = buf.length / bps
      const silent = (i: number): boolean => (bps === 1 ? buf[i] === 0xff : buf[2 * i] === 0 && buf[2 * i + 1] === 0)
      let lead = 0
      while (lead < n && silent(lead)) lead++
      let trail = 0
      while (trail < n - lead && silent(n - 1 - trail)) trail++
      let silence = 0
      for (let i = 0; i < n; i++) if (silent(i)) silence++
      const body = buf.subarray(lead * bps, (n - trail) * bps)
      return {
        samples: n,
        leadingSilence: lead,
        trailingSilence: trail,
        silence,
        sha256: createHash('sha256').update(body).digest('hex')
      }
    })
  }
}
