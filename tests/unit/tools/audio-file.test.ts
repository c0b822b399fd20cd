import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { linearToMulaw, mulawToLinear, readAudioClip } from '../../../gateway/tools/audio-file'

const FIXTURES = join(__dirname, '..', '..', 'fixtures')
const EXAMPLES = join(__dirname, '..', '..', '..', 'examples')

function chunk(id: string, body: Buffer): Buffer {
  const head = Buffer.alloc(8)
  head.write(id, 0, 'latin1')
  head.writeUInt32LE(body.length, 4)
  // RIFF chunks are word-aligned.
  return Buffer.concat([head, body, body.length & 1 ? Buffer.alloc(1) : Buffer.alloc(0)])
}

function fmt(tag: number, channels: number, rate: number, bits: number, extra?: Buffer): Buffer {
  const b = Buffer.alloc(16)
  b.writeUInt16LE(tag, 0)
  b.writeUInt16LE(channels, 2)
  b.writeUInt32LE(rate, 4)
  b.writeUInt32LE((rate * channels * bits) / 8, 8)
  b.writeUInt16LE((channels * bits) / 8, 12)
  b.writeUInt16LE(bits, 14)
  return chunk('fmt ', extra ? Buffer.concat([b, extra]) : b)
}

function riff(...chunks: Buffer[]): Buffer {
  const body = Buffer.concat([Buffer.from('WAVE', 'latin1'), ...chunks])
  const head = Buffer.alloc(8)
  head.write('RIFF', 0, 'latin1')
  head.writeUInt32LE(body.length, 4)
  return Buffer.concat([head, body])
}

function pcm16(samples: number[]): Buffer {
  const b = Buffer.alloc(samples.length * 2)
  samples.forEach((s, i) => b.writeInt16LE(s, i * 2))
  return b
}

t.test('G.711 known values', async t => {
  t.equal(linearToMulaw(0), 0xff)
  t.equal(linearToMulaw(-1), 0x7f)
  t.equal(linearToMulaw(32767), 0x80)
  t.equal(linearToMulaw(-32768), 0x00)
  t.equal(mulawToLinear(0xff), 0)
  t.equal(mulawToLinear(0x7f), 0)
  t.equal(mulawToLinear(0x80), 32124)
  t.equal(mulawToLinear(0x00), -32124)
  t.equal(linearToMulaw(1e9), 0x80, 'clamps large input')
  t.equal(linearToMulaw(Number.NaN), 0xff, 'NaN encodes as silence')
})

t.test('G.711 round trips', async t => {
  let bad = 0
  for (let b = 0; b < 256; b++) {
    const want = b === 0x7f ? 0xff : b // both zero codes decode to 0, which encodes as 0xFF
    if (linearToMulaw(mulawToLinear(b)) !== want) bad++
  }
  t.equal(bad, 0, 'encode(decode(b)) === b for every code')

  let worst = 0
  for (let x = -32635; x <= 32635; x++) {
    const err = Math.abs(mulawToLinear(linearToMulaw(x)) - x)
    // Quantisation error is at most half a step, and a step is at most (|x| + 132) / 16.
    if (err > (Math.abs(x) + 132) / 32) worst = Math.max(worst, x)
  }
  t.equal(worst, 0, 'decode(encode(x)) is within half a quantisation step')

  let monotonic = true
  for (let x = -32768; x < 32767; x++) {
    if (mulawToLinear(linearToMulaw(x + 1)) < mulawToLinear(linearToMulaw(x))) monotonic = false
  }
  t.ok(monotonic, 'quantiser is monotonic')
})

t.test('raw mu-law files are returned as they are', async t => {
  const dir = t.testdir({})
  const bytes = Buffer.from([0xff, 0x7f, 0x00, 0x80, 0x12])
  for (const ext of ['ulaw', 'mulaw', 'raw', 'ul', 'ULAW']) {
    const p = join(dir, `c.${ext}`)
    writeFileSync(p, bytes)
    t.same(readAudioClip(p), bytes, ext)
  }
})

t.test('WAV PCM16 is encoded to mu-law; unknown and odd-sized chunks are skipped', async t => {
  const dir = t.testdir({})
  const samples = [0, -1, 32767, -32768, 1000, -1000, 123, -4567]
  const wav = riff(
    fmt(1, 1, 8000, 16),
    chunk('LIST', Buffer.from('INFOISFT', 'latin1')),
    chunk('junk', Buffer.from([1, 2, 3])), // odd size: one pad byte follows
    chunk('data', pcm16(samples))
  )
  const p = join(dir, 'pcm.wav')
  writeFileSync(p, wav)
  const got = readAudioClip(p)
  t.same([...got], samples.map(linearToMulaw))
  t.same([...got.subarray(0, 4)], [0xff, 0x7f, 0x80, 0x00])
})

