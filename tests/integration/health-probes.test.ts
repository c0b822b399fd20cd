import t, { type Test } from 'tap'
import { startRealVendor, type RealVendorEmulator, type RealVendorKind } from '../../gateway/tools/real-vendors'
import { platformLeg, startGateway, until, type TestGateway } from '../helpers/gateway'
import { stream } from '../helpers/audio'
import { audioInit } from '../helpers/legs'

// Each shipped vendor mapping's own health probe against its strict emulator, which refuses a missing or
// wrong credential as the vendor does. Default health settings, only the interval scaled down: a
// correctly configured replica stays up probe after probe (and no probe starts a billable session); a
// wrong credential takes it down at once with reason "credential refused", counted apart.

type T = Test
type Json = Record<string, any>

const KEY = 'vendor-key-0123456789abcdef'
const ORG = 'd7934305-0972-4844-938e-9060eef73d05'
const INTERVAL = 0.25

const VENDORS: { kind: RealVendorKind; mapping: string; params: Json }[] = [
  { kind: 'deepgram', mapping: 'mappings/deepgram.yaml', params: {} },
  { kind: 'assemblyai', mapping: 'mappings/assemblyai.yaml', params: {} },
  { kind: 'twilio-media', mapping: 'mappings/twilio-media.yaml', params: {} },
  { kind: 'audiohook', mapping: 'mappings/audiohook.yaml', params: { organizationId: ORG, language: 'en-US' } }
]

async function emulator(t: T, kind: RealVendorKind): Promise<RealVendorEmulator> {
  const emu = await startRealVendor({ kind, apiKey: KEY, resultEveryMs: 0 })
  t.teardown(async () => await emu.close())
  return emu
}

/** A gateway with the default health settings but the interval (the helper's `kind: none` taken away). */
async function gateway(t: T, emu: RealVendorEmulator, v: (typeof VENDORS)[number], key: string): Promise<TestGateway> {
  return await startGateway(
    t,
    {
      health: { active: { kind: undefined, intervalSeconds: INTERVAL } },
      routes: {
        x: {
          mapping: v.mapping,
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [{ name: 'v', audio: emu.url, credential: '${VENDOR_KEY}' }],
          params: v.params
        }
      }
    },
    { VENDOR_KEY: key }
  )
}

/** One counter's value for route x, replica v, from /metrics (0 when absent). */
async function counter(gw: TestGateway, name: string, extra = ''): Promise<number> {
  const text = await (await fetch(gw.adminUrl('/metrics'))).text()
  const labels = `route="x",upstream="v"${extra}`
  const line = text.split('\n').find(l => l.startsWith(`assist_gateway_${name}{`) && l.includes(labels))
  return line === undefined ? 0 : Number(line.split(' ').pop())
}

async function replica(gw: TestGateway): Promise<Json> {
  const body = (await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as Json
  return { ...body.routes[0].replicas[0], probe: body.routes[0].probe }
}

const PROBES: Partial<Record<RealVendorKind, string>> = {
  deepgram: 'upgrade',
  assemblyai: 'http',
  'twilio-media': 'upgrade',
  audiohook: 'protocol'
}

for (const v of VENDORS) {
  t.test(`${v.kind}: the mapping's probe keeps a correct replica up over many intervals; calls connect`, async t => {
    const emu = await emulator(t, v.kind)
    const gw = await gateway(t, emu, v, KEY)
    t.ok(await until(async () => (await counter(gw, 'upstream_health_checks_total', ',result="ok"')) >= 6, 60_000))
    t.equal(await counter(gw, 'upstream_health_checks_total', ',result="failed"'), 0, 'no probe failed')
    t.equal(await counter(gw, 'upstream_health_checks_total', ',result="credential_refused"'), 0)
    const r = await replica(gw)
    t.equal(r.state, 'up')
    t.equal(r.probe, PROBES[v.kind], "/admin/upstreams names the route's probe")
    t.match(r.reason, /probe ok \(\d+ in a row\)/, 'the reason is the latest verdict, not "not probed yet"')
    t.equal((await fetch(gw.adminUrl('/readyz'))).status, 200)

    const leg = platformLeg(t, gw.url('/audio/x'), audioInit(9101))
    t.equal((await leg.answer).command, 'CONNECTED', 'a call connects while probes run')
    await stream(leg, 0, 10)
    leg.ws.close(1000)
    t.ok(await until(() => emu.sessions().some(s => s.audioBytes > 0 && s.closed)))

    // Probes never start a billable session: only the call's session carries audio or a started stream.
    const withAudio = emu.sessions().filter(s => s.audioBytes > 0)
    t.equal(withAudio.length, 1, 'one session with audio: the call')
    if (v.kind === 'assemblyai') {
      t.equal(emu.sessions().length, 1, 'no probe opened a session (billed on socket time)')
      const tokens = emu.httpRequests().filter(q => q.path === '/v3/token')
      t.ok(tokens.length >= 6 && tokens.every(q => q.status === 200), 'the probes asked for temporary tokens')
    } else if (v.kind === 'audiohook') {
      // A probe whose socket is open but whose `open` has not arrived yet is not known to be a probe: wait for it.
      t.ok(await until(() => emu.sessions().length === 1), 'the only billable session is the call')
      const probes = emu.probes()
      t.ok(probes.length >= 6, 'the connection probes are counted apart')
      const done = probes.filter(s => s.closed)
      t.same(
        done.flatMap(p => p.errors),
        [],
        'every probe is a correct AudioHook dialogue (no protocol error)'
      )
      t.ok(
        done.every(p => (p.texts as Json[]).map(m => m.type).join() === 'open,close'),
        'open (null conversation id) → opened → close → closed'
      )
      t.ok(done.every(p => (p.texts[0] as Json).parameters.conversationId === '00000000-0000-0000-0000-000000000000'))
    } else {
      const probes = emu.sessions().filter(s => s.audioBytes === 0)
      t.ok(probes.length >= 6, 'upgrade probes: sessions with nothing sent')
      const done = probes.filter(s => s.closed)
      t.ok(
        done.every(p => p.texts.length === 0 && p.closeCode === 1000),
        'nothing sent, closed 1000'
      )
      t.same(
        done.flatMap(p => p.errors),
        [],
        'and the vendor saw no protocol error'
      )
    }
    t.notMatch(JSON.stringify(emu.sessions().map(s => s.headers)), KEY, 'credentials redacted in the record')
    t.notMatch(gw.logs.raw, KEY, 'the credential is never logged')
  })

  t.test(`${v.kind}: a wrong credential marks the replica down with reason "credential refused"`, async t => {
    const emu = await emulator(t, v.kind)
    const gw = await gateway(t, emu, v, 'not-the-vendor-key')
    t.ok(await until(async () => (await replica(gw)).state === 'down', 60_000), 'down')
    const r = await replica(gw)
    t.match(r.reason, /^credential refused/, 'reason: credential refused')
    t.notMatch(r.reason, /not-the-vendor-key|127\.0\.0\.1/, 'the reason holds no credential and no URL')
    t.ok(
      (await counter(gw, 'upstream_health_checks_total', ',result="credential_refused"')) >= 1,
      'counted as a credential refusal'
    )
    t.equal((await fetch(gw.adminUrl('/readyz'))).status, 503)
    if (v.kind === 'audiohook') t.equal(emu.probes().length, 0, 'refused at the upgrade: no probe session')
    t.notMatch(gw.logs.raw, 'not-the-vendor-key', 'the credential is never logged')
  })
}
