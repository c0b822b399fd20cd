import t from 'tap'
import { Resampler, mulawDecodeInto } from '../../../../gateway/audio/feed/codec'
import { AudioEncoder, FrameCounters } from '../../../../gateway/audio/feed/encoder'
import { decodeMessages, encodeHeaders } from '../../../../gateway/mapping/event-stream'
import type { FramesSpec } from '../../../../gateway/mapping/audio'

/** A 20 ms µ-law frame whose bytes vary (a ramp through the code table), different per frame index. */
const frame = (k: number): Uint8Array => Uint8Array.from({ length: 160 }, (_, i) => (k * 31 + i * 7) & 0xff)

function encodeAll(spec: FramesSpec, frames: number, eventHeaders: Uint8Array | null = null): Buffer[] {
  const out: Buffer[] = []
  const enc = new AudioEncoder(
    spec,
    new FrameCounters(),
    null,
    { binary: c => out.push(Buffer.from(c)), text: () => t.fail('no text frames') },
    eventHeaders
  )
  for (let k = 0; k < frames; k++) enc.push(frame(k))
  enc.flush()
  return out
}

t.test('pcm16 at 24 kHz: three samples per platform sample, exactly the resampler on the decoded µ-law', async t => {
  const chunks = encodeAll({ framing: 'binary', encoding: 'pcm16', sampleRate: 24000, chunkMs: 100 }, 50)
  t.equal(chunks.length, 10, '1 s in 100 ms chunks')
  t.ok(
    chunks.every(c => c.length === 4800),
    '100 ms at 24 kHz, 2 bytes a sample'
  )
  // Independently: the whole second decoded and resampled at once.
  const mulaw = Buffer.concat(Array.from({ length: 50 }, (_, k) => frame(k)))
  const pcm = new Int16Array(mulaw.length)
  mulawDecodeInto(mulaw, pcm)
  const r = new Resampler(8000, 24000)
  const up = new Int16Array(r.maxOutput(pcm.length))
  const n = r.process(pcm, pcm.length, up)
  t.equal(n, 24000)
  t.ok(Buffer.concat(chunks).equals(Buffer.from(up.buffer, 0, n * 2)), 'sample for sample (little-endian)')
})

t.test('event-stream framing: one message per chunk, the headers given, the payload the chunk', async t => {
  const headers = encodeHeaders({
    ':content-type': { type: 'string', value: 'application/octet-stream' },
    ':event-type': { type: 'string', value: 'AudioEvent' },
    ':message-type': { type: 'string', value: 'event' }
  })
  const spec: FramesSpec = { framing: 'event-stream', encoding: 'pcm16', sampleRate: 8000, chunkMs: 100 }
  const framed = encodeAll(spec, 23, headers)
  const plain = encodeAll({ ...spec, framing: 'binary' }, 23)
  t.equal(framed.length, 5, '460 ms: four 100 ms chunks and the last one padded')
  for (const [i, f] of framed.entries()) {
    const [m] = decodeMessages(f)
    t.equal(m.headers[':event-type'].value, 'AudioEvent')
    t.ok(Buffer.from(m.body).equals(plain[i]), `chunk ${i}: the same 1600 bytes as unframed`)
  }
})
