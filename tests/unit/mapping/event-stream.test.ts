import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { EventStreamCodec, Int64 } from '@smithy/core/event-streams'
import { fromUtf8, toUtf8 } from '@smithy/core/serde'
import {
  decodeMessages,
  encodeHeaders,
  encodeMessage,
  EventStreamError,
  frameMessage,
  messageFromMapping,
  toMappingMessage,
  type TypedHeader
} from '../../../gateway/mapping/event-stream'

// The oracle is the AWS SDK for JavaScript v3's own event-stream codec (@smithy/core/event-streams, a pinned
// devDependency), and vectors it encoded, recorded in tests/fixtures/aws/event-stream-vectors.json. The
// format: Amazon Transcribe developer guide, "Setting up a streaming transcription" → "Event stream encoding".

type J = { type: string; value: unknown }
interface Vector {
  name: string
  headers: Record<string, J>
  body: string
  encoded: string
}

const fixture = JSON.parse(
  readFileSync(join(__dirname, '..', '..', 'fixtures', 'aws', 'event-stream-vectors.json'), 'utf8')
) as { vectors: Vector[] }
const sdk = new EventStreamCodec(toUtf8, fromUtf8)

/** The fixture's JSON header values as this codec's typed values. */
function typed(h: Record<string, J>): Record<string, TypedHeader> {
  const out: Record<string, TypedHeader> = {}
  for (const [k, v] of Object.entries(h)) {
    if (v.type === 'long') out[k] = { type: 'long', value: BigInt(v.value as string) }
    else if (v.type === 'binary') out[k] = { type: 'binary', value: Buffer.from(v.value as string, 'base64') }
    else if (v.type === 'timestamp') out[k] = { type: 'timestamp', value: new Date(v.value as string) }
    else out[k] = v as TypedHeader
  }
  return out
}

/** The same values as the SDK holds them (Int64 for longs). */
function sdkTyped(h: Record<string, TypedHeader>): any {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(h)) {
    if (v.type === 'long') {
      const b = Buffer.alloc(8)
      b.writeBigInt64BE(v.value)
      out[k] = { type: 'long', value: new Int64(new Uint8Array(b)) }
    } else if (v.type === 'binary') out[k] = { type: 'binary', value: new Uint8Array(v.value) }
    else out[k] = v
  }
  return out
}

/** An SDK-decoded header set, compared through a neutral form. */
function neutral(h: Record<string, { type: string; value: unknown }>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(h)) {
    const x = v.value
    let s: string
    if (x instanceof Int64) s = Buffer.from(x.bytes).readBigInt64BE().toString()
    else if (typeof x === 'bigint') s = x.toString()
    else if (x instanceof Date) s = x.toISOString()
    else if (x instanceof Uint8Array) s = Buffer.from(x).toString('hex')
    else s = String(x)
    out[k] = `${v.type}:${s}`
  }
  return out
}

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex')

t.test('encoding agrees with the AWS SDK codec byte for byte on the recorded vectors', async t => {
  t.ok(fixture.vectors.length >= 6)
  for (const v of fixture.vectors) {
    const body = Buffer.from(v.body, 'hex')
    const ours = encodeMessage({ headers: typed(v.headers), body })
    t.equal(ours.toString('hex'), v.encoded, `${v.name}: ours = the recorded SDK bytes`)
    const theirs = sdk.encode({ headers: sdkTyped(typed(v.headers)), body: new Uint8Array(body) })
    t.equal(hex(theirs), v.encoded, `${v.name}: the SDK still encodes it so (the vector is current)`)
  }
})

t.test('decoding agrees with the AWS SDK codec, both ways', async t => {
  for (const v of fixture.vectors) {
    const bytes = Buffer.from(v.encoded, 'hex')
    const [ours] = decodeMessages(bytes)
    const theirs = sdk.decode(new Uint8Array(bytes))
    t.same(neutral(ours.headers), neutral(theirs.headers as never), `${v.name}: the same headers`)
    t.equal(hex(ours.body), hex(theirs.body), `${v.name}: the same body`)
    t.same(neutral(ours.headers), neutral(typed(v.headers)), `${v.name}: the headers the vector was made of`)
  }
})

t.test('the audio path: headers encoded once, each chunk framed, the SDK reads every frame', async t => {
  const headers = encodeHeaders({
    ':content-type': { type: 'string', value: 'application/octet-stream' },
    ':event-type': { type: 'string', value: 'AudioEvent' },
    ':message-type': { type: 'string', value: 'event' }
  })
  for (const n of [0, 1, 1600, 3200, 65536]) {
    const payload = Buffer.alloc(n, n & 0xff)
    const frame = frameMessage(headers, payload)
    const m = sdk.decode(new Uint8Array(frame))
    t.equal(hex(m.body), hex(payload), `${n} bytes`)
    t.equal(m.headers[':event-type'].value, 'AudioEvent')
  }
})

