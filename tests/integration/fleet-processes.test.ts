import t from 'tap'
import { platformLeg, routeTo, until, upstreams, twoVendors } from '../helpers/gateway'
import { spawnGateway, type GatewayProcess } from '../helpers/process'
import { fleetMember, needRedis, QUICK_PROBE } from '../helpers/redis'
import { audioInit } from '../helpers/legs'

// Two gateway processes sharing one Redis (each test its own key prefix), real emulators.
const replicaState = async (g: GatewayProcess, name: string): Promise<string | undefined> =>
  (await upstreams(g.adminUrl(''))).routes[0].replicas.find(r => r.name === name)?.state
const probes = async (g: GatewayProcess): Promise<number> => {
  const text = await (await fetch(g.adminUrl('/metrics'))).text()
  return [...text.matchAll(/^assist_gateway_upstream_health_checks_total\{[^}]*\} (\d+)/gm)].reduce(
    (n, m) => n + Number(m[1]),
    0
  )
}

t.test(
  'two gateway processes: one probes, both avoid the replica it marked down; a leg that moves to the other process keeps its replica',
  async t => {
    const REDIS_URL = await needRedis()
    const [a, b] = await twoVendors(t, { kind: 'json-events', resultEveryFrames: 0 })
    const cfg = fleetMember(REDIS_URL, {
      health: QUICK_PROBE, // the closed replica is refused at once
      audio: { reattachGraceSeconds: 5 },
      routes: { demo: routeTo([a, b], 'mappings/json-events.yaml') }
    })
    const [p1, p2] = await Promise.all([spawnGateway(t, cfg), spawnGateway(t, cfg)])
    // Both share the store (ready), and the prober lease has been taken: one of them has probed.
    const ready = async (g: GatewayProcess): Promise<boolean> => (await fetch(g.adminUrl('/readyz'))).status === 200
    await until(async () => (await ready(p1)) && (await ready(p2)) && (await probes(p1)) + (await probes(p2)) > 0)
    const [n1, n2] = [await probes(p1), await probes(p2)]
    t.ok(n1 > 0 !== n2 > 0, `exactly one process probes (probes: ${n1}, ${n2})`)
    const follower = n1 > 0 ? p2 : p1

    // Re-attach across processes: a leg on p1 lands on some replica; it comes back on p2.
    const first = platformLeg(t, p1.url('/audio/demo'), audioInit(910001))
    t.equal((await first.answer).command, 'CONNECTED')
    const home = a.sessions().length === 1 ? a : b
    const other = home === a ? b : a
    first.ws.terminate()
    await first.closed
    await until(() => p1.output().includes('"event":"platform_closed"'))
    const second = platformLeg(t, p2.url('/audio/demo'), audioInit(910001))
    t.equal((await second.answer).command, 'CONNECTED')
    t.equal(home.sessions().length, 2, 'the other process opened the new vendor session on the same replica')
    t.equal(other.sessions().length, 0)
    t.match(
      await (await fetch(p2.adminUrl('/metrics'))).text(),
      'assist_gateway_audio_reattach_total{route="demo",result="same_replica"} 1'
    )
    second.ws.close(1000)
    await second.closed

    // Health through Redis: b goes away; the process that does not probe learns it from the prober's verdict.
    await b.close()
    t.ok(
      await until(async () => (await replicaState(follower, 'r1')) === 'down', 30_000, 50),
      'the follower process shows the replica down'
    )
    t.equal(await probes(follower), 0, 'and it never probed itself')
    const before = a.sessions().length
    for (let i = 0; i < 3; i++)
      t.equal((await platformLeg(t, follower.url('/audio/demo'), audioInit(920000 + i)).answer).command, 'CONNECTED')
    t.equal(a.sessions().length, before + 3, 'its new legs go to the healthy replica')
  }
)
