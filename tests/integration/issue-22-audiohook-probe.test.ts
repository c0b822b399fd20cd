import t, { type Test } from 'tap'
import { startRealVendor, type RealVendorEmulator } from '../../gateway/tools/real-vendors'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, platformLeg, startGateway, until, type TestGateway } from '../helpers/gateway'
import { stream } from '../helpers/audio'

// Issue 22, the AudioHook connection probe, against the emulator made as strict as the reference server
// (purecloudlabs/audiohook-reference-implementation 2871b01, app/src/create-audiohook-session.ts: after the
// upgrade, audiohook-session-id, -correlation-id and -organization-id must each pass isUuid, else it throws and
// the socket is cut, 1006). (1) The probe's Audiohook-Correlation-Id was "probe-<uuid>": every probe was cut
// and the replica marked down. (2) A stereo (join) route's probe offered one channel; it offers what the
// route's calls offer.

type T = Test
type Json = Record<string, any>

const KEY = 'ah-key-issue-22'
const ORG = '2b1f3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d'

async function setup(t: T, mapping: string, join?: Json): Promise<{ emu: RealVendorEmulator; gw: TestGateway }> {
  const emu = await startRealVendor({ kind: 'audiohook', apiKey: KEY, resultEveryMs: 0 })
  t.teardown(async () => await emu.close())
  const gw = await startGateway(
    t,
    {
      health: { active: { kind: undefined, intervalSeconds: 0.25 } },
      routes: {
        x: {
          mapping,
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [{ name: 'v', audio: emu.url, credential: '${AH_KEY}' }],
          params: { organizationId: ORG },
          ...(join === undefined ? {} : { join })
        }
      }
    },
    { AH_KEY: KEY }
  )
  return { emu, gw }
}

async function replica(gw: TestGateway): Promise<Json> {
  const body = (await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as Json
  return body.routes[0].replicas[0]
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

t.test(
  'audiohook: the probe names its correlation with a UUID; the reference-strict server keeps the replica up',
  async t => {
    const { emu, gw } = await setup(t, 'mappings/audiohook.yaml')
    t.ok(
      await until(async () => /probe ok \((\d{2,}|[4-9]) in a row\)/.test((await replica(gw)).reason), 20_000),
      'probes pass'
    )
    t.equal((await replica(gw)).state, 'up')
    const probes = emu.probes().filter(p => p.closed)
    t.ok(probes.length >= 4)
    t.ok(
      probes.every(p => UUID.test(p.headers['audiohook-correlation-id'])),
      'Audiohook-Correlation-Id is a UUID'
    )
    t.same(
      probes.flatMap(p => p.errors),
      [],
      'no probe was cut'
    )
    // A socket cut before its open is not a probe: it would show as a closed session. (A probe still
    // connecting, its open not yet sent, shows as an open one.)
    t.equal(
      emu.sessions().filter(s => s.closed).length,
      0,
      'no probe was cut before its open (a cut socket is no probe)'
    )
  }
)

t.test('audiohook stereo: the probe offers the two channels a call offers, in the same order', async t => {
  const { emu, gw } = await setup(t, 'mappings/audiohook-stereo.yaml', { channels: ['TX', 'RX'], waitSeconds: 1 })
  t.ok(await until(async () => (await replica(gw)).state === 'up' && emu.probes().some(p => p.closed), 20_000))
  const open = (m: Json): Json => m.parameters.media
  const probeMedia = open(emu.probes()[0].texts[0] as Json)
  t.same(probeMedia, [{ type: 'audio', format: 'PCMU', channels: ['external', 'internal'], rate: 8000 }])
  const init = (perspective: string): Json =>
    initMessage({ token: AUDIO_TOKEN, contactId: 8231, busNo: 4594, perspective })
  const tx = platformLeg(t, gw.url('/audio/x'), init('TX'))
  const rx = platformLeg(t, gw.url('/audio/x'), init('RX'))
  t.equal((await tx.answer).command, 'CONNECTED')
  t.equal((await rx.answer).command, 'CONNECTED')
  await Promise.all([stream(tx, 0, 10), stream(rx, 0, 10)])
  t.ok(await until(() => emu.sessions().length === 1 && (emu.sessions()[0].texts as Json[]).length > 0, 5000))
  t.same(open(emu.sessions()[0].texts[0] as Json), probeMedia, "the call's open offers the same medium")
  tx.ws.close(1000)
  rx.ws.close(1000)
})
