import t, { type Test } from 'tap'
import { audioInit } from '../helpers/legs'
import { mulawDecodeInto, Resampler } from '../../gateway/audio/feed/codec'
import { startRealVendor, type RealVendorEmulator, type RealVendorOptions } from '../../gateway/tools/real-vendors'
import { platformLeg, startGateway, until, type TestGateway } from '../helpers/gateway'
import { sha256, stream } from '../helpers/audio'
import { failoverCall, withMappingCopy, everyMessageMatched } from '../helpers/vendors'
import { vendorSchemas } from '../helpers/vendor-schemas'

// The platform (simulated legs, real sockets) → a real gateway → the strict OpenAI Realtime (transcription
// session, GA interface) emulator. Follows openai/openai-openapi openapi.yaml (f85dbe2): every event the gateway
// sent is validated against its published schema there (RealtimeClientEventSessionUpdate,
// RealtimeClientEventInputAudioBufferAppend, RealtimeClientEventInputAudioBufferCommit; vendored subset, MIT),
// and RealtimeAudioFormats (audio/pcmu; audio/pcm at 24000 Hz only).

type T = Test
type Json = Record<string, any>

const KEY = 'sk-emulator-0123456789abcdef'
const schemas = vendorSchemas('openai-openapi-subset.json')
const init = (contactId: number): Json => audioInit(contactId)
const EVENT_SCHEMAS: Record<string, string> = {
  'session.update': 'RealtimeClientEventSessionUpdate',
  'input_audio_buffer.append': 'RealtimeClientEventInputAudioBufferAppend',
  'input_audio_buffer.commit': 'RealtimeClientEventInputAudioBufferCommit'
}

async function emulator(t: T, opts: Omit<RealVendorOptions, 'kind'> = {}): Promise<RealVendorEmulator> {
  const emu = await startRealVendor({ kind: 'openai', apiKey: KEY, resultEveryMs: 1000, recordFrames: 2, ...opts })
  t.teardown(async () => await emu.close())
  return emu
}

async function gateway(
  t: T,
  emus: RealVendorEmulator[],
  opts: { mapping?: string; key?: string; params?: Json } = {}
): Promise<TestGateway> {
  return await startGateway(
    t,
    {
      audio: { failoverTimeoutSeconds: 5, replaySeconds: 1 },
      routes: {
        x: {
          mapping: opts.mapping ?? 'mappings/openai-realtime.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          params: opts.params ?? { model: 'gpt-4o-transcribe', language: 'en', noise_reduction: 'near_field' },
          upstreams: emus.map((e, i) => ({ name: `v${i}`, audio: e.url, credential: '${VENDOR_KEY}' }))
        }
      }
    },
    { VENDOR_KEY: opts.key ?? KEY }
  )
}

/** Every event the gateway sent (texts, and the appends kept as raw frames), against the published schema. */
function validAgainstOpenApi(t: T, s: { texts: unknown[]; rawFrames?: string[] }): void {
  const events = [...(s.texts as Json[]), ...(s.rawFrames ?? []).map(f => JSON.parse(f) as Json)]
  t.ok(
    events.some(e => e.type === 'input_audio_buffer.append'),
    'appends were checked too'
  )
  for (const e of events) {
    const name = EVENT_SCHEMAS[e.type]
    t.ok(name, `${e.type} is a client event the gateway means to send`)
    t.same(schemas.check(name, e), [], `${e.type} matches ${name}`)
  }
}

t.test(
  'openai realtime: a whole call, µ-law (audio/pcmu) byte for byte, deltas and completed, a failover, no audio lost',
  async t => {
    const a = await emulator(t)
    const b = await emulator(t)
    const gw = await gateway(t, [a, b])
    const leg = platformLeg(t, gw.url('/audio/x'), init(9401))
    t.match(await leg.answer, { command: 'CONNECTED', parameters: { vendorSessionId: /^sess_/ } })
    const { lost, s, sent } = await failoverCall(t, leg, a, b)
    t.same(lost.errors, [])
    t.same(s.errors, [], 'no protocol error (no audio before session.updated, base64 whole samples)')
    t.equal(lost.sha256, sha256(sent.subarray(0, lost.audioBytes)), 'the first session: the call from its start')
    // The replacement: the replayed tail and the rest, byte for byte, the last 100 ms padded with µ-law silence.
    let from = -1
    for (let pad = 0; pad < 800 && from < 0; pad++) {
      const start = sent.length - (s.audioBytes - pad)
      if (start >= 0 && sha256(Buffer.concat([sent.subarray(start), Buffer.alloc(pad, 0xff)])) === s.sha256)
        from = start
    }
    t.ok(from >= 0, 'the replacement: a tail of the call, byte for byte, then silence to a whole 100 ms')
    t.ok(
      from > 0 && from <= lost.audioBytes,
      `no gap: the replacement starts at byte ${from}, the first had ${lost.audioBytes}`
    )
    t.match(s.texts[0], {
      type: 'session.update',
      session: {
        type: 'transcription',
        audio: {
          input: { format: { type: 'audio/pcmu' }, transcription: { model: 'gpt-4o-transcribe', language: 'en' } }
        }
      }
    })
    t.same(s.texts.at(-1), { type: 'input_audio_buffer.commit' }, 'the close commits what is left')
    validAgainstOpenApi(t, s)
    t.notOk(
      leg.messages.some(m => m.command === 'ERROR'),
      'the platform saw no error'
    )
    const partials = leg.messages.filter(m => (m.parameters as Json).isFinal === false).map(m => m.message)
    t.ok(
      partials.includes('emulated segment') && partials.includes('emulated'),
      'the text so far, as the deltas add to it'
    )
    t.match(
      leg.messages.find(m => (m.parameters as Json).isFinal === true),
      {
        messageType: 'TRANSCRIPT',
        message: /^emulated segment \d+$/,
        parameters: { itemId: /^item_/, vendor: 'openai' }
      }
    )
    await everyMessageMatched(t, gw, 'every event matched a rule')
    t.notOk(gw.logs.raw.includes(KEY), 'the key is never logged')
  }
)

