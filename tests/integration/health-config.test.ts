import t from 'tap'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { startGateway, until, type TestGateway } from '../helpers/gateway'

// The config keys that choose probes keep working next to the mapping's `health` section: a route's own
// `health.probe` wins, an explicit `health.active.kind` (the old key) applies to every other route.

type Json = Record<string, any>

const KEY = 'dg-key-config-0123456789'

async function checks(gw: TestGateway, route: string, result: string): Promise<number> {
  const text = await (await fetch(gw.adminUrl('/metrics'))).text()
  const line = text
    .split('\n')
    .find(
      l =>
        l.startsWith('assist_gateway_upstream_health_checks_total{') &&
        l.includes(`route="${route}"`) &&
        l.includes(`result="${result}"`)
    )
  return line === undefined ? 0 : Number(line.split(' ').pop())
}

async function routes(gw: TestGateway): Promise<Record<string, Json>> {
  const body = (await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as Json
  return Object.fromEntries((body.routes as Json[]).map(r => [r.route, r]))
}

t.test("a route's own health.probe overrides its mapping's; the others keep the mapping's", async t => {
  const emu = await startRealVendor({ kind: 'deepgram', apiKey: KEY })
  t.teardown(async () => await emu.close())
  const upstreams = [{ name: 'v', audio: emu.url, credential: '${VENDOR_KEY}' }]
  const gw = await startGateway(
    t,
    {
      health: { active: { kind: undefined, intervalSeconds: 0.25 } },
      routes: {
        quiet: { mapping: 'mappings/deepgram.yaml', upstreams, health: { kind: 'none' } },
        tcp: { mapping: 'mappings/deepgram.yaml', upstreams, health: { kind: 'tcp' } },
        own: { mapping: 'mappings/deepgram.yaml', upstreams }
      }
    },
    { VENDOR_KEY: KEY }
  )
  t.ok(await until(async () => (await checks(gw, 'own', 'ok')) >= 4 && (await checks(gw, 'tcp', 'ok')) >= 4, 60_000))
  t.equal(await checks(gw, 'quiet', 'ok'), 0, 'kind: none is never probed')
  const r = await routes(gw)
  t.same([r.quiet.probe, r.tcp.probe, r.own.probe], ['none', 'tcp', 'upgrade'])
  t.equal(r.quiet.replicas[0].state, 'up', 'passive health only: up')
})

t.test('the old health.active keys still work: kind http + path for every route without its own', async t => {
  const emu = await startRealVendor({ kind: 'deepgram', apiKey: KEY })
  t.teardown(async () => await emu.close())
  const gw = await startGateway(
    t,
    {
      health: { active: { kind: 'http', path: '/healthz', intervalSeconds: 0.25 } },
      routes: {
        x: {
          mapping: 'mappings/deepgram.yaml',
          upstreams: [{ name: 'v', audio: emu.url, credential: '${VENDOR_KEY}' }]
        }
      }
    },
    { VENDOR_KEY: KEY }
  )
  t.ok(
    await until(async () => (await checks(gw, 'x', 'ok')) >= 4, 60_000),
    'GET /healthz answered 200, probe after probe'
  )
  const r = await routes(gw)
  t.equal(r.x.probe, 'http')
  t.equal(r.x.replicas[0].state, 'up')
  t.equal(emu.sessions().length, 0, 'no upgrade was made')
})
