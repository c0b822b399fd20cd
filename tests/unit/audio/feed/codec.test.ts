import t, { type Test } from 'tap'
import { Rechunker, Resampler, mulawDecodeInto, pcm16ToBytesLE } from '../../../../gateway/audio/feed/codec'

/** G.711 mu-law decode written out from the standard, independent of the module's table. */
function referenceMulaw(byte: number): number {
  const b = ~byte & 0xff // invert all bits
  const sign = b & 0x80
  const exponent = (b >> 4) & 7
  const mantissa = b & 15
  const magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
  return sign ? -magnitude : magnitude
}

function tone(freq: number, rate: number, n: number, amp: number): Int16Array {
  const out = new Int16Array(n)
  for (let i = 0; i < n; i++) out[i] = Math.round(amp * Math.sin((2 * Math.PI * freq * i) / rate))
  return out
}

function rms(x: ArrayLike<number>, from: number, to: number): number {
  let s = 0
  for (let i = from; i < to; i++) s += x[i] * x[i]
  return Math.sqrt(s / (to - from))
}

/** Goertzel power at `freq` over x[from, from+n). */
function goertzel(x: ArrayLike<number>, from: number, n: number, freq: number, rate: number): number {
  const coeff = 2 * Math.cos((2 * Math.PI * freq) / rate)
  let s1 = 0
  let s2 = 0
  for (let i = 0; i < n; i++) {
    const s0 = x[from + i] + coeff * s1 - s2
    s2 = s1
    s1 = s0
  }
  return s1 * s1 + s2 * s2 - coeff * s1 * s2
}

/** Frequency from rising zero crossings (linearly interpolated) over x[from, to). */
function zeroCrossingFreq(x: ArrayLike<number>, from: number, to: number, rate: number): number {
  let first = -1
  let last = -1
  let count = 0
  for (let i = from + 1; i < to; i++) {
    if (x[i - 1] < 0 && x[i] >= 0) {
      const at = i - 1 + -x[i - 1] / (x[i] - x[i - 1])
      if (first < 0) first = at
      else count++
      last = at
    }
  }
  return (count * rate) / (last - first)
}

const db = (ratio: number): number => 10 * Math.log10(ratio)

function resampleWhole(r: Resampler, input: Int16Array): Int16Array {
  const out = new Int16Array(r.maxOutput(input.length))
  const n = r.process(input, input.length, out)
  return out.subarray(0, n)
}

function resampleInPieces(r: Resampler, input: Int16Array, piece: number): Int16Array {
  const all = new Int16Array(r.maxOutput(input.length) + 8)
  const frame = new Int16Array(piece)
  const out = new Int16Array(r.maxOutput(piece))
  let total = 0
  for (let at = 0; at < input.length; at += piece) {
    const len = Math.min(piece, input.length - at)
    frame.set(input.subarray(at, at + len))
    const n = r.process(frame, len, out)
    all.set(out.subarray(0, n), total)
    total += n
  }
  return all.subarray(0, total)
}

t.test('mu-law decoding is exact for all 256 codes against the G.711 formula', async t => {
  const golden = new Uint8Array(256)
  for (let i = 0; i < 256; i++) golden[i] = i
  const pcm = new Int16Array(256)
  t.equal(mulawDecodeInto(golden, pcm), 256, 'writes one sample per byte')
  let mismatches = 0
  for (let b = 0; b < 256; b++) if (pcm[b] !== referenceMulaw(b)) mismatches++
  t.equal(mismatches, 0, 'every code decodes to the formula value')
  t.equal(pcm[0x00], -32124, 'full-scale negative')
  t.equal(pcm[0x80], 32124, 'full-scale positive')
  t.equal(pcm[0xff], 0, '0xFF is silence')
  t.equal(pcm[0x7f], 0, '0x7F is (negative) zero')
})

t.test('mu-law decoding writes at an offset and refuses a short buffer', async t => {
  const dst = new Int16Array(6).fill(7)
  t.equal(mulawDecodeInto(Uint8Array.of(0x80, 0x00), dst, 3), 2)
  t.same(Array.from(dst), [7, 7, 7, 32124, -32124, 7])
  t.throws(() => mulawDecodeInto(new Uint8Array(4), dst, 3), RangeError)
})

