/**
 * Audio conversions for the per-frame path: G.711 mu-law decode, PCM16 resampling, PCM16 → bytes,
 * and re-chunking of byte streams into fixed-duration vendor chunks.
 *
 * Hot-path rules (MUST): nothing here allocates per call after construction. Callers pass output
 * buffers; sizes are checked up front and a too-small buffer is a bug (RangeError), never a silent
 * truncation.
 */

// ---------------------------------------------------------------------------------------------
// G.711 mu-law → PCM16
// ---------------------------------------------------------------------------------------------

/** G.711 mu-law bias (ITU-T G.711, Sun g711.c). */
const MULAW_BIAS = 0x84

/** 256-entry decode table, built once at module load from the G.711 formula. */
const MULAW_TABLE: Int16Array = (() => {
  const table = new Int16Array(256)
  for (let b = 0; b < 256; b++) {
    const u = ~b & 0xff
    const exponent = (u >> 4) & 0x07
    const magnitude = (((u & 0x0f) << 3) + MULAW_BIAS) << exponent
    table[b] = u & 0x80 ? MULAW_BIAS - magnitude : magnitude - MULAW_BIAS
  }
  return table
})()

/**
 * Decodes G.711 mu-law bytes into signed 16-bit PCM, writing `src.length` samples to `dst` from
 * `dstOffset`. Returns the number of samples written.
 */
export function mulawDecodeInto(src: Uint8Array, dst: Int16Array, dstOffset = 0): number {
  const n = src.length
  if (dstOffset < 0 || dstOffset + n > dst.length) {
    throw new RangeError(`mulawDecodeInto: dst has room for ${dst.length - dstOffset} samples, need ${n}`)
  }
  const table = MULAW_TABLE
  for (let i = 0; i < n; i++) dst[dstOffset + i] = table[src[i]]
  return n
}

// ---------------------------------------------------------------------------------------------
// PCM16 → little-endian bytes
// ---------------------------------------------------------------------------------------------

/**
 * Writes the first `n` samples of `src` as 16-bit little-endian bytes into `dst` at `offset`.
 * Returns the number of bytes written (2 × n).
 */
export function pcm16ToBytesLE(src: Int16Array, n: number, dst: Uint8Array, offset: number): number {
  if (n < 0 || n > src.length) throw new RangeError(`pcm16ToBytesLE: n=${n} outside 0..${src.length}`)
  const bytes = n * 2
  if (offset < 0 || offset + bytes > dst.length) {
    throw new RangeError(`pcm16ToBytesLE: dst has room for ${dst.length - offset} bytes, need ${bytes}`)
  }
  let o = offset
  for (let i = 0; i < n; i++) {
    const v = src[i]
    dst[o++] = v & 0xff
    dst[o++] = (v >> 8) & 0xff
  }
  return bytes
}

// ---------------------------------------------------------------------------------------------
// Resampler: windowed-sinc polyphase FIR
// ---------------------------------------------------------------------------------------------

export interface ResamplerOptions {
  /** FIR taps per polyphase branch: a multiple of 4 in 4..256. Default 32 (64-tap prototype for 2:1). */
  tapsPerPhase?: number
  /** Kaiser window beta. Default 8.6 (about 86 dB stop-band attenuation). */
  kaiserBeta?: number
  /** Cut-off as a fraction of the lower Nyquist frequency. Default 0.95 (3.8 kHz for 8↔16 kHz). */
  rolloff?: number
}

function gcd(a: number, b: number): number {
  while (b !== 0) [a, b] = [b, a % b]
  return a
}

/** Zeroth-order modified Bessel function of the first kind (power series). */
function besselI0(x: number): number {
  let sum = 1
  let term = 1
  const q = (x * x) / 4
  for (let k = 1; k < 64; k++) {
    term *= q / (k * k)
    sum += term
    if (term < sum * 1e-17) break
  }
  return sum
}

/**
 * Rational-ratio sample-rate converter for mono PCM16 (e.g. 8000 → 16000 and 16000 → 8000 Hz).
 *
 * A Kaiser-windowed sinc low-pass prototype, designed at `inRate × up`, is split into `up`
 * polyphase branches; each output sample is one branch's dot product with the newest input
 * samples. Input history is kept across calls, so splitting a stream into frames changes nothing:
 * the output of many small `process` calls equals that of one large call, sample for sample.
 *
 * The filter delays the signal by `delay` output samples (half the prototype length); the first
 * outputs are the filter's start-up transient.
 */
