import t, { type Test } from 'tap'
import { audioInit } from '../helpers/legs'
import type { RealVendorEmulator, RealVendorOptions } from '../../gateway/tools/real-vendors'
import { platformLeg, startGateway, until, type TestGateway } from '../helpers/gateway'
import { sha256, stream } from '../helpers/audio'
import { failoverCall, withMappingCopy, everyMessageMatched, realVendor, legUntilClosed } from '../helpers/vendors'
import { vendorSchemas } from '../helpers/vendor-schemas'

// The platform (simulated legs, real sockets) → a real gateway → the strict Speechmatics emulator. Follows the
// Speechmatics Realtime API reference (protocol overview, handshake responses, "Websocket errors") and its
// AsyncAPI file spec/realtime.yaml 2.0.0 (vendored, MIT): every frame the gateway sent is validated against
// its schema there (StartRecognition, EndOfStream; AddAudio is binary).

type T = Test
type Json = Record<string, any>

const KEY = 'sm-key-0123456789abcdef'
const schemas = vendorSchemas('speechmatics-realtime.yaml')
const init = (contactId: number): Json => audioInit(contactId)

const emulator = async (t: T, opts: Omit<RealVendorOptions, 'kind'> = {}): Promise<RealVendorEmulator> =>
  await realVendor(t, { kind: 'speechmatics', apiKey: KEY, resultEveryMs: 1000, ...opts })

async function gateway(
  t: T,
  emus: RealVendorEmulator[],
  opts: { mapping?: string; key?: string; audio?: Json; params?: Json } = {}
): Promise<TestGateway> {
  return await startGateway(
    t,
    {
      audio: { failoverTimeoutSeconds: 5, ...opts.audio },
      routes: {
        x: {
          mapping: opts.mapping ?? 'mappings/speechmatics.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          params: opts.params ?? { language: 'en', max_delay: 1.5, end_of_utterance_silence_trigger: 0.5 },
          upstreams: emus.map((e, i) => ({ name: `v${i}`, audio: e.url, credential: '${VENDOR_KEY}' }))
        }
      }
    },
    { VENDOR_KEY: opts.key ?? KEY }
  )
}

/** Every text frame the gateway sent, against the vendor's own schema of that message. */
function validAgainstAsyncApi(t: T, texts: unknown[]): void {
  t.ok(texts.length >= 2, 'StartRecognition and EndOfStream at least')
  for (const m of texts as Json[]) t.same(schemas.check(m.message, m), [], `${m.message} matches the AsyncAPI schema`)
}

t.test(
  'speechmatics: a whole call, µ-law byte for byte, AddTranscript → TRANSCRIPT, a failover in the middle, no audio lost',
  async t => {
    const a = await emulator(t)
    const b = await emulator(t)
    const gw = await gateway(t, [a, b], { audio: { replaySeconds: 1 } })
    const leg = platformLeg(t, gw.url('/audio/x'), init(9301))
    t.match(await leg.answer, { command: 'CONNECTED', parameters: { vendorSessionId: /^[0-9a-f-]{36}$/ } })
    const { lost, s, sent } = await failoverCall(t, leg, a, b)
    t.same(lost.errors, [])
    t.same(s.errors, [], 'no protocol error (StartRecognition, audio after RecognitionStarted, last_seq_no)')
    t.equal(lost.sha256, sha256(sent.subarray(0, lost.audioBytes)), 'the first session: the call from its start')
    const from = sent.length - s.audioBytes
    t.ok(
      from > 0 && from <= lost.audioBytes,
      `no gap: the replacement starts at byte ${from}, the first had ${lost.audioBytes}`
    )
    t.equal(s.sha256, sha256(sent.subarray(from)), 'the replacement: the replayed tail and the rest, byte for byte')
    t.match(s.texts[0], {
      message: 'StartRecognition',
      audio_format: { type: 'raw', encoding: 'mulaw', sample_rate: 8000 },
      transcription_config: {
        language: 'en',
        enable_partials: true,
        max_delay: 1.5,
        conversation_config: { end_of_utterance_silence_trigger: 0.5 }
      }
    })
    t.same(s.texts.at(-1), { message: 'EndOfStream', last_seq_no: s.frames }, 'EndOfStream names the last AddAudio')
    validAgainstAsyncApi(t, s.texts)
    validAgainstAsyncApi(t, lost.texts.concat([{ message: 'EndOfStream', last_seq_no: 0 }]))
    t.equal(s.closeCode, 1000, 'the gateway closed after EndOfTranscript')
    t.notOk(
      leg.messages.some(m => m.command === 'ERROR'),
      'the platform saw no error'
    )
    t.ok(
      leg.messages.some(m => (m.parameters as Json).isFinal === true),
      'final transcripts'
    )
    t.match(
      leg.messages.find(m => (m.parameters as Json).isFinal === false),
      { command: 'MESSAGE', messageType: 'TRANSCRIPT', parameters: { vendor: 'speechmatics', perspective: 'TX' } }
    )
    await everyMessageMatched(t, gw, 'AudioAdded, Info and the rest matched a rule')
    t.notOk(gw.logs.raw.includes(KEY), 'the key is never logged')
  }
)

