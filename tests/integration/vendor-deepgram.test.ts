import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import { startRealVendor, type RealVendorEmulator, type RealVendorOptions } from '../../gateway/tools/real-vendors'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, platformLeg, sleep, until, type TestGateway } from '../helpers/gateway'
import { everyMessageMatched, vendorGateway } from '../helpers/vendors'
import { sha256, stream } from '../helpers/audio'

// The platform (simulated legs, real sockets) → a real gateway → the strict Deepgram emulator.

type T = Test
type Json = Record<string, any>

const KEY = 'dg-key-0123456789abcdef'
const ROOT = join(__dirname, '..', '..')
const init = (contactId: number, perspective = 'TX'): Json =>
  initMessage({ token: AUDIO_TOKEN, contactId, busNo: 4594, perspective })

async function emulator(t: T, opts: Omit<RealVendorOptions, 'kind'>): Promise<RealVendorEmulator> {
  const emu = await startRealVendor({ kind: 'deepgram', apiKey: KEY, ...opts })
  t.teardown(async () => await emu.close())
  return emu
}

async function gateway(
  t: T,
  emu: RealVendorEmulator,
  mapping: string,
  params: Json = {},
  key = KEY
): Promise<TestGateway> {
  return await vendorGateway(t, emu, mapping, key, params)
}

async function metrics(gw: TestGateway): Promise<string> {
  return await (await fetch(gw.adminUrl('/metrics'))).text()
}

t.test('deepgram: query and Token auth, µ-law unchanged, Results → TRANSCRIPT, CloseStream → Metadata', async t => {
  const emu = await emulator(t, { resultEveryMs: 500 })
  const gw = await gateway(t, emu, 'mappings/deepgram.yaml', {
    model: 'nova-2-phonecall',
    language: 'en-US',
    endpointing: 300,
    utterance_end_ms: 1000,
    keyterm: ['refund', 'change of address']
  })
  const leg = platformLeg(t, gw.url('/audio/x'), init(8101))
  t.equal((await leg.answer).command, 'CONNECTED', 'CONNECTED as soon as the vendor socket is open')
  const sent = await stream(leg, 0, 125) // 2.5 s
  t.ok(await until(() => emu.sessions()[0]?.audioBytes === sent.length, 3000), 'every byte reached Deepgram')
  let s = emu.sessions()[0]
  t.same(
    s.query,
    {
      encoding: 'mulaw',
      sample_rate: '8000',
      channels: '1',
      model: 'nova-2-phonecall',
      language: 'en-US',
      interim_results: 'true',
      punctuate: 'true',
      endpointing: '300',
      utterance_end_ms: '1000',
      keyterm: 'change of address'
    },
    'options from route.params in the query string (the last keyterm shown; both are sent)'
  )
  t.equal(
    s.headers.authorization,
    '[REDACTED]',
    'an Authorization header was presented (and accepted: the emulator checks it)'
  )
  t.equal(s.sha256, sha256(sent), 'the platform µ-law arrives byte for byte, in order')
  t.ok(
    s.frames >= 25 && s.frames < 125,
    `${s.frames} binary frames for 125 platform frames (coalesced to 100 ms, audio.coalesceMs)`
  )
  // resultEveryMs 500 with interim results: an interim then a final every 250 ms of audio.
  t.ok(await until(() => leg.messages.length >= 10, 3000), 'results came back')
  t.ok(
    leg.messages.every(m => m.command === 'MESSAGE' && m.messageType === 'TRANSCRIPT'),
    'every result is a MESSAGE TRANSCRIPT'
  )
  t.match(
    leg.messages.find(m => (m.parameters as Json).isFinal === false),
    {
      message: /^emulated segment \d+$/,
      parameters: { isFinal: false, speechFinal: false, perspective: 'TX', vendor: 'deepgram' }
    }
  )
  t.match(
    leg.messages.find(m => (m.parameters as Json).isFinal === true),
    {
      message: 'emulated segment 1',
      parameters: {
        isFinal: true,
        speechFinal: true,
        fromFinalize: false,
        start: 0,
        duration: Number,
        confidence: Number,
        perspective: 'TX',
        vendor: 'deepgram'
      }
    }
  )
  leg.ws.close(1000)
  await leg.closed
  t.ok(await until(() => emu.sessions()[0].closed, 3000), 'the vendor session ended')
  s = emu.sessions()[0]
  t.same(s.texts, [{ type: 'CloseStream' }], 'the only text frame was CloseStream (no keepalive while audio flowed)')
  // Deepgram answers CloseStream with its last Results and Metadata, then closes 1000 itself.
  t.equal(s.closeCode, 1000, 'Deepgram ended the stream normally after CloseStream')
  t.same(s.errors, [], 'the strict emulator recorded no protocol error')
  await everyMessageMatched(t, gw, 'every vendor message was matched by a rule')
  t.notMatch(gw.logs.raw, KEY, 'the vendor key is never logged')
})

