import t, { type Test } from 'tap'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { WebSocketServer, type WebSocket } from 'ws'
import type { HealthSettings, RouteConfig, UpstreamConfig } from '../../gateway/config/types'
import { loadMapping } from '../../gateway/mapping/compile'
import { probeKind, probePlan } from '../../gateway/mapping/health'
import { MemoryStore } from '../../gateway/store/memory'
import { Prober } from '../../gateway/upstream/health'
import { UpstreamPool } from '../../gateway/upstream/pool'
import { runProbe } from '../../gateway/upstream/probes'
import { FakeClock, flush } from '../helpers/fake-clock'
import { health } from '../helpers/replicas'

// The probe runner and the prober over a tiny real vendor (HTTP + WebSocket on port 0), the prober's
// interval on the fake clock.

type Json = Record<string, any>

const ACTIVE: HealthSettings['active'] = {
  path: '/',
  intervalSeconds: 5,
  timeoutSeconds: 2,
  unhealthyThreshold: 3,
  healthyThreshold: 2
}
const KEY = 'probe-unit-key-0123'
const NULL_ID = '00000000-0000-0000-0000-000000000000'

interface Vendor {
  ws: string
  http: string
  /** What the vendor answers; changeable mid-test. */
  key: string
  /** AudioHook-like: how to answer an open. */
  openAnswer: 'opened' | 'unauthorized' | 'error'
  upgrades: IncomingMessage[]
  texts: Json[]
}

/** A vendor that checks `x-api-key` at the upgrade and on GET /account, and speaks a tiny open/close dialogue. */
async function vendor(t: Test): Promise<Vendor> {
  const v = { key: KEY, openAnswer: 'opened', upgrades: [], texts: [] } as unknown as Vendor
  const server = createServer((req, res) => {
    res.statusCode = req.headers['x-api-key'] === v.key ? 200 : 401
    res.end()
  })
  const wss = new WebSocketServer({ noServer: true })
  server.on('upgrade', (req, socket, head) => {
    v.upgrades.push(req)
    if (req.headers['x-api-key'] !== v.key) {
      socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n')
      return
    }
    wss.handleUpgrade(req, socket, head, (ws: WebSocket) =>
      ws.on('message', data => {
        const m = JSON.parse(data.toString()) as Json
        v.texts.push(m)
        if (m.type === 'open') {
          if (v.openAnswer === 'opened') ws.send(JSON.stringify({ type: 'pong' })) // ignored, not the answer
          ws.send(
            JSON.stringify(
              v.openAnswer === 'opened'
                ? { type: 'opened', seq: 7 }
                : {
                    type: 'disconnect',
                    parameters: { reason: v.openAnswer === 'unauthorized' ? 'unauthorized' : 'error' }
                  }
            )
          )
        }
        if (m.type === 'close') ws.send(JSON.stringify({ type: 'closed', seq: 8 }))
      })
    )
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    wss.close()
    server.closeAllConnections()
    server.close()
  })
  const port = (server.address() as AddressInfo).port
  v.ws = `ws://127.0.0.1:${port}/stream`
  v.http = `http://127.0.0.1:${port}`
  return v
}

const upstream = (v: Vendor): UpstreamConfig => ({
  name: 'a',
  audio: v.ws,
  credential: KEY,
  headers: {},
  weight: 1,
  maxStreams: 1,
  maxPendingHandshakes: 1,
  maxInFlight: 1
})

const route = (v: Vendor, mapping: string, extra: Partial<RouteConfig> = {}): RouteConfig => ({
  name: 'r',
  default: false,
  async: false,
  mapping,
  auth: {},
  params: {},
  upstreams: [upstream(v)],
  ...extra
})

const MAPPING = 'tests/fixtures/probe-mapping.yaml'

t.test('which probe a route runs: route > explicit health.active.kind > mapping > upgrade', async t => {
  const m = loadMapping('mappings/audiohook.yaml')
  const r = { name: 'r', params: {} } as unknown as RouteConfig
  t.equal(probeKind(r, m, ACTIVE), 'protocol', "the mapping's own")
  t.equal(probeKind(r, m, { ...ACTIVE, kind: 'ws' }), 'upgrade', 'ws is the old name of upgrade')
  t.equal(probeKind(r, m, { ...ACTIVE, kind: 'none' }), 'none')
  t.equal(probeKind({ ...r, health: { kind: 'tcp' } }, m, { ...ACTIVE, kind: 'none' }), 'tcp', 'the route wins')
  t.equal(probeKind({ ...r, health: { kind: 'mapping' } }, m, { ...ACTIVE, kind: 'none' }), 'protocol')
  t.equal(probeKind(r, { ...m, health: null }, ACTIVE), 'upgrade', 'no health section: upgrade')
  t.throws(
    () => probePlan({ ...r, health: { kind: 'protocol' } }, loadMapping('mappings/deepgram.yaml'), ACTIVE),
    /protocol probe needs health.steps/
  )
})