export class Resampler {
  readonly inRate: number
  readonly outRate: number
  /** Interpolation factor L. */
  readonly up: number
  /** Decimation factor M. */
  readonly down: number
  /** Taps per polyphase branch (K). */
  readonly taps: number
  /** Group delay, in output samples. */
  readonly delay: number
  /** Branch coefficients, each reversed so the dot product runs oldest → newest: [phase][K]. */
  private readonly coef: Float64Array[]
  /** Input history, written twice (at w and w+K) so every window is contiguous. */
  private readonly hist: Float64Array
  /** Write index of the newest sample, 0..K-1. */
  private w = 0
  /** Polyphase branch of the next output. */
  private phase = 0
  /** Input samples still to be pushed before the next output is due. */
  private advance = 1

  constructor(inRate: number, outRate: number, opts: ResamplerOptions = {}) {
    if (!Number.isInteger(inRate) || inRate <= 0 || !Number.isInteger(outRate) || outRate <= 0) {
      throw new TypeError(`Resampler: rates must be positive integers (got ${inRate} → ${outRate})`)
    }
    const g = gcd(inRate, outRate)
    const up = outRate / g
    const down = inRate / g
    if (up > 64 || down > 64) {
      throw new TypeError(
        `Resampler: ratio ${outRate}/${inRate} reduces to ${up}/${down}; use rates with a small ratio (both terms ≤ 64)`
      )
    }
    const taps = opts.tapsPerPhase ?? 32
    // Multiple of 4: the dot product is unrolled by four (four accumulators; ~1.7x faster).
    if (!Number.isInteger(taps) || taps < 4 || taps > 256 || taps % 4 !== 0) {
      throw new TypeError(`Resampler: tapsPerPhase must be a multiple of 4 in 4..256 (got ${taps})`)
    }
    const beta = opts.kaiserBeta ?? 8.6
    const rolloff = opts.rolloff ?? 0.95
    if (!(rolloff > 0 && rolloff <= 1)) throw new TypeError(`Resampler: rolloff must be in (0, 1] (got ${rolloff})`)

    this.inRate = inRate
    this.outRate = outRate
    this.up = up
    this.down = down
    // Branch length grows with the decimation factor so the transition band stays the same
    // width relative to the lower of the two rates.
    const k = taps * Math.max(1, Math.ceil(down / up))
    this.taps = k
    const n = k * up
    this.delay = (n - 1) / 2 / down

    // Prototype low-pass at inRate*up, cut-off = rolloff × (lower Nyquist).
    const fc = (rolloff * Math.min(inRate, outRate)) / 2 / (inRate * up) // cycles per prototype sample
    const proto = new Float64Array(n)
    const mid = (n - 1) / 2
    const i0b = besselI0(beta)
    for (let i = 0; i < n; i++) {
      const t = i - mid
      const x = 2 * fc * t
      const sinc = t === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x)
      const r = (2 * i) / (n - 1) - 1
      const win = besselI0(beta * Math.sqrt(Math.max(0, 1 - r * r))) / i0b
      proto[i] = 2 * fc * sinc * win
    }
    // Split into branches; normalise each to unit DC gain (overall gain `up`, which an
    // interpolator needs to keep the level), then reverse for the forward dot product.
    this.coef = []
    for (let p = 0; p < up; p++) {
      let sum = 0
      for (let j = 0; j < k; j++) sum += proto[j * up + p]
      const branch = new Float64Array(k)
      for (let j = 0; j < k; j++) branch[k - 1 - j] = proto[j * up + p] / sum
      this.coef.push(branch)
    }
    this.hist = new Float64Array(2 * k)
  }

  /** Most output samples one `process` call can produce for `inLen` input samples. */
  maxOutput(inLen: number): number {
    return Math.ceil((inLen * this.up) / this.down)
  }

  /** Forgets the input history (a new, unrelated stream). */
  reset(): void {
    this.hist.fill(0)
    this.w = 0
    this.phase = 0
    this.advance = 1
  }

  /**
   * Converts the first `inLen` samples of `input`, writing to `out` from index 0. Returns the
   * number of samples written. `out` MUST hold at least `maxOutput(inLen)` samples.
   */
  process(input: Int16Array, inLen: number, out: Int16Array): number {
    if (inLen < 0 || inLen > input.length)
      throw new RangeError(`Resampler.process: inLen=${inLen} outside 0..${input.length}`)
    const need = this.maxOutput(inLen)
    if (out.length < need) throw new RangeError(`Resampler.process: out holds ${out.length} samples, need ${need}`)
    const k = this.taps
    const up = this.up
    const down = this.down
    const coef = this.coef
    const hist = this.hist
    let w = this.w
    let phase = this.phase
    let advance = this.advance
    let o = 0
    for (let i = 0; i < inLen; i++) {
      w = w + 1 === k ? 0 : w + 1
      const s = input[i]
      hist[w] = s
      hist[w + k] = s
      if (--advance > 0) continue
      while (advance === 0) {
        // Window = hist[w+1 .. w+k], oldest → newest; branch coefficients are stored reversed.
        const c = coef[phase]
        const h = w + 1
        let a0 = 0
        let a1 = 0
        let a2 = 0
        let a3 = 0
        for (let j = 0; j < k; j += 4) {
          a0 += c[j] * hist[h + j]
          a1 += c[j + 1] * hist[h + j + 1]
          a2 += c[j + 2] * hist[h + j + 2]
          a3 += c[j + 3] * hist[h + j + 3]
        }
        const acc = a0 + a1 + (a2 + a3)
        const v = Math.round(acc)
        out[o++] = v > 32767 ? 32767 : Math.max(v, -32768)
        phase += down
        advance = (phase / up) | 0
        phase -= advance * up
      }
    }
    this.w = w
    this.phase = phase
    this.advance = advance
    return o
  }
}

