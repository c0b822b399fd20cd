import t, { type Test } from 'tap'
import { startRealVendor, type RealVendorEmulator, type RealVendorKind } from '../../gateway/tools/real-vendors'
import { startGateway, until, type TestGateway } from '../helpers/gateway'

// The health probe of each mapping added for Amazon Transcribe, Speechmatics and OpenAI Realtime, against its
// strict emulator (the four older vendors: health-probes.test.ts). A correct credential keeps the replica up
// probe after probe and starts no billable session; a wrong one takes it down as "credential refused".

type T = Test
type Json = Record<string, any>

const KEY = 'vendor-key-0123456789abcdef'
const AWS = { accessKeyId: 'AKIAPROBE00000000001', secretAccessKey: 'probe-secret-key' }

const VENDORS: { kind: RealVendorKind; mapping: string; probe: string }[] = [
  { kind: 'amazon-transcribe', mapping: 'mappings/amazon-transcribe.yaml', probe: 'upgrade' },
  { kind: 'speechmatics', mapping: 'mappings/speechmatics.yaml', probe: 'upgrade' },
  { kind: 'openai', mapping: 'mappings/openai-realtime.yaml', probe: 'http' }
]

async function setup(
  t: T,
  v: (typeof VENDORS)[number],
  right: boolean
): Promise<{ emu: RealVendorEmulator; gw: TestGateway }> {
  const emu = await startRealVendor({ kind: v.kind, apiKey: KEY, aws: AWS, resultEveryMs: 0 })
  t.teardown(async () => await emu.close())
  const aws = v.kind === 'amazon-transcribe'
  const gw = await startGateway(
    t,
    {
      health: { active: { kind: undefined, intervalSeconds: 0.25 } },
      routes: {
        x: {
          mapping: v.mapping,
          params: { region: 'us-east-1' },
          upstreams: [
            aws
              ? { name: 'v', audio: emu.url, signing: { accessKeyId: '${KEY_ID}', secretAccessKey: '${VENDOR_KEY}' } }
              : { name: 'v', audio: emu.url, credential: '${VENDOR_KEY}' }
          ]
        }
      }
    },
    { VENDOR_KEY: right ? (aws ? AWS.secretAccessKey : KEY) : 'not-the-key', KEY_ID: AWS.accessKeyId }
  )
  return { emu, gw }
}

async function replica(gw: TestGateway): Promise<Json> {
  const body = (await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as Json
  return { ...body.routes[0].replicas[0], probe: body.routes[0].probe }
}

for (const v of VENDORS) {
  t.test(`${v.kind}: the probe keeps a correct replica up and starts no session`, async t => {
    const { emu, gw } = await setup(t, v, true)
    t.ok(await until(async () => /probe ok \((\d{2,}|[4-9]) in a row\)/.test((await replica(gw)).reason), 20_000))
    const r = await replica(gw)
    t.equal(r.state, 'up')
    t.equal(r.probe, v.probe)
    t.ok(
      emu.sessions().every(s => s.audioBytes === 0 && s.texts.length === 0 && s.errors.length === 0),
      'no probe sent a frame or broke the protocol'
    )
    if (v.kind === 'openai') t.ok(emu.httpRequests().every(q => q.path === '/v1/models' && q.status === 200))
    t.notOk(gw.logs.raw.includes(KEY) || gw.logs.raw.includes(AWS.secretAccessKey), 'no credential logged')
  })

  t.test(`${v.kind}: a wrong credential marks the replica down: "credential refused"`, async t => {
    const { gw } = await setup(t, v, false)
    t.ok(await until(async () => (await replica(gw)).state === 'down', 20_000), 'down')
    t.match((await replica(gw)).reason, /^credential refused/)
  })
}
