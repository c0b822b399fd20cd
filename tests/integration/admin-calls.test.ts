import t from 'tap'
import { randomUUID } from 'node:crypto'
import type { CallsAnswer } from '../../gateway/cli-calls'
import { initMessage } from '../../gateway/tools/simulate'
import { uniqueFrame } from '../helpers/audio'
import { runCli } from '../helpers/cli'
import { AUDIO_TOKEN, platformLeg, roundTrip, routeTo, startGateway, startVendor, until } from '../helpers/gateway'
import { refusedPorts, spawnGateway } from '../helpers/process'
import { needRedis } from '../helpers/redis'

// GET /admin/calls and `assist-gateway calls`: where a contact's legs are, through the store.

const init = (contactId: number, perspective: 'TX' | 'RX' = 'TX'): Record<string, unknown> =>
  initMessage({ token: AUDIO_TOKEN, contactId, busNo: 4594, perspective })

type Call = CallsAnswer['calls'][number]

async function calls(adminUrl: (p: string) => string, contact: number | string, token?: string): Promise<CallsAnswer> {
  const r = await fetch(adminUrl(`/admin/calls?contactId=${contact}`), {
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` }
  })
  if (r.status !== 200) throw new Error(`GET /admin/calls answered ${r.status}: ${await r.text()}`)
  return (await r.json()) as CallsAnswer
}

const ADMIN_TOKEN = 'admin-token-0123456789abcdef'

t.test(
  'one instance: a live leg, then parked, then re-attached; 400 on a bad contactId; 401 without the token',
  async t => {
    const vendor = await startVendor(t, { kind: 'json-events', resultEveryFrames: 5 })
    const gw = await startGateway(
      t,
      {
        admin: { host: '0.0.0.0', token: '${ADMIN_TOKEN}' },
        audio: { reattachGraceSeconds: 30 },
        routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
      },
      { ADMIN_TOKEN }
    )
    const unauthorized = await fetch(gw.adminUrl('/admin/calls?contactId=9001'))
    t.equal(unauthorized.status, 401, 'not on loopback: no answer without the token')
    t.match(await unauthorized.json(), { code: 'ADMIN_UNAUTHORIZED' })
    for (const q of ['', '?contactId=', '?contactId=abc', '?contactId=12a', '?other=1']) {
      const r = await fetch(gw.adminUrl(`/admin/calls${q}`), { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
      t.equal(r.status, 400, `${q || '(no query)'}: 400`)
      t.match(await r.json(), { code: 'QUERY_INVALID', status: 400, pointers: ['contactId'] })
    }
    t.same((await calls(gw.adminUrl, 9001, ADMIN_TOKEN)).calls, [], 'no leg yet')

    const leg = platformLeg(t, gw.url('/audio/demo'), init(9001))
    t.equal((await leg.answer).command, 'CONNECTED')
    for (let i = 0; i < 30; i++) leg.send(uniqueFrame(1, i))
    await until(() => vendor.sessions()[0]?.bytes === 30 * 160)
    await until(() => leg.messages.length > 0)
    await roundTrip(leg.ws)
    // A worker publishes its legs' records every few seconds (store.syncIntervalSeconds): polled for.
    await until(async () => (await calls(gw.adminUrl, 9001, ADMIN_TOKEN)).calls[0]?.framesFromPlatform === 30)
    const live = await calls(gw.adminUrl, 9001, ADMIN_TOKEN)
    t.equal(live.calls.length, 1)
    t.match(live.calls[0], {
      contactId: '9001',
      instance: gw.instance,
      // The process serving it: one of the instance's workers (`<instance>/w<n>.<pid>`), or the instance itself.
      process: gw.workers > 1 ? new RegExp(`^${gw.instance}/w\\d+\\.\\d+$`) : gw.instance,
      worker: gw.workers > 1 ? Number : null,
      route: 'demo',
      perspective: 'TX',
      state: 'STREAMING',
      replica: 'r0',
      framesFromPlatform: 30,
      bytesFromPlatform: 30 * 160,
      lastFrameAgeMs: Number,
      failovers: 0,
      gapMs: 0,
      resultsSent: leg.messages.length,
      startedAt: /^\d{4}-\d\d-\d\dT/
    })
    t.notOk('at' in live.calls[0], 'the store’s own timestamp is not part of the answer')

    leg.ws.close(1000)
    await leg.closed
    t.ok(
      await until(async () => (await calls(gw.adminUrl, 9001, ADMIN_TOKEN)).calls[0]?.state === 'PARKED'),
      'its leg gone, the parked session is still listed (PARKED)'
    )
    const back = platformLeg(t, gw.url('/audio/demo'), init(9001))
    t.equal((await back.answer).command, 'CONNECTED')
    // The returning leg may land on the worker that holds the parked session, or on the other one, which
    // relays it there: then the contact has two records, the relaying leg's and its owner's.
    // Judged on the answer that settled (each worker publishes its records on its own tick: a later read
    // may catch one worker's records between two publications).
    let after: Awaited<ReturnType<typeof calls>>['calls'] = []
    const settled = async (): Promise<boolean> => {
      after = (await calls(gw.adminUrl, 9001, ADMIN_TOKEN)).calls
      return (
        after.some(c => c.state === 'STREAMING') && after.every(c => c.state === 'STREAMING' || c.state === 'RELAYING')
      )
    }
    t.ok(await until(settled), 'the re-attached leg is listed as served (and its relay, if it landed elsewhere)')
    t.notOk(
      after.some(c => c.state === 'PARKED'),
      'the re-attached leg replaces the parked record'
    )
    const owner = after.find(c => c.state === 'STREAMING')
    t.match(owner, { framesFromPlatform: 0 }, 'the session is served again')
    const relaying = after.filter(c => c.state === 'RELAYING')
    t.equal(after.length, 1 + relaying.length, 'one record, or the relaying leg and its owner')
    for (const r of relaying) t.equal(r.relayedTo, owner?.process, 'relayed to the process that holds the session')
    t.not(owner?.legId, live.calls[0].legId)
    t.same((await calls(gw.adminUrl, 9002, ADMIN_TOKEN)).calls, [], 'another contact: nothing')
  }
)

t.test('two instances on Redis: either answers for the legs of both', async t => {
  const vendor = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const cfg = {
    redis: await needRedis(),
    store: { keyPrefix: `test:${randomUUID()}:`, syncIntervalSeconds: 0.2, leaseSeconds: 10 },
    routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
  }
  const g1 = await startGateway(t, cfg)
  const g2 = await startGateway(t, cfg)
  const contact = 9100 + Math.floor(Math.random() * 1000)
  const tx = platformLeg(t, g1.url('/audio/demo'), init(contact, 'TX'))
  const rx = platformLeg(t, g2.url('/audio/demo'), init(contact, 'RX'))
  t.equal((await tx.answer).command, 'CONNECTED')
  t.equal((await rx.answer).command, 'CONNECTED')
  for (const g of [g1, g2]) {
    await until(async () => (await calls(g.adminUrl, contact)).calls.length === 2)
    const a = await calls(g.adminUrl, contact)
    t.equal(a.store, 'redis')
    t.same(
      a.calls.map(c => [c.instance, c.perspective]).sort(),
      [
        [g1.instance, 'TX'],
        [g2.instance, 'RX']
      ].sort(),
      'both legs, each on its own instance'
    )
  }
  // ?all (the status page's list): every contact's legs, fleet-wide, from the index beside the records.
  const listed = async (g: typeof g1): Promise<{ all: boolean; more: boolean; calls: Call[] }> =>
    (await (await fetch(g.adminUrl('/admin/calls?all'))).json()) as { all: boolean; more: boolean; calls: Call[] }
  for (const g of [g1, g2]) {
    const all = await listed(g)
    t.match(all, { all: true, more: false, store: 'redis' })
    t.same(all.calls.map(c => c.perspective).sort(), ['RX', 'TX'], '?all: both legs, from either instance')
  }
  rx.ws.close(1000)
  await rx.closed
  t.ok(
    await until(async () => (await calls(g1.adminUrl, contact)).calls.length === 1),
    'a leg that ended is gone from the fleet’s answer'
  )
  t.same(
    (await listed(g2)).calls.map(c => c.perspective),
    ['TX'],
    'and from the list'
  )
})

t.test('serve --workers 2: the main process answers for every worker; the CLI prints it', async t => {
  const vendor = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const gw = await spawnGateway(
    t,
    {
      health: { active: { kind: 'none' } },
      audio: { reattachGraceSeconds: 0 },
      routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
    },
    { GATEWAY_WORKERS: '2' }
  )
  const legs = Array.from({ length: 8 }, (_, i) => platformLeg(t, gw.url('/audio/demo'), init(9300 + i)))
  for (const leg of legs) t.equal((await leg.answer).command, 'CONNECTED')
  const seen = new Map<number, Call>()
  t.ok(
    await until(async () => {
      for (let i = 0; i < legs.length; i++) {
        const a = await calls(gw.adminUrl, 9300 + i)
        if (a.calls.length === 1) seen.set(i, a.calls[0])
      }
      return seen.size === legs.length
    }),
    'every leg is found through the main process (records reach it within a refresh)'
  )
  const workers = new Set([...seen.values()].map(c => c.worker))
  t.ok(
    [...workers].every(w => w === 0 || w === 1),
    'each record names its worker'
  )
  t.equal(workers.size, 2, 'the legs are on both workers, and both answer')
  t.equal(new Set([...seen.values()].map(c => c.instance)).size, 1, 'one instance: the main process’s id')

  const base = gw.adminUrl('')
  const table = await runCli(['calls', '--admin', base, '--contact', '9300'])
  t.equal(table.code, 0, table.stderr)
  const lines = table.stdout.trim().split('\n')
  t.match(
    lines[0],
    /^INSTANCE\s+WORKER\s+ROUTE\s+PERSP\s+STATE\s+REPLICA\s+STARTED\s+FRAMES\s+BYTES\s+LAST FRAME\s+FAILOVERS\s+GAP MS\s+RESULTS$/
  )
  t.equal(lines.length, 2, 'one row per leg')
  t.match(lines[1], new RegExp(`^\\S+\\s+${seen.get(0)!.worker}\\s+demo\\s+TX\\s+STREAMING\\s+r0\\s`))
  const json = await runCli(['calls', '--admin', base, '--contact', '9300', '--json'])
  t.equal(json.code, 0)
  t.match(JSON.parse(json.stdout), { contactId: '9300', store: 'workers', calls: [{ route: 'demo' }] })
  const none = await runCli(['calls', '--admin', base, '--contact', '1'])
  t.equal(none.code, 0)
  t.match(none.stdout, /no live or parked leg of contact 1/)

  legs[0].ws.close(1000)
  await legs[0].closed
  t.ok(await until(async () => (await calls(gw.adminUrl, 9300)).calls.length === 0), 'an ended leg goes')
  for (const leg of legs) leg.ws.close(1000)
})

t.test('the calls command: its usage errors, an unreachable admin API, a 401', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(
    t,
    {
      admin: { host: '0.0.0.0', token: '${ADMIN_TOKEN}' },
      routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
    },
    { ADMIN_TOKEN }
  )
  const base = gw.adminUrl('')
  const usage = await runCli(['calls', '--admin', base, '--contact', 'abc'])
  t.equal(usage.code, 2)
  t.match(usage.stderr, /--contact must be a contact id \(digits\), not "abc"[\s\S]*usage: assist-gateway calls /)
  t.equal((await runCli(['calls', '--contact', '1'])).code, 2, '--admin is required')
  const refused = await runCli(['calls', '--admin', base, '--contact', '1'])
  t.equal(refused.code, 1)
  t.match(refused.stderr, /401 ADMIN_UNAUTHORIZED[\s\S]*--token or \$GATEWAY_ADMIN_TOKEN/)
  const wrong = await runCli(['calls', '--admin', base, '--contact', '1', '--token', 'not-the-token-xyz'])
  t.equal(wrong.code, 1)
  t.notMatch(wrong.stderr + wrong.stdout, /not-the-token-xyz/, 'the token is never printed')
  const fromEnv = await runCli(['calls', '--admin', base, '--contact', '1'], { GATEWAY_ADMIN_TOKEN: ADMIN_TOKEN })
  t.equal(fromEnv.code, 0, 'the token from $GATEWAY_ADMIN_TOKEN')
  t.notMatch(fromEnv.stdout + fromEnv.stderr, new RegExp(ADMIN_TOKEN))
  const [nobody] = await refusedPorts(1)
  const down = await runCli(['calls', '--admin', `http://127.0.0.1:${nobody}`, '--contact', '1'])
  t.equal(down.code, 1)
  t.match(down.stderr, new RegExp(`cannot reach the admin API at http://127\\.0\\.0\\.1:${nobody}: ECONNREFUSED`))
})
