import t, { type Test } from 'tap'
import { audioInit } from '../helpers/legs'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import type { RealVendorEmulator, RealVendorOptions } from '../../gateway/tools/real-vendors'
import { platformLeg, until, type TestGateway } from '../helpers/gateway'
import { vendorGateway, everyMessageMatched, realVendor } from '../helpers/vendors'
import { sha256, stream } from '../helpers/audio'

// The platform (simulated legs, real sockets) → a real gateway → the strict AssemblyAI v3 emulator.

type T = Test
type Json = Record<string, any>

const KEY = 'aai-key-0123456789abcdef'
const ROOT = join(__dirname, '..', '..')
const init = (contactId: number): Json => audioInit(contactId)

const emulator = async (t: T, opts: Omit<RealVendorOptions, 'kind'> = {}): Promise<RealVendorEmulator> =>
  await realVendor(t, { kind: 'assemblyai', apiKey: KEY, ...opts })

async function gateway(t: T, emu: RealVendorEmulator, mapping: string, params: Json = {}): Promise<TestGateway> {
  return await vendorGateway(t, emu, mapping, KEY, params)
}

/**
 * A test-only copy of assemblyai.yaml changed by `edit`, in this test's testdir; the gateway (whose
 * helper makes its own testdir, emptying the test's) runs in a subtest given the copy's path.
 */
async function withMappingCopy(
  t: T,
  edit: (m: Json) => void,
  fn: (t: T, file: string) => Promise<void>
): Promise<void> {
  const mapping = parse(readFileSync(join(ROOT, 'mappings', 'assemblyai.yaml'), 'utf8')) as Json
  edit(mapping)
  const dir = t.testdir({ 'assemblyai-test.yaml': stringify(mapping) })
  await t.test('with the test copy of the mapping', async t => await fn(t, join(dir, 'assemblyai-test.yaml')))
}

const texts = (s: Json): string[] => (s.texts as Json[]).map(m => m.type as string)

t.test('assemblyai: pcm_mulaw in 50 ms chunks, ready on Begin, Turn → TRANSCRIPT, Terminate → Termination', async t => {
  const emu = await emulator(t, { resultEveryMs: 1000 })
  const gw = await gateway(t, emu, 'mappings/assemblyai.yaml', {
    end_of_turn_confidence_threshold: 0.5,
    keyterms_prompt: ['refund', 'change of address']
  })
  const leg = platformLeg(t, gw.url('/audio/x'), init(8201))
  const answer = await leg.answer
  t.match(
    answer,
    { command: 'CONNECTED', parameters: { vendorSessionId: /^[0-9a-f-]{36}$/, expiresAt: Number } },
    'CONNECTED after Begin, with its id'
  )
  const sent = await stream(leg, 0, 150) // 3 s = 60 chunks of 50 ms
  t.ok(await until(() => emu.sessions()[0]?.audioBytes === sent.length, 3000), 'all audio arrived')
  t.ok(await until(() => leg.messages.length >= 6, 3000), 'results came back')
  leg.ws.close(1000)
  t.ok(await until(() => emu.sessions()[0].closed, 3000))
  const s = emu.sessions()[0]
  t.same(s.errors, [], 'the strict emulator recorded no error (no chunk outside 50-1000 ms)')
  t.same(s.query, {
    sample_rate: '8000',
    encoding: 'pcm_mulaw',
    speech_model: 'universal-streaming-english',
    format_turns: 'true',
    end_of_turn_confidence_threshold: '0.5',
    keyterms_prompt: '["refund","change of address"]'
  })
  t.equal(s.headers.authorization, '[REDACTED]', 'Authorization presented (and accepted: the emulator checks it)')
  t.equal(s.frames, 60, 'one binary message per 50 ms')
  t.equal(s.bytes, 60 * 400)
  t.equal(s.sha256, sha256(sent), 'the platform µ-law, byte for byte, in order')
  t.same(texts(s), ['Terminate'], 'Terminate at the end, nothing else')
  // AssemblyAI answers Terminate with its last Turn and Termination, then closes 1000 itself.
  t.equal(s.closeCode, 1000, 'AssemblyAI ended the session normally after Terminate')
  // resultEveryMs 1000: a partial turn at 0.5 s, its end at 1 s (unformatted, then formatted), and so on.
  t.equal(leg.messages.length, 6, 'partials and formatted ends of turn; the unformatted duplicate is dropped')
  t.match(leg.messages[0], {
    command: 'MESSAGE',
    messageType: 'TRANSCRIPT',
    message: 'emulated segment 1',
    parameters: { isFinal: false, formatted: false, turnOrder: 0, start: 0, perspective: 'TX', vendor: 'assemblyai' }
  })
  t.match(leg.messages[1], {
    command: 'MESSAGE',
    messageType: 'TRANSCRIPT',
    message: 'Emulated segment 1.',
    parameters: { isFinal: true, formatted: true, turnOrder: 0, endOfTurnConfidence: Number, start: 0, end: 1000 }
  })
  await everyMessageMatched(t, gw, 'every vendor message was matched by a rule')
  t.notMatch(gw.logs.raw, KEY, 'the API key is never logged')
})

