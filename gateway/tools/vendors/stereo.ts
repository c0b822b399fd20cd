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
  /** Hex sha256 of the channel's non-silence samples only (filler anywhere taken off). */
  voicedSha256: string
}

/** At most this many bytes per channel are kept for the report (an emulator is a test tool). */
const KEEP_BYTES = 4 * 1024 * 1024

/** A byte store that grows by doubling, up to KEEP_BYTES. */
class Bytes {
  buf = Buffer.alloc(4096)
  used = 0
  put(src: Buffer, from: number, n: number): void {
    if (this.used + n > KEEP_BYTES) return
    if (this.used + n > this.buf.length) {
      const bigger = Buffer.alloc(Math.min(KEEP_BYTES, this.buf.length * 2))
      this.buf.copy(bigger, 0, 0, this.used)
      this.buf = bigger
    }
    src.copy(this.buf, this.used, from, from + n)
    this.used += n
  }
}

class Channel {
  readonly all = new Bytes()
  readonly voiced = new Bytes()
  samples = 0
  silence = 0
  firstVoiced = -1
  lastVoiced = -1
}

/**
 * A stereo stream as interleaved samples (channel 0 first): split per channel, kept (bounded), and
 * reported per channel, so a test can compare each channel with what one leg sent.
 */
export class ChannelSplit {
  private readonly chans: Channel[]
  private carry = Buffer.alloc(0)

  constructor(
    readonly channels: number,
    readonly bytesPerSample: 1 | 2
  ) {
    this.chans = Array.from({ length: channels }, () => new Channel())
  }

  add(data: Buffer): void {
    const all = this.carry.length > 0 ? Buffer.concat([this.carry, data]) : data
    const bps = this.bytesPerSample
    const frame = this.channels * bps
    const whole = all.length - (all.length % frame)
    for (let off = 0; off < whole; off += frame)
      for (let ch = 0; ch < this.channels; ch++) {
        const at = off + ch * bps
        const c = this.chans[ch]
        const silent = bps === 1 ? all[at] === 0xff : all[at] === 0 && all[at + 1] === 0
        c.all.put(all, at, bps)
        if (silent) c.silence++
        else {
          c.voiced.put(all, at, bps)
          if (c.firstVoiced < 0) c.firstVoiced = c.samples
          c.lastVoiced = c.samples
        }
        c.samples++
      }
    this.carry = Buffer.from(all.subarray(whole))
  }

  report(): ChannelReport[] {
    const bps = this.bytesPerSample
    return this.chans.map(c => {
      const lead = c.firstVoiced < 0 ? c.samples : c.firstVoiced
      const trail = c.firstVoiced < 0 ? 0 : c.samples - 1 - c.lastVoiced
      const body = c.firstVoiced < 0 ? Buffer.alloc(0) : c.all.buf.subarray(lead * bps, (c.lastVoiced + 1) * bps)
      return {
        samples: c.samples,
        leadingSilence: lead,
        trailingSilence: trail,
        silence: c.silence,
        sha256: createHash('sha256').update(body).digest('hex'),
        voicedSha256: createHash('sha256').update(c.voiced.buf.subarray(0, c.voiced.used)).digest('hex')
      }
    })
  }
}