t.test('several messages in one frame are read in order', async t => {
  const a = Buffer.from(fixture.vectors[2].encoded, 'hex')
  const b = Buffer.from(fixture.vectors[3].encoded, 'hex')
  const got = decodeMessages(Buffer.concat([a, b]))
  t.same(
    got.map(m => m.headers[':message-type'].value),
    ['event', 'exception']
  )
})

t.test('a broken frame is refused with a reason, as the SDK refuses it', async t => {
  const good = Buffer.from(fixture.vectors[2].encoded, 'hex')
  const cases: [string, Buffer, RegExp][] = [
    ['too short', good.subarray(0, 10), /shorter than/],
    ['prelude CRC', Buffer.from(good).fill(0xaa, 8, 9), /prelude CRC/],
    ['message CRC', Buffer.from(good).fill(0x00, good.length - 1), /message CRC/],
    [
      'payload flipped',
      (() => {
        const b = Buffer.from(good)
        b[40] ^= 1
        return b
      })(),
      /message CRC/
    ],
    ['truncated', good.subarray(0, good.length - 3), /does not fit|CRC/]
  ]
  for (const [name, bytes, why] of cases) {
    t.throws(() => decodeMessages(bytes), { name: 'EventStreamError', message: why }, `${name}: ours refuses`)
    t.throws(() => sdk.decode(new Uint8Array(bytes)), `${name}: the SDK refuses too`)
  }
  t.throws(() => encodeHeaders({ ['x'.repeat(256)]: { type: 'string', value: 'v' } }), EventStreamError)
  t.throws(() => encodeHeaders({ s: { type: 'string', value: 'x'.repeat(32768) } }), EventStreamError)
})

t.test('the shape mapping expressions see and write', async t => {
  const [m] = decodeMessages(Buffer.from(fixture.vectors[2].encoded, 'hex'))
  t.same(toMappingMessage(m), {
    headers: { ':content-type': 'application/json', ':event-type': 'TranscriptEvent', ':message-type': 'event' },
    body: {
      Transcript: {
        Results: [
          {
            Alternatives: [{ Items: [], Transcript: 'hello there' }],
            EndTime: 1.2,
            IsPartial: false,
            ResultId: 'r1',
            StartTime: 0.1
          }
        ]
      }
    }
  })
  const [all] = decodeMessages(Buffer.from(fixture.vectors[4].encoded, 'hex'))
  t.same(toMappingMessage(all).headers, {
    t: true,
    f: false,
    b: -7,
    s: 32000,
    i: -2000000000,
    l: '-9007199254740993',
    bin: 'AAECAwT/',
    str: 'héllo ✓',
    ts: '2026-03-01T12:34:56.789Z',
    u: '0b6b8c6e-3c1d-4c5a-9f1e-1234567890ab'
  })
  // What a mapping writes: the end frame of a Transcribe stream is byte for byte the recorded one.
  const end = messageFromMapping({
    headers: { ':content-type': 'application/octet-stream', ':event-type': 'AudioEvent', ':message-type': 'event' },
    body: null
  })
  t.equal(encodeMessage(end).toString('hex'), fixture.vectors[1].encoded)
  const typedBack = messageFromMapping({
    headers: {
      n: 5,
      big: 2 ** 40,
      l: { type: 'long', value: '-9007199254740993' },
      ts: { type: 'timestamp', value: '2026-03-01T12:34:56.789Z' },
      bin: { type: 'binary', value: 'AAECAwT/' }
    },
    bodyBase64: 'AAAA'
  })
  t.same(neutral(typedBack.headers), {
    n: 'integer:5',
    big: `long:${2 ** 40}`,
    l: 'long:-9007199254740993',
    ts: 'timestamp:2026-03-01T12:34:56.789Z',
    bin: 'binary:00010203 04ff'.replace(' ', '')
  })
  t.equal(hex(typedBack.body), '000000')
  t.same(toMappingMessage({ headers: {}, body: Buffer.from('not json') }).body, 'not json')
  for (const bad of [
    null,
    [],
    'x',
    { headers: [] },
    { headers: { a: 1.5 } },
    { headers: { a: { type: 'nope', value: 1 } } }
  ])
    t.throws(() => messageFromMapping(bad), EventStreamError, JSON.stringify(bad))
})
