import t, { type Test } from 'tap'
import { audioInit } from '../helpers/legs'
import { EventStreamCodec } from '@smithy/core/event-streams'
import { fromUtf8, toUtf8 } from '@smithy/core/serde'
import { mulawDecodeInto } from '../../gateway/audio/feed/codec'
import type { RealVendorEmulator, RealVendorOptions } from '../../gateway/tools/real-vendors'
import { platformLeg, sleep, startGateway, until, type TestGateway } from '../helpers/gateway'
import { sha256, stream } from '../helpers/audio'
import { failoverCall, withMappingCopy, realVendor } from '../helpers/vendors'

// The platform (simulated legs, real sockets) → a real gateway → the strict Amazon Transcribe emulator.
// Follows the Amazon Transcribe developer guide: "Setting up a WebSocket stream" (presigned URL, AudioEvent
// frames, the empty end frame, "Handling WebSocket streaming errors"), "Event stream encoding"; the frames
// the gateway sent are also read back with the AWS SDK's own codec (@smithy/core/event-streams). Transcribe
// publishes no AsyncAPI or JSON Schema for this socket: the SDK codec and the guide's header table are the check.

type T = Test
type Json = Record<string, any>

const KEYS = { accessKeyId: 'AKIAEMULATOR00000001', secretAccessKey: 'tr4nscr1be-s3cret/key+value' }
const sdk = new EventStreamCodec(toUtf8, fromUtf8)
const init = (contactId: number): Json => audioInit(contactId)

const emulator = async (t: T, opts: Omit<RealVendorOptions, 'kind'> = {}): Promise<RealVendorEmulator> =>
  await realVendor(t, { kind: 'amazon-transcribe', aws: KEYS, resultEveryMs: 1000, ...opts })

async function gateway(
  t: T,
  emus: RealVendorEmulator[],
  opts: { mapping?: string; keys?: typeof KEYS; audio?: Json } = {}
): Promise<TestGateway> {
  const keys = opts.keys ?? KEYS
  return await startGateway(
    t,
    {
      audio: { failoverTimeoutSeconds: 5, ...opts.audio },
      routes: {
        x: {
          mapping: opts.mapping ?? 'mappings/amazon-transcribe.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          params: { region: 'us-west-2', 'language-code': 'en-US' },
          upstreams: emus.map((e, i) => ({
            name: `v${i}`,
            audio: e.url,
            signing: { accessKeyId: '${AWS_KEY_ID}', secretAccessKey: '${AWS_SECRET}' }
          }))
        }
      }
    },
    { AWS_KEY_ID: keys.accessKeyId, AWS_SECRET: keys.secretAccessKey }
  )
}

/** The platform's µ-law as the PCM16 little-endian Transcribe gets (G.711 decode, sample for sample). */
function pcm(mulaw: Buffer): Buffer {
  const out = new Int16Array(mulaw.length)
  mulawDecodeInto(mulaw, out)
  return Buffer.from(out.buffer)
}