t.test('assemblyai variant: pcm16 at 16 kHz (decoded and resampled), 1600-byte chunks', async t => {
  await withMappingCopy(
    t,
    m => {
      m.audio.frames = { framing: 'binary', encoding: 'pcm16', sampleRate: 16000, chunkMs: 50 }
      m.audio.url = (m.audio.url as string).replace(
        '"sample_rate=8000", "encoding=pcm_mulaw"',
        '"sample_rate=16000", "encoding=pcm_s16le"'
      )
    },
    async (t, file) => {
      const emu = await emulator(t, { resultEveryMs: 1000 })
      const gw = await gateway(t, emu, file)
      const leg = platformLeg(t, gw.url('/audio/x'), init(8203))
      t.equal((await leg.answer).command, 'CONNECTED')
      const sent = await stream(leg, 0, 100) // 2 s
      t.ok(
        await until(() => emu.sessions()[0]?.audioBytes === sent.length * 4, 3000),
        '2 bytes per sample, twice the samples'
      )
      leg.ws.close(1000)
      t.ok(await until(() => emu.sessions()[0].closed, 3000))
      const s = emu.sessions()[0]
      t.same(s.errors, [])
      t.match(s.query, { sample_rate: '16000', encoding: 'pcm_s16le' })
      t.equal(s.frames, 40, '40 chunks of 50 ms')
      t.equal(s.bytes, 40 * 1600)
      t.ok(
        leg.messages.some(m => (m.parameters as Json).isFinal === true),
        'results came back'
      )
      t.same(texts(s), ['Terminate'])
    }
  )
})

t.test(
  'assemblyai: audio that is not a whole number of 50 ms chunks still ends with Terminate → Termination',
  async t => {
    const emu = await emulator(t)
    const gw = await gateway(t, emu, 'mappings/assemblyai.yaml')
    const leg = platformLeg(t, gw.url('/audio/x'), init(8205))
    t.equal((await leg.answer).command, 'CONNECTED')
    await stream(leg, 0, 3) // 60 ms: one 50 ms chunk and 10 ms left over
    leg.ws.close(1000)
    t.ok(await until(() => emu.sessions()[0]?.closed, 3000))
    const s = emu.sessions()[0]
    t.equal(s.audioBytes, 800, 'all the audio was sent, the last chunk padded with silence to 50 ms')
    t.same(s.errors, [], 'no chunk under 50 ms')
    t.equal(s.closeCode, 1000, 'closed after Termination')
  }
)

t.test('assemblyai: sessions rotate before the vendor cap, the platform never notices', async t => {
  await withMappingCopy(
    t,
    m => {
      m.audio.rotateAfterSeconds = 1
    },
    async (t, file) => {
      const emu = await emulator(t, { resultEveryMs: 500, sessionMaxMs: 2500 })
      const gw = await gateway(t, emu, file)
      const leg = platformLeg(t, gw.url('/audio/x'), init(8204))
      t.equal((await leg.answer).command, 'CONNECTED')
      const sent = await stream(leg, 0, 175) // 3.5 s, past the 2.5 s cap
      t.equal(leg.ws.readyState, leg.ws.OPEN, 'the platform leg is still open')
      leg.ws.close(1000)
      await leg.closed
      t.ok(await until(() => emu.sessions().every(s => s.closed), 3000), 'every vendor session ended')
      const sessions = emu.sessions()
      t.ok(sessions.length >= 3, `a new vendor session about every second (${sessions.length})`)
      t.notOk(
        leg.messages.some(m => m.command === 'ERROR'),
        'no ERROR reached the platform'
      )
      t.ok(
        leg.messages.filter(m => (m.parameters as Json).isFinal === true).length >= 3,
        'results kept flowing across rotations'
      )
      let offset = 0
      for (const [i, s] of sessions.entries()) {
        t.same(s.errors, [], `session ${i + 1}: no protocol error (no chunk under 50 ms, none after Terminate)`)
        t.ok(
          texts(s).includes('Terminate') && texts(s).every(x => x === 'Terminate'),
          `session ${i + 1}: ended by Terminate`
        )
        t.equal(s.closeCode, 1000, `session ${i + 1}: closed after Termination, not by the 3008 cap`)
        t.not(s.closeCode, 3008, `session ${i + 1}: never reached the vendor cap`)
        t.equal(
          s.sha256,
          sha256(sent.subarray(offset, offset + s.audioBytes)),
          `session ${i + 1}: carries the next ${s.audioBytes} bytes of the call`
        )
        offset += s.audioBytes
      }
      t.equal(offset, sent.length, 'together the sessions carried all the audio, once, in order')
    }
  )
})
