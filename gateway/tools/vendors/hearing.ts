import { mulawDecodeInto } from '../../audio/feed/codec'

// `transcribeFrames` (issue 32): what a transcribing emulator heard, per channel, as the numbers of the
// platform frames it was made of. A numbered frame carries its number in a marker (4 µ-law 0x00 bytes, then
// the number, 32-bit big-endian; tests/helpers/audio.ts `numberedFrame`); each 20 ms of a channel is one
// frame heard, -1 when it carries no marker (silence the gateway filled in). Writes may cut frames anywhere
// (AssemblyAI's 50 ms chunks): the bytes of a frame are gathered across writes.

/** µ-law 8 kHz: 160 bytes (samples) a frame. */
const FRAME_BYTES = 160

/** PCM16 sample → the µ-law code it decodes from; 0 is both 0x7f and 0xff (resolved by the frame before). */
const MULAW_OF = (() => {
  const pcm = new Int16Array(256)
  mulawDecodeInto(
    Uint8Array.from({ length: 256 }, (_, i) => i),
    pcm
  )
  const m = new Map<number, number>()
  for (let b = 0; b < 256; b++) if (!m.has(pcm[b]) || b === 0xff) m.set(pcm[b], b)
  return m
})()

/** The marker of one 160-byte µ-law frame; `prev` resolves a number byte 0x7f/0xff lost in PCM (`ambiguous`). */
function marker(f: Uint8Array, ambiguous: readonly boolean[] | null, prev: number): number {
  if (f[0] !== 0 || f[1] !== 0 || f[2] !== 0 || f[3] !== 0) return -1
  const n = ((f[4] << 24) | (f[5] << 16) | (f[6] << 8) | f[7]) >>> 0
  if (ambiguous === null || !ambiguous.some(a => a)) return n
  // A PCM 0 byte may have been 0x7f: the number the one before it leads to, when it is one of the readings.
  for (let mask = 0; mask < 16; mask++) {
    let v = 0
    let ok = true
    for (let i = 0; i < 4; i++) {
      const seven = (mask >> i) & 1
      if (seven && !ambiguous[4 + i]) ok = false
      v = v * 256 + (seven ? 0x7f : f[4 + i])
    }
    if (ok && v === prev + 1) return v
  }
  return n
}

/** One channel's frames heard. */
class Ear {
  readonly heard: number[] = []
  private readonly frame = new Uint8Array(FRAME_BYTES)
  private readonly ambiguous: boolean[] = new Array<boolean>(FRAME_BYTES).fill(false)
  private used = 0
  private pcmSeen = false

  byte(code: number, ambiguous: boolean): void {
    this.frame[this.used] = code
    this.ambiguous[this.used] = ambiguous
    if (ambiguous) this.pcmSeen = true
    if (++this.used < FRAME_BYTES) return
    const prev = this.heard.length > 0 ? this.heard[this.heard.length - 1] : -1
    this.heard.push(marker(this.frame, this.pcmSeen ? this.ambiguous : null, prev))
    this.used = 0
    this.pcmSeen = false
  }
}

/** What one session heard, per channel: µ-law interleaved sample by sample, or PCM16 LE (mono). */
export class Hearing {
  private readonly ears: Ear[]
  private carry: number[] = []
  private sample = 0

  constructor(
    readonly channels = 1,
    private readonly pcm16 = false
  ) {
    this.ears = Array.from({ length: channels }, () => new Ear())
  }

  add(data: Uint8Array): void {
    if (!this.pcm16) {
      for (const b of data) this.ears[this.sample++ % this.channels].byte(b, false)
      return
    }
    const bytes = this.carry.length > 0 ? Uint8Array.from([...this.carry, ...data]) : data
    const whole = bytes.length - (bytes.length % 2)
    for (let i = 0; i < whole; i += 2) {
      const v = ((bytes[i] | (bytes[i + 1] << 8)) << 16) >> 16
      const code = MULAW_OF.get(v) ?? 0xff
      this.ears[this.sample++ % this.channels].byte(code, v === 0)
    }
    this.carry = Array.from(bytes.subarray(whole))
  }

  /**
   * The frames heard on `channel` in [startMs, endMs) of the session's audio, as words: "frames", "A-B" (the
   * first and last numbered frames in it; silence filled in between legs is not named); none: no words.
   */
  words(startMs: number, endMs: number, channel = 0): string[] {
    const seqs = this.ears[channel].heard.slice(Math.round(startMs / 20), Math.round(endMs / 20)).filter(n => n >= 0)
    return seqs.length === 0 ? [] : ['frames', `${seqs[0]}-${seqs[seqs.length - 1]}`]
  }
}