t.test('transcribe: a whole call, presigned, PCM16 AudioEvents, a failover in the middle, no audio lost', async t => {
  const a = await emulator(t, { recordFrames: 3 })
  const b = await emulator(t, { recordFrames: 3 })
  const gw = await gateway(t, [a, b], { audio: { replaySeconds: 1 } })
  const leg = platformLeg(t, gw.url('/audio/x'), init(9101))
  t.equal((await leg.answer).command, 'CONNECTED', 'CONNECTED once the presigned socket is open')
  const { lost, s, sent } = await failoverCall(t, leg, a, b, 2)
  t.same(lost.errors, [], 'the first session: no protocol error')
  t.same(s.errors, [], 'the replacement: no protocol error (headers, framing)')
  const all = pcm(sent)
  t.equal(lost.sha256, sha256(all.subarray(0, lost.audioBytes)), 'the first session: the call from its start, in order')
  // The replacement holds the replayed tail of what the first had, then everything after, padded to 100 ms.
  let from = -1
  for (let pad = 0; pad < 1600 && from < 0; pad += 2) {
    const start = all.length - (s.audioBytes - pad)
    if (start >= 0 && sha256(Buffer.concat([all.subarray(start), Buffer.alloc(pad)])) === s.sha256) from = start
  }
  t.ok(
    from >= 0,
    'the replacement: a contiguous tail of the call (replay + live), byte for byte, then silence to 100 ms'
  )
  t.ok(
    from > 0 && from <= lost.audioBytes,
    `no gap: the replacement starts at byte ${from}, the first had ${lost.audioBytes}`
  )
  t.notOk(
    leg.messages.some(m => m.command === 'ERROR'),
    'the platform saw no error'
  )
  t.ok(
    leg.messages.some(
      m => (m.parameters as Json).isFinal === true && (m.parameters as Json).vendor === 'amazon-transcribe'
    ),
    'final TranscriptEvents became TRANSCRIPT messages'
  )
  t.match(
    leg.messages.find(m => (m.parameters as Json).isFinal === false),
    {
      command: 'MESSAGE',
      messageType: 'TRANSCRIPT',
      message: /^emulated segment \d+$/,
      parameters: { isFinal: false, resultId: String, perspective: 'TX' }
    }
  )
  t.same(s.texts.at(-1), { event: 'AudioEvent', empty: true }, 'the call ended with the empty AudioEvent')
  t.equal(s.closeCode, 1000, 'Transcribe closed the stream itself after its last results')
  t.match(s.query, {
    'language-code': 'en-US',
    'media-encoding': 'pcm',
    'sample-rate': '8000',
    'session-id': /^[0-9a-f-]{36}$/
  })
  t.match(s.query, { 'X-Amz-Algorithm': 'AWS4-HMAC-SHA256', 'X-Amz-Expires': '300', 'X-Amz-SignedHeaders': 'host' })
  // What went on the wire, read back with the AWS SDK's codec: the guide's three headers, PCM as payload.
  for (const raw of s.rawFrames ?? []) {
    const m = sdk.decode(new Uint8Array(Buffer.from(raw, 'base64')))
    t.same(
      Object.fromEntries(Object.entries(m.headers).map(([k, v]) => [k, v.value])),
      { ':content-type': 'application/octet-stream', ':event-type': 'AudioEvent', ':message-type': 'event' },
      'an AudioEvent, as the SDK reads it'
    )
    t.equal(m.body.length, 1600, '100 ms of PCM16 at 8 kHz')
  }
  t.equal(s.rawFrames?.length, 3)
  t.notOk(gw.logs.raw.includes(KEYS.secretAccessKey), 'the secret key is never logged')
  t.notMatch(gw.logs.raw, /X-Amz-(Signature|Credential)/, 'nor the signed URL')
})

t.test(
  'transcribe: a wrong secret key is refused at the upgrade; the platform gets UPSTREAM_UNREACHABLE HTTP 403',
  async t => {
    const emu = await emulator(t)
    const gw = await gateway(t, [emu], { keys: { ...KEYS, secretAccessKey: 'not-the-key' } })
    const leg = platformLeg(t, gw.url('/audio/x'), init(9102))
    const answer = await leg.answer
    t.match(answer, { command: 'ERROR', messageType: 'UPSTREAM_UNREACHABLE', message: /HTTP 403/ })
    t.equal((await leg.closed).code, 1013)
    const s = emu.sessions()[0]
    t.match(s.errors, [/InvalidSignatureException/], 'the emulator recomputed the signature and it did not match')
    t.notOk(gw.logs.raw.includes('not-the-key'), 'the key is not logged')
  }
)

t.test(
  'transcribe: a silent hold longer than the 15 s no-audio limit: 100 ms of silence every few seconds keeps the stream',
  async t => {
    // Transcribe's 15 s limit and the mapping's 5 s tick, scaled down: 1.2 s and 0.3 s.
    await withMappingCopy(
      t,
      'amazon-transcribe',
      m => {
        m.audio.keepalive.everySeconds = 0.3
      },
      async (t, file) => {
        const emu = await emulator(t, { idleCloseMs: 1200 })
        const gw = await gateway(t, [emu], { mapping: file })
        const leg = platformLeg(t, gw.url('/audio/x'), init(9103))
        t.equal((await leg.answer).command, 'CONNECTED')
        const a = await stream(leg, 0, 25)
        await sleep(2000) // the platform leg stays open and silent, past the limit
        t.notOk(emu.sessions()[0].closed, 'Transcribe did not end the idle stream')
        const b = await stream(leg, 25, 50)
        leg.ws.close(1000)
        t.ok(await until(() => emu.sessions()[0].closed, 5000))
        const s = emu.sessions()[0]
        t.same(s.errors, [], 'no exception, no protocol error')
        t.equal(emu.sessions().length, 1, 'one stream for the whole call')
        const silence = s.audioBytes - 2 * 25 * 320
        t.ok(
          silence >= 4 * 1600 && silence % 1600 === 0,
          `silence went as whole 100 ms AudioEvents (${silence / 1600})`
        )
        const chunks = silence / 1600
        const exact = Array.from({ length: chunks + 1 }, (_, k) =>
          sha256(Buffer.concat([Buffer.alloc(k * 1600), pcm(a), Buffer.alloc((chunks - k) * 1600), pcm(b)]))
        )
        t.ok(exact.includes(s.sha256), 'the call, byte for byte, with silence only where the platform sent nothing')
      }
    )
  }
)
