import t from 'tap'
import { randomUUID } from 'node:crypto'
import { sha256, stream } from '../helpers/audio'
import { platformLeg, routeTo, startGateway, startVendor, until } from '../helpers/gateway'
import { spawnGateway } from '../helpers/process'
import { haveRedisServer, startRedis } from '../helpers/redis-servers'
import { audioInit } from '../helpers/legs'

// Readiness by convention: one vendor's outage never makes the instance unready; no servable route does.
t.test('/readyz: 200 while one route has no replica (verbose says which), 503 when no route can take work', async t => {
  const up = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const down = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const gw = await startGateway(t, {
    health: {
      active: {
        kind: 'http',
        path: '/healthz',
        intervalSeconds: 0.2,
        timeoutSeconds: 10,
        unhealthyThreshold: 1,
        healthyThreshold: 1
      }
    },
    routes: {
      good: routeTo([up], 'mappings/json-events.yaml'),
      bad: routeTo([down], 'mappings/json-events.yaml')
    }
  })
  const verbose = async (): Promise<Record<string, any>> =>
    (await (await fetch(gw.adminUrl('/admin/readiness'))).json()) as Record<string, any>
  await down.close()
  t.ok(await until(async () => (await verbose()).degraded.length === 1), 'the route without a replica is seen')
  const ready = await fetch(gw.adminUrl('/readyz'))
  t.equal(ready.status, 200, 'one vendor outage leaves the instance ready')
  t.same(await ready.json(), { ready: true, reasons: [] })
  const v = await verbose()
  t.match(v, {
    ready: true,
    store: { kind: 'memory', up: true },
    degraded: ['route bad: no replica can take new work'],
    routes: [
      { route: 'good', servable: true },
      { route: 'bad', servable: false, replicas: [{ name: 'r0', healthy: false }] }
    ]
  })

  await up.close()
  t.ok(await until(async () => (await fetch(gw.adminUrl('/readyz'))).status === 503), 'no servable route: not ready')
  t.match(await (await fetch(gw.adminUrl('/readyz'))).json(), { ready: false, reasons: [/no route can take new work/] })
})

t.test(
  'Redis down (a gateway process, a private redis-server killed): /readyz 200, live and new legs served, store_up 0',
  { skip: haveRedisServer ? false : 'redis-server and redis-cli are not installed' },
  async t => {
    const redis = await startRedis(t)
    const v = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const g = await spawnGateway(t, {
      redis: `redis://127.0.0.1:${redis.port}`,
      store: { keyPrefix: `test:${randomUUID()}:`, syncIntervalSeconds: 0.2 },
      health: { active: { kind: 'none' } },
      routes: { demo: routeTo([v], 'mappings/json-events.yaml') }
    })
    const metrics = async (): Promise<string> => await (await fetch(g.adminUrl('/metrics'))).text()
    t.ok(await until(async () => (await metrics()).includes('assist_gateway_store_up 1')), 'sharing through Redis')
    const live = platformLeg(t, g.url('/audio/demo'), audioInit(960001))
    t.equal((await live.answer).command, 'CONNECTED')

    await redis.kill()
    t.ok(await until(async () => (await metrics()).includes('assist_gateway_store_up 0')), 'store_up 0')
    const ready = await fetch(g.adminUrl('/readyz'))
    t.equal(ready.status, 200, 'still ready')
    t.match(await (await fetch(g.adminUrl('/admin/readiness'))).json(), { store: { kind: 'redis', up: false } })
    const sent = await stream(live, 0, 10)
    t.ok(await until(() => v.sessions()[0]?.bytes === 10 * 160), 'the live leg goes on')
    t.equal(v.sessions()[0].sha256, sha256(sent))
    const fresh = platformLeg(t, g.url('/audio/demo'), audioInit(960002))
    t.equal((await fresh.answer).command, 'CONNECTED', 'a new leg is served on local state')
  }
)