t.test('PCM16 is written little-endian', async t => {
  const src = Int16Array.of(0x1234, -2, 32767, -32768)
  const dst = new Uint8Array(10)
  t.equal(pcm16ToBytesLE(src, 4, dst, 2), 8)
  t.same(Array.from(dst), [0, 0, 0x34, 0x12, 0xfe, 0xff, 0xff, 0x7f, 0x00, 0x80])
  t.same(Buffer.from(dst.buffer, 2, 8).equals(Buffer.from(src.buffer)), true, 'matches the platform LE layout')
  t.throws(() => pcm16ToBytesLE(src, 4, dst, 3), RangeError)
})

/**
 * A 1 s 1 kHz tone at 8 kHz resampled to `rate` (`up` output samples per input sample, said as `many`): its
 * length, and on 0.5 s of steady state from `from` (past the start transient: filter delay plus margin, and
 * before the tail) its frequency within 1 % and its level within ±0.5 dB. The output and that stretch's length.
 */
function upsampledTone(t: Test, rate: number, up: number, many: string, from: number): { out: Int16Array; n: number } {
  const input = tone(1000, 8000, 8000, 12000) // 1 s
  const r = new Resampler(8000, rate)
  t.equal(r.up, up)
  t.equal(r.down, 1)
  const out = resampleWhole(r, input)
  t.equal(out.length, rate, `${many} output samples per input sample`)
  const n = rate / 2 // 0.5 s: exactly 500 cycles of 1 kHz
  const freq = zeroCrossingFreq(out, from, from + n, rate)
  t.ok(Math.abs(freq - 1000) / 1000 < 0.01, `zero-crossing frequency ${freq.toFixed(2)} Hz within 1% of 1000 Hz`)
  const levelIn = rms(input, 128, 128 + 4000)
  const gainDb = 20 * Math.log10(rms(out, from, from + n) / levelIn)
  t.ok(Math.abs(gainDb) < 0.5, `level change ${gainDb.toFixed(3)} dB within ±0.5 dB`)
  return { out, n }
}

t.test('8 kHz → 16 kHz keeps a 1 kHz tone: frequency, level, and no 7 kHz image', async t => {
  const from = 256
  const { out, n } = upsampledTone(t, 16000, 2, 'two', from) // 3500 cycles of 7 kHz in the stretch
  const p1k = goertzel(out, from, n, 1000, 16000)
  for (const f of [900, 1100]) {
    t.ok(db(p1k / goertzel(out, from, n, f, 16000)) > 30, `1 kHz dominates ${f} Hz`)
  }
  const imageDb = db(goertzel(out, from, n, 7000, 16000) / p1k)
  t.ok(imageDb < -40, `7 kHz image at ${imageDb.toFixed(1)} dB relative to 1 kHz (< -40 dB)`)
})

t.test('8 kHz → 24 kHz (OpenAI Realtime pcm16) keeps a 1 kHz tone: frequency, level, no 7 or 9 kHz image', async t => {
  const from = 384
  const { out, n } = upsampledTone(t, 24000, 3, 'three', from)
  const p1k = goertzel(out, from, n, 1000, 24000)
  // The images of 1 kHz around 8 kHz and 16 kHz: 7, 9, 15 and 17 kHz.
  for (const f of [7000, 9000, 15000, 17000]) {
    const imageDb = db(goertzel(out, from, n, f, 24000) / p1k)
    t.ok(imageDb < -40, `${f / 1000} kHz image at ${imageDb.toFixed(1)} dB relative to 1 kHz (< -40 dB)`)
  }
})

t.test('16 kHz → 8 kHz keeps a 1 kHz tone and rejects a 5 kHz tone', async t => {
  const r = new Resampler(16000, 8000)
  const pass = resampleWhole(r, tone(1000, 16000, 16000, 12000))
  t.equal(pass.length, 8000)
  const gainDb = 20 * Math.log10(rms(pass, 200, 4200) / (12000 / Math.SQRT2))
  t.ok(Math.abs(gainDb) < 0.5, `1 kHz level change ${gainDb.toFixed(3)} dB`)
  t.ok(Math.abs(zeroCrossingFreq(pass, 200, 4200, 8000) - 1000) < 10, '1 kHz stays 1 kHz')
  r.reset()
  const stop = resampleWhole(r, tone(5000, 16000, 16000, 12000))
  const aliasDb = 20 * Math.log10(Math.max(rms(stop, 200, 4200), 1e-9) / (12000 / Math.SQRT2))
  t.ok(aliasDb < -40, `5 kHz (would alias to 3 kHz) attenuated to ${aliasDb.toFixed(1)} dB`)
})