t.test(
  'deepgram: a silent hold longer than the idle timeout keeps the vendor session alive with KeepAlive, then audio resumes',
  async t => {
    // Deepgram's 10 s idle close (NET-0001) and the mapping's 3 s KeepAlive tick, scaled down: this emulator
    // closes after 1.5 s without audio or KeepAlive, and the test copy of the mapping ticks every 0.25 s.
    await withMappingCopy(
      t,
      'deepgram',
      m => {
        m.audio.keepalive.everySeconds = 0.25
      },
      async (t, file) => {
        const emu = await emulator(t, { resultEveryMs: 1000, idleCloseMs: 1500 })
        const gw = await gateway(t, emu, file, { interim_results: false })
        const leg = platformLeg(t, gw.url('/audio/x'), init(8102))
        t.equal((await leg.answer).command, 'CONNECTED')
        const before = await stream(leg, 0, 25)
        await sleep(2000) // the platform leg stays open and silent (a hold), longer than the idle timeout
        const s1 = emu.sessions()[0]
        t.notOk(s1.closed, 'Deepgram did not close the idle stream (NET-0001)')
        t.ok(s1.keepalives >= 3, `KeepAlive messages kept it open (${s1.keepalives})`)
        t.ok(
          s1.texts.every(x => JSON.stringify(x) === '{"type":"KeepAlive"}'),
          'only KeepAlive was sent during the hold'
        )
        const after = await stream(leg, 25, 50)
        t.ok(await until(() => emu.sessions()[0].audioBytes === before.length + after.length, 3000))
        leg.ws.close(1000)
        t.ok(await until(() => emu.sessions()[0].closed, 3000))
        const s = emu.sessions()[0]
        t.equal(emu.sessions().length, 1, 'one vendor session for the whole call')
        t.equal(s.sha256, sha256(Buffer.concat([before, after])), 'audio before and after the hold, in order')
        t.same(s.texts.at(-1), { type: 'CloseStream' })
        t.equal(s.closeCode, 1000)
        t.same(s.errors, [])
        t.notOk(
          leg.messages.some(m => m.command === 'ERROR'),
          'the platform never saw an error'
        )
        t.ok(leg.messages.filter(m => (m.parameters as Json).isFinal === true).length >= 1, 'results flowed')
      }
    )
  }
)

/**
 * A test-only copy of a shipped mapping, changed by `edit`, in this test's testdir. The gateway (whose
 * helper makes its own testdir, emptying the test's) then runs in a subtest given the copy's path.
 */
async function withMappingCopy(
  t: T,
  name: string,
  edit: (m: Json) => void,
  fn: (t: T, file: string) => Promise<void>
): Promise<void> {
  const mapping = parse(readFileSync(join(ROOT, 'mappings', `${name}.yaml`), 'utf8')) as Json
  edit(mapping)
  const dir = t.testdir({ [`${name}-test.yaml`]: stringify(mapping) })
  await t.test('with the test copy of the mapping', async t => await fn(t, join(dir, `${name}-test.yaml`)))
}

t.test('deepgram: a result rule that throws is counted in mapping_errors and the leg goes on', async t => {
  await withMappingCopy(
    t,
    'deepgram',
    m => {
      m.audio.results.unshift({ when: 'msg.type = "Results" and msg.is_final = false', emit: '$error("boom")' })
      // `serve` dry-runs every rule on the mapping's samples and refuses a mapping that fails there: the
      // interim samples go, so the rule throws only on the emulator's interim results.
      m.samples.audio = m.samples.audio.filter(
        (x: Record<string, unknown>) => !(x.type === 'Results' && x.is_final === false)
      )
    },
    async (t, file) => {
      const emu = await emulator(t, { resultEveryMs: 500 })
      const gw = await gateway(t, emu, file)
      const leg = platformLeg(t, gw.url('/audio/x'), init(8103))
      t.equal((await leg.answer).command, 'CONNECTED')
      const sent = await stream(leg, 0, 75) // 1.5 s: 3 interim results (the rule throws) + 3 final ones
      t.ok(await until(() => leg.messages.length >= 3, 3000))
      await sleep(100)
      const m = await metrics(gw)
      t.match(
        m,
        /assist_gateway_mapping_errors_total\{route="x",stage="result_emit"\} 3\b/,
        'each failing emit is counted'
      )
      t.match(m, /assist_gateway_audio_vendor_messages_total\{route="x",result="error"\} 3\b/)
      t.equal(leg.messages.length, 3, 'the finals still reach the platform')
      t.ok(leg.messages.every(m => m.command === 'MESSAGE' && (m.parameters as Json).isFinal === true))
      t.equal(leg.ws.readyState, leg.ws.OPEN, 'the leg is still open')
      t.ok(
        gw.logs.lines.some(l => l.event === 'mapping_error' && String(l.error).includes('boom')),
        'the failure is logged with its message'
      )
      leg.ws.close(1000)
      t.ok(await until(() => emu.sessions()[0].closed, 3000))
      const s = emu.sessions()[0]
      t.equal(s.sha256, sha256(sent))
      t.same(s.errors, [])
      t.same(s.texts.at(-1), { type: 'CloseStream' })
    }
  )
})

t.test('deepgram: a wrong key is refused on the upgrade and the platform gets a clear ERROR', async t => {
  const emu = await emulator(t, {})
  const gw = await gateway(t, emu, 'mappings/deepgram.yaml', {}, 'not-the-key-000')
  const leg = platformLeg(t, gw.url('/audio/x'), init(8104))
  const answer = await leg.answer
  t.match(
    answer,
    { command: 'ERROR', messageType: 'UPSTREAM_UNREACHABLE', message: /HTTP 401/ },
    'the vendor status reaches the platform'
  )
  t.match(emu.sessions()[0].errors, ['invalid credentials'])
})
