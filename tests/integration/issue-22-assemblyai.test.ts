import t, { type Test } from 'tap'
import { audioInit } from '../helpers/legs'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import type { RealVendorEmulator, RealVendorOptions } from '../../gateway/tools/real-vendors'
import { platformLeg, sleep, until } from '../helpers/gateway'
import { vendorGateway, realVendor, legUntilClosed } from '../helpers/vendors'
import { sha256, stream } from '../helpers/audio'

// Issue 22, AssemblyAI: (1) the gateway sent {"type":"KeepAlive"} during holds and re-attach graces, but the
// v3 streaming API's published AsyncAPI file (AssemblyAI/assemblyai-api-spec usm-streaming.yml, channel
// `streaming`: UpdateConfiguration, ForceEndpoint, SessionTermination, AudioChunk) has no such message; the
// emulator now closes it with 3006 "Invalid Message Type" ("Common session errors and closures",
// common-errors.mdx). (2) Close 3007 (the same page: "Input duration violation", "Audio Transmission Rate
// Exceeded": the client's doing) was classed rate-exceeded, so the gateway failed over into the same refusal.

type T = Test
type Json = Record<string, any>

const KEY = 'aai-key-issue-22'
const ROOT = join(__dirname, '..', '..')
const init = (contactId: number): Json => audioInit(contactId)

const emulator = async (t: T, opts: Omit<RealVendorOptions, 'kind'> = {}): Promise<RealVendorEmulator> =>
  await realVendor(t, { kind: 'assemblyai', apiKey: KEY, resultEveryMs: 1000, ...opts })

t.test(
  'assemblyai: a silent hold sends nothing the v3 API does not define (no KeepAlive), even with inactivity_timeout',
  async t => {
    // The old mapping sent KeepAlive on a 2 s tick once a tick found no audio since the one before: within 4 s
    // of silence. This hold is 4.5 s; the emulator's inactivity limit is left long so only a KeepAlive can fail.
    const emu = await emulator(t, { inactivityTimeoutMs: 20_000 })
    const gw = await vendorGateway(t, emu, 'mappings/assemblyai.yaml', KEY, { inactivity_timeout: 30 })
    const leg = platformLeg(t, gw.url('/audio/x'), init(8221))
    t.equal((await leg.answer).command, 'CONNECTED')
    const a = await stream(leg, 0, 25)
    await sleep(4500)
    const b = await stream(leg, 25, 50)
    leg.ws.close(1000)
    t.ok(await until(() => emu.sessions()[0]?.closed === true, 5000))
    const s = emu.sessions()[0]
    t.same(s.errors, [], 'no 3006: nothing but audio, then Terminate')
    t.same(
      (s.texts as Json[]).map(m => m.type),
      ['Terminate']
    )
    t.equal(emu.sessions().length, 1, 'one session for the whole call')
    t.equal(s.sha256, sha256(Buffer.concat([a, b, Buffer.alloc((400 - ((a.length + b.length) % 400)) % 400, 0xff)])))
  }
)

t.test('assemblyai: a hold longer than inactivity_timeout ends the session; the call goes on in a new one', async t => {
  const emu = await emulator(t, { inactivityTimeoutMs: 600 })
  const gw = await vendorGateway(t, emu, 'mappings/assemblyai.yaml', KEY, { inactivity_timeout: 5 })
  const leg = platformLeg(t, gw.url('/audio/x'), init(8222))
  t.equal((await leg.answer).command, 'CONNECTED')
  await stream(leg, 0, 25)
  t.ok(await until(() => emu.sessions()[0]?.closeCode === 3005, 3000), 'the service ended the idle session (3005)')
  t.ok(await until(() => emu.sessions().length >= 2, 3000), 'a new session was opened')
  await stream(leg, 25, 50)
  leg.ws.close(1000)
  t.ok(await until(() => emu.sessions().every(s => s.closed), 5000))
  t.notOk(
    leg.messages.some(m => m.command === 'ERROR'),
    'the platform saw nothing of it'
  )
  t.ok(
    emu.sessions().every(s => !(s.texts as Json[]).some(m => m.type === 'KeepAlive')),
    'never a KeepAlive'
  )
})

t.test(
  'assemblyai: close 3007 (a client error) ends the leg with UPSTREAM_REFUSED, without failing over into it again',
  async t => {
    // A mapping whose chunks are 20 ms: every one is an "Input duration violation" (3007).
    const mapping = parse(readFileSync(join(ROOT, 'mappings', 'assemblyai.yaml'), 'utf8')) as Json
    mapping.audio.frames.chunkMs = 20
    const dir = t.testdir({ 'assemblyai-20ms.yaml': stringify(mapping) })
    await t.test('with 20 ms chunks', async t => {
      const emu = await emulator(t)
      const gw = await vendorGateway(t, emu, join(dir, 'assemblyai-20ms.yaml'), KEY)
      const { leg } = await legUntilClosed(t, gw, init(8223))
      t.match(leg.messages.at(-1), {
        command: 'ERROR',
        messageType: 'UPSTREAM_REFUSED',
        parameters: {
          vendorCloseCode: 3007,
          vendorCloseClass: 'bad-request',
          vendorCloseReason: /^Input duration violation/
        }
      })
      t.equal(emu.sessions().length, 1, 'no other session was opened into the same refusal')
    })
  }
)