t.test('speechmatics: a wrong key is refused at the upgrade: UPSTREAM_UNREACHABLE HTTP 401', async t => {
  const emu = await emulator(t)
  const gw = await gateway(t, [emu], { key: 'not-the-key' })
  const leg = platformLeg(t, gw.url('/audio/x'), init(9302))
  t.match(await leg.answer, { command: 'ERROR', messageType: 'UPSTREAM_UNREACHABLE', message: /HTTP 401/ })
  t.equal((await leg.closed).code, 1013)
})

t.test('speechmatics: audio waits for RecognitionStarted (the service refuses audio before it)', async t => {
  const emu = await emulator(t, { startDelayMs: 500 })
  const gw = await gateway(t, [emu])
  const leg = platformLeg(t, gw.url('/audio/x'), init(9303))
  const sent = stream(leg, 0, 60) // audio from the first moment, before the session is ready
  t.equal((await leg.answer).command, 'CONNECTED')
  const all = await sent
  leg.ws.close(1000)
  t.ok(await until(() => emu.sessions()[0]?.closed === true, 8000))
  const s = emu.sessions()[0]
  t.same(s.errors, [], 'no AddAudio before RecognitionStarted')
  t.equal(s.sha256, sha256(all), 'held audio went after RecognitionStarted, in order, nothing lost')
})

t.test(
  'speechmatics: a mapping that sends audio before RecognitionStarted gets protocol_error, close 1003: the leg ends',
  async t => {
    await withMappingCopy(
      t,
      'speechmatics',
      m => {
        delete m.audio.ready
      },
      async (t, file) => {
        const emu = await emulator(t, { startDelayMs: 1000 })
        const gw = await gateway(t, [emu], { mapping: file })
        const { leg } = await legUntilClosed(t, gw, init(9304))
        t.match(leg.messages.at(-1), {
          command: 'ERROR',
          messageType: 'UPSTREAM_REFUSED',
          parameters: { vendorCloseCode: 1003, vendorCloseClass: 'bad-request', vendorCloseReason: 'protocol_error' }
        })
        t.match(emu.sessions()[0].errors, [/protocol_error: AddAudio before RecognitionStarted/])
        t.equal(emu.sessions().length, 1, 'no failover: every replica would refuse it')
      }
    )
  }
)

t.test(
  'speechmatics: a malformed StartRecognition is refused (Error invalid_config): UPSTREAM_REFUSED with its reason',
  async t => {
    const emu = await emulator(t)
    const gw = await gateway(t, [emu], { params: { language: 'en', max_delay: 9 } })
    const leg = platformLeg(t, gw.url('/audio/x'), init(9305))
    t.match(await leg.answer, {
      command: 'ERROR',
      messageType: 'UPSTREAM_REFUSED',
      parameters: { vendorMessage: 'invalid_config: transcription_config.max_delay must be 0.7-4' }
    })
    t.notSame(schemas.check('StartRecognition', emu.sessions()[0].texts[0]), [], 'the published schema refuses it too')
  }
)
