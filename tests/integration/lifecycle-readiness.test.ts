import t from 'tap'
import { routeTo, startGateway, startVendor, until } from '../helpers/gateway'

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
    (await (await fetch(gw.adminUrl('/readyz?verbose'))).json()) as Record<string, any>
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