t.test('openai realtime variant: pcm16 at 24 kHz (audio/pcm), a failover, sample-exact after resampling', async t => {
  await withMappingCopy(
    t,
    'openai-realtime',
    m => {
      m.audio.open = (m.audio.open as string).replace(
        '{ "type": "audio/pcmu" }',
        '{ "type": "audio/pcm", "rate": 24000 }'
      )
      m.audio.frames = { ...m.audio.frames, encoding: 'pcm16', sampleRate: 24000 }
    },
    async (t, file) => {
      const a = await emulator(t)
      const b = await emulator(t)
      const gw = await gateway(t, [a, b], { mapping: file })
      const leg = platformLeg(t, gw.url('/audio/x'), init(9402))
      t.equal((await leg.answer).command, 'CONNECTED')
      const { lost, s, sent } = await failoverCall(t, leg, a, b, 6) // 6 bytes (3 samples) per µ-law byte
      t.same([...lost.errors, ...s.errors], [])
      t.match(s.texts[0], { session: { audio: { input: { format: { type: 'audio/pcm', rate: 24000 } } } } })
      validAgainstOpenApi(t, s)
      // What each session should hold: its µ-law decoded and resampled by a resampler that starts with it.
      const upsampled = (mulaw: Buffer): Buffer => {
        const pcm = new Int16Array(mulaw.length)
        mulawDecodeInto(mulaw, pcm)
        const r = new Resampler(8000, 24000)
        const out = new Int16Array(r.maxOutput(pcm.length))
        const n = r.process(pcm, pcm.length, out)
        return Buffer.from(out.buffer, 0, n * 2)
      }
      t.equal(lost.sha256, sha256(upsampled(sent).subarray(0, lost.audioBytes)), 'the first session: sample for sample')
      let from = -1
      for (let k = 0; k * 160 < sent.length && from < 0; k++) {
        const tail = upsampled(sent.subarray(k * 160))
        const padded = Buffer.concat([tail, Buffer.alloc((4800 - (tail.length % 4800)) % 4800)])
        if (padded.length === s.audioBytes && sha256(padded) === s.sha256) from = k * 160
      }
      t.ok(
        from >= 0,
        'the replacement: a frame-aligned tail of the call, resampled afresh, sample for sample (then silence to 100 ms)'
      )
      t.ok(
        from > 0 && from * 6 <= lost.audioBytes,
        `no gap: it starts at µ-law byte ${from}; the first had ${lost.audioBytes / 6}`
      )
    }
  )
})

t.test('openai realtime: a wrong key is refused at the upgrade: UPSTREAM_UNREACHABLE HTTP 401', async t => {
  const emu = await emulator(t)
  const gw = await gateway(t, [emu], { key: 'sk-wrong' })
  const leg = platformLeg(t, gw.url('/audio/x'), init(9403))
  t.match(await leg.answer, { command: 'ERROR', messageType: 'UPSTREAM_UNREACHABLE', message: /HTTP 401/ })
})

t.test(
  'openai realtime: a session.update the service refuses (error event) is a refusal: UPSTREAM_REFUSED',
  async t => {
    const emu = await emulator(t)
    const gw = await gateway(t, [emu], { params: { turn_detection: { type: 'push_to_talk' } } })
    const leg = platformLeg(t, gw.url('/audio/x'), init(9404))
    t.match(await leg.answer, {
      command: 'ERROR',
      messageType: 'UPSTREAM_REFUSED',
      parameters: { vendorMessage: /^invalid_value: audio.input.turn_detection.type must be/ }
    })
    t.notSame(
      schemas.check('RealtimeClientEventSessionUpdate', emu.sessions()[0].texts[0]),
      [],
      'the published schema refuses it too'
    )
  }
)

t.test(
  'openai realtime: audio waits for session.updated (appended before the session.update it would be 24 kHz PCM)',
  async t => {
    // The service reads events in order: audio appended before the session.update is read in the default format.
    // The gateway sends session.update first (the open frame) and holds audio until session.updated.
    const emu = await emulator(t)
    const gw = await gateway(t, [emu])
    const leg = platformLeg(t, gw.url('/audio/x'), init(9406))
    const sent = stream(leg, 0, 25) // from the first moment
    t.equal((await leg.answer).command, 'CONNECTED')
    const all = await sent
    leg.ws.close(1000)
    t.ok(await until(() => emu.sessions()[0]?.closed === true, 8000))
    const s = emu.sessions()[0]
    t.same(s.errors, [], 'no append before the session.update')
    t.equal(s.texts[0] && (s.texts[0] as Json).type, 'session.update', 'the first event')
    const pad = (800 - (all.length % 800)) % 800
    t.equal(s.sha256, sha256(Buffer.concat([all, Buffer.alloc(pad, 0xff)])), 'all of it, in order')
  }
)