t.test('WAV mu-law (tag 7, 18-byte fmt, fact chunk) and extensible format', async t => {
  const dir = t.testdir({})
  const audio = Buffer.from([1, 2, 3, 4, 5])
  const fact = Buffer.alloc(4)
  fact.writeUInt32LE(audio.length)
  const p = join(dir, 'm.wav')
  writeFileSync(p, riff(fmt(7, 1, 8000, 8, Buffer.alloc(2)), chunk('fact', fact), chunk('data', audio)))
  t.same(readAudioClip(p), audio)

  const ext = Buffer.alloc(24)
  ext.writeUInt16LE(22, 0) // cbSize
  ext.writeUInt16LE(8, 2) // valid bits
  ext.writeUInt16LE(7, 8) // SubFormat GUID starts with the format tag
  const p2 = join(dir, 'ext.WAV')
  writeFileSync(p2, riff(fmt(0xfffe, 1, 8000, 8, ext), chunk('data', audio)))
  t.same(readAudioClip(p2), audio)

  const p3 = join(dir, 'noext')
  writeFileSync(p3, riff(fmt(7, 1, 8000, 8), chunk('data', audio)))
  t.same(readAudioClip(p3), audio, 'RIFF content is recognised without an extension')
})

t.test('a data chunk size larger than the file is clamped', async t => {
  const dir = t.testdir({})
  const data = chunk('data', Buffer.from([9, 8, 7, 6]))
  data.writeUInt32LE(0xffffffff, 4)
  const p = join(dir, 's.wav')
  writeFileSync(p, riff(fmt(7, 1, 8000, 8), data))
  t.same([...readAudioClip(p)], [9, 8, 7, 6])
})

t.test('the bundled clip examples/hello.ulaw and the fixture hello.wav hold the same audio', async t => {
  const raw = readAudioClip(join(EXAMPLES, 'hello.ulaw'))
  const wav = readAudioClip(join(FIXTURES, 'hello.wav'))
  t.ok(raw.length > 8000, 'more than 1 s of audio')
  t.ok(raw.length < 40000, 'under 40 KB')
  t.same(wav, raw)
})

t.test('bad inputs throw messages naming the file and the problem', async t => {
  const dir = t.testdir({})
  const audio = chunk('data', pcm16([1, 2, 3, 4]))
  const cases: [string, Buffer, RegExp][] = [
    ['rate.wav', riff(fmt(1, 1, 16000, 16), audio), /rate\.wav: WAV sample rate 16000 not supported \(need 8000\)/],
    ['stereo.wav', riff(fmt(1, 2, 8000, 16), audio), /stereo\.wav: WAV has 2 channels, not supported \(need mono\)/],
    ['float.wav', riff(fmt(3, 1, 8000, 32), audio), /float\.wav: WAV format tag 3 not supported/],
    [
      'pcm8.wav',
      riff(fmt(1, 1, 8000, 8), audio),
      /pcm8\.wav: WAV PCM with 8 bits per sample not supported \(need 16\)/
    ],
    ['ulaw16.wav', riff(fmt(7, 1, 8000, 16), audio), /ulaw16\.wav: WAV mu-law with 16 bits/],
    ['nofmt.wav', riff(audio), /nofmt\.wav: WAV has no "fmt " chunk/],
    ['nodata.wav', riff(fmt(1, 1, 8000, 16)), /nodata\.wav: WAV has no "data" chunk/],
    ['short.wav', riff(chunk('fmt ', Buffer.alloc(10)), audio), /short\.wav: WAV "fmt " chunk is too short/],
    [
      'empty-data.wav',
      riff(fmt(7, 1, 8000, 8), chunk('data', Buffer.alloc(0))),
      /empty-data\.wav: WAV data chunk is empty/
    ],
    ['text.wav', Buffer.from('hello there, not audio'), /text\.wav: not a RIFF\/WAVE file/],
    ['song.mp3', Buffer.from('ID3xxxxxxxxxxxx'), /song\.mp3: unknown audio file type "\.mp3"/],
    ['empty.ulaw', Buffer.alloc(0), /empty\.ulaw: file is empty/]
  ]
  for (const [name, body, re] of cases) {
    const p = join(dir, name)
    writeFileSync(p, body)
    t.throws(() => readAudioClip(p), re, name)
  }
  t.throws(() => readAudioClip(join(dir, 'missing.wav')), /missing\.wav: cannot read file/)
})