// ---------------------------------------------------------------------------------------------
// Rechunker
// ---------------------------------------------------------------------------------------------

export type RechunkerOptions = { onChunk: (buf: Uint8Array) => void } & (
  | { chunkBytes: number }
  | { chunkMs: number; sampleRate: number; bytesPerSample: number }
)

/**
 * Accumulates a byte stream and emits fixed-size chunks (e.g. 20 ms platform frames → 100 ms
 * vendor chunks), synchronously from `push`.
 *
 * MUST: `onChunk` consumes or copies `buf` before it returns, and MUST NOT call `push`/`flush`
 * on the same Rechunker. `buf` is one internal buffer, reused for every chunk and overwritten by
 * the next `push`. A `ws` client socket's `send` copies (it masks into a new frame buffer), as
 * does uWS `send`; anything that keeps the reference (`socket.write`, `ws` `send` on an unmasked
 * server-side socket, a queue) needs `buf.slice()` first.
 */
export class Rechunker {
  /** Chunk size in bytes. */
  readonly chunkBytes: number
  private readonly buf: Uint8Array
  private fill = 0
  private readonly onChunk: (buf: Uint8Array) => void

  constructor(opts: RechunkerOptions) {
    let size: number
    if ('chunkBytes' in opts) {
      size = opts.chunkBytes
    } else {
      size = (opts.chunkMs * opts.sampleRate * opts.bytesPerSample) / 1000
      if (!Number.isInteger(size) || size % opts.bytesPerSample !== 0) {
        throw new TypeError(`Rechunker: ${opts.chunkMs} ms at ${opts.sampleRate} Hz is not a whole number of samples`)
      }
    }
    if (!Number.isInteger(size) || size <= 0)
      throw new TypeError(`Rechunker: chunk size must be a positive integer (got ${size})`)
    if (typeof opts.onChunk !== 'function') throw new TypeError('Rechunker: onChunk callback required')
    this.chunkBytes = size
    this.buf = new Uint8Array(size)
    this.onChunk = opts.onChunk
  }

  /** Bytes held, waiting for a full chunk. */
  get pending(): number {
    return this.fill
  }

  /** Appends `data`; calls `onChunk` once per completed chunk, in order, before returning. */
  push(data: Uint8Array): void {
    const size = this.chunkBytes
    const buf = this.buf
    const n = data.length
    let i = 0
    let fill = this.fill
    while (i < n) {
      // Byte loop rather than set(subarray): no view object per call.
      const end = Math.min(n, i + size - fill)
      while (i < end) buf[fill++] = data[i++]
      if (fill === size) {
        fill = 0
        this.fill = 0
        this.onChunk(buf)
      }
    }
    this.fill = fill
  }

  /**
   * Emits the held remainder, if any, and returns its length. With `padByte` the remainder is
   * padded to a full chunk with that value (mu-law silence is 0xFF, PCM16 silence is 0x00).
   * Allocates one view; not for the per-frame path.
   */
  flush(padByte?: number): number {
    const n = this.fill
    if (n === 0) return 0
    this.fill = 0
    if (padByte === undefined) {
      this.onChunk(this.buf.subarray(0, n))
    } else {
      this.buf.fill(padByte & 0xff, n)
      this.onChunk(this.buf)
    }
    return n
  }

  /** Hands over the held remainder (a copy) and forgets it; null when nothing is held. */
  take(): Uint8Array | null {
    if (this.fill === 0) return null
    const out = this.buf.slice(0, this.fill)
    this.fill = 0
    return out
  }

  /** Drops the held remainder. */
  reset(): void {
    this.fill = 0
  }
}