t.test('chunk boundaries do not matter: 160-sample pieces equal one piece', async t => {
  // A non-trivial signal: two tones plus a deterministic pseudo-random component.
  const n = 8000 * 3 + 37
  const input = new Int16Array(n)
  let seed = 12345
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    const noise = (seed / 0x7fffffff - 0.5) * 4000
    input[i] = Math.round(
      8000 * Math.sin((2 * Math.PI * 440 * i) / 8000) + 3000 * Math.sin((2 * Math.PI * 3100 * i) / 8000) + noise
    )
  }
  for (const [inRate, outRate] of [
    [8000, 16000],
    [16000, 8000],
    [8000, 24000]
  ] as const) {
    const whole = resampleWhole(new Resampler(inRate, outRate), input)
    for (const piece of [160, 1, 7, 333]) {
      const pieces = resampleInPieces(new Resampler(inRate, outRate), input, piece)
      t.equal(pieces.length, whole.length, `${inRate}→${outRate}, ${piece}-sample pieces: same length`)
      t.ok(
        Buffer.from(pieces.buffer, pieces.byteOffset, pieces.byteLength).equals(
          Buffer.from(whole.buffer, whole.byteOffset, whole.byteLength)
        ),
        `${inRate}→${outRate}, ${piece}-sample pieces: identical samples`
      )
    }
  }
})

t.test('resampler guards its arguments', async t => {
  const r = new Resampler(8000, 16000)
  t.throws(() => r.process(new Int16Array(160), 160, new Int16Array(319)), RangeError, 'out too small')
  t.throws(() => r.process(new Int16Array(10), 11, new Int16Array(100)), RangeError, 'inLen past input')
  t.throws(() => new Resampler(8000, 0), TypeError)
  t.throws(() => new Resampler(8000, 16000, { tapsPerPhase: 2 }), TypeError)
  t.equal(r.process(new Int16Array(0), 0, new Int16Array(0)), 0, 'empty input is fine')
})

t.test('rechunker emits exact chunks in order and flush emits the remainder', async t => {
  const chunks: number[][] = []
  const seen = new Set<Uint8Array>()
  const rc = new Rechunker({
    chunkMs: 100,
    sampleRate: 8000,
    bytesPerSample: 1,
    onChunk: buf => {
      seen.add(buf)
      chunks.push(Array.from(buf)) // copy: the buffer is reused
    }
  })
  t.equal(rc.chunkBytes, 800, '100 ms of 8 kHz mu-law')
  const stream: number[] = []
  let v = 0
  // 20 ms platform frames (160 B), plus a few odd sizes.
  const sizes = [160, 160, 160, 160, 160, 160, 1, 799, 1700, 37, 160]
  for (const size of sizes) {
    const frame = new Uint8Array(size)
    for (let i = 0; i < size; i++) {
      frame[i] = v & 0xff
      stream.push(v & 0xff)
      v++
    }
    rc.push(frame)
  }
  const total = sizes.reduce((a, b) => a + b, 0)
  t.equal(chunks.length, Math.floor(total / 800), 'one callback per full chunk')
  t.ok(
    chunks.every(c => c.length === 800),
    'every chunk is exactly 800 bytes'
  )
  t.equal(seen.size, 1, 'one reused buffer')
  t.equal(rc.pending, total % 800)
  t.equal(rc.flush(), total % 800, 'flush returns the remainder length')
  t.equal(chunks[chunks.length - 1].length, total % 800, 'flush emits the remainder')
  t.same(chunks.flat(), stream, 'bytes come out in order, none lost or repeated')
  t.equal(rc.flush(), 0, 'nothing left to flush')

  const padded: number[][] = []
  const rc2 = new Rechunker({ chunkBytes: 4, onChunk: b => padded.push(Array.from(b)) })
  rc2.push(Uint8Array.of(1, 2, 3, 4, 5))
  rc2.flush(0xff)
  t.same(
    padded,
    [
      [1, 2, 3, 4],
      [5, 0xff, 0xff, 0xff]
    ],
    'flush can pad with mu-law silence'
  )
  t.throws(() => new Rechunker({ chunkMs: 0.1, sampleRate: 8000, bytesPerSample: 2, onChunk: () => {} }), TypeError)
})