t.test('upgrade, http and tcp probes: 401/403 are credential refusals; no URL or key in a reason', async t => {
  const v = await vendor(t)
  const m = loadMapping('mappings/deepgram.yaml')
  const u = { ...upstream(v), headers: { 'x-api-key': KEY } }
  const up = probePlan(route(v, m.file), m, ACTIVE)
  t.same(await runProbe(up, u, 2000), { ok: true })
  t.equal(v.upgrades.at(-1)!.url?.startsWith('/stream?encoding=mulaw'), true, "the mapping's URL expression")
  t.equal(v.upgrades.at(-1)!.headers.authorization, `Token ${KEY}`, "the mapping's header expression")
  const http = probePlan(route(v, m.file, { health: { kind: 'http', path: '/account' } }), m, ACTIVE)
  t.same(await runProbe(http, u, 2000), { ok: true })
  const tcp = probePlan(route(v, m.file, { health: { kind: 'tcp' } }), m, ACTIVE)
  t.same(await runProbe(tcp, u, 2000), { ok: true })
  v.key = 'rotated-key'
  const refusedUp = await runProbe(up, u, 2000)
  t.same(refusedUp, { ok: false, reason: 'credential refused (upgrade answered 403)', credentialRefused: true })
  t.same(await runProbe(http, u, 2000), { ok: false, reason: 'credential refused (HTTP 401)', credentialRefused: true })
  t.same(await runProbe(tcp, u, 2000), { ok: true }, 'tcp checks reachability only')
  const gone = await runProbe(tcp, { ...u, audio: 'ws://127.0.0.1:1/x' }, 2000)
  t.match(gone, { ok: false, credentialRefused: false, reason: 'ECONNREFUSED' })
})

t.test('protocol probe: the steps in order on the probe input; refused and failed answers', async t => {
  const v = await vendor(t)
  const m = loadMapping(MAPPING)
  const plan = probePlan(route(v, m.file), m, ACTIVE)
  t.equal(plan.kind, 'protocol')
  t.same(await runProbe(plan, upstream(v), 2000), { ok: true })
  t.same(
    v.texts.map(x => [x.type, x.probe, x.serverseq]),
    [
      ['open', true, 0],
      ['close', true, 7]
    ],
    'open with init.probe, then close naming the seq of the matched answer (msg)'
  )
  t.equal(v.texts[0].conversationId, NULL_ID)
  t.equal(v.texts[0].session, v.texts[1].session, 'one session id per probe')
  t.match(
    v.texts[0].leg,
    /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    'a plain UUID, as a real leg id'
  )
  t.same(await runProbe(plan, upstream(v), 2000), { ok: true })
  t.not(v.texts[2].session, v.texts[0].session, 'a fresh session id for each probe')
  v.openAnswer = 'unauthorized'
  t.match(await runProbe(plan, upstream(v), 2000), {
    ok: false,
    credentialRefused: true,
    reason: /^credential refused/
  })
  v.openAnswer = 'error'
  t.match(await runProbe(plan, upstream(v), 2000), { ok: false, credentialRefused: false })
})

t.test('prober: a credential refusal is down at once; the reason is always the latest verdict', async t => {
  const v = await vendor(t)
  const m = loadMapping(MAPPING)
  const rc = route(v, m.file)
  const clock = new FakeClock()
  const store = new MemoryStore('i1')
  const pool = new UpstreamPool(rc, store, health(ACTIVE, 5), clock)
  store.onSync(() => pool.refreshProbes())
  const a = pool.byName('a')!
  const seen: [boolean, boolean][] = []
  const verdicts: string[] = []
  let checked!: () => void
  let round = new Promise<void>(resolve => {
    checked = resolve
  })
  const prober = new Prober(
    [pool],
    ACTIVE,
    store,
    {
      checked: (_r, ok, refused) => {
        seen.push([ok, refused])
        checked()
      },
      changed: (_r, state, reason) => verdicts.push(`${state}: ${reason}`)
    },
    clock,
    new Map([[pool, probePlan(rc, m, ACTIVE)]])
  )
  t.teardown(() => prober.stop())
  const tick = async (): Promise<void> => {
    round = new Promise<void>(resolve => {
      checked = resolve
    })
    clock.advance(5000)
    await round
    await flush()
  }
  prober.start()
  await round
  await flush()
  await tick()
  t.match(a.describe(), { state: 'up', reason: 'protocol probe ok (2 in a row)' }, 'not "not probed yet"')
  v.openAnswer = 'unauthorized'
  await tick()
  t.same(seen.at(-1), [false, true])
  t.match(verdicts, [/^down: credential refused/], 'down after one refusal, whatever unhealthyThreshold says')
  t.match(a.describe(), { state: 'down', reason: /^credential refused/ })
  t.equal(a.healthy, false)
  v.openAnswer = 'opened'
  await tick()
  t.match(a.describe(), { state: 'down', reason: 'down; 1 of 2 good protocol probes' })
  await tick()
  t.match(verdicts.at(-1), /^up: protocol probe ok/)
  v.openAnswer = 'error'
  await tick()
  t.match(a.describe(), { state: 'up', reason: /^up; 1 of 3 failed protocol probes/ })
})

t.test('a route whose probe is none is never probed', async t => {
  const v = await vendor(t)
  const m = loadMapping(MAPPING)
  const rc = route(v, m.file, { health: { kind: 'none' } })
  const clock = new FakeClock()
  const store = new MemoryStore('i1')
  const pool = new UpstreamPool(rc, store, health(ACTIVE, 5), clock)
  const prober = new Prober(
    [pool],
    ACTIVE,
    store,
    { checked: () => t.fail('probed'), changed: () => {} },
    clock,
    new Map([[pool, probePlan(rc, m, ACTIVE)]])
  )
  prober.start()
  t.equal(clock.pending, 0, 'no interval armed')
  await prober.round()
  t.equal(v.upgrades.length, 0)
})
