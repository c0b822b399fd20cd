import t from 'tap'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { platformLeg, routeTo, startGateway, startVendor, sleep, until, upstreams } from '../helpers/gateway'
import { freePort } from '../helpers/process'
import { fleetMember, fleetObserver, needRedis, QUICK_PROBE } from '../helpers/redis'
import { audioInit } from '../helpers/legs'

/** Each test gets its own key prefix, so tests (and CI runs) never see each other's state. */
const fleet = fleetMember

t.test(
  'two instances sharing Redis: a replica probed down by the leader is avoided by the other within one interval',
  async t => {
    const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const b = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const cfg = fleet(await needRedis(), {
      health: QUICK_PROBE, // the closed replica is refused at once
      routes: { demo: routeTo([a, b], 'mappings/json-events.yaml') }
    })
    const g1 = await startGateway(t, cfg)
    const g2 = await startGateway(t, cfg)
    // The prober lease names one process of the fleet (a worker of one of the two instances).
    const seer = await fleetObserver(t, String(cfg.redis), (cfg.store as { keyPrefix: string }).keyPrefix)
    const prober = async (): Promise<string> => (await seer.prober()) ?? ''
    t.ok(
      await until(async () => [g1, g2].some(async g => (await prober()).startsWith(g.instance))),
      'an instance has the lease'
    )
    const leader = (await prober()).startsWith(g1.instance) ? g1 : g2
    t.ok((await prober()).startsWith(leader.instance), 'exactly one instance has the prober lease')
    const follower = leader === g1 ? g2 : g1
    await b.close()
    // How soon is the machine's business (a probe interval, a probe timeout and a sync here, more on a busy
    // machine): what is asserted is where the verdict comes from, not how many milliseconds it took.
    const down = async (): Promise<boolean> =>
      (await upstreams(follower.adminUrl(''))).routes[0].replicas[1].state === 'down'
    t.ok(await until(down, 30_000, 10), 'the follower sees the verdict it did not probe itself')
    t.match(await seer.health('demo/r1'), { state: 'down' }, "the verdict is the fleet's, in Redis")
    t.notOk((await prober()).startsWith(follower.instance), 'and the follower did not probe')
    const ups = await upstreams(follower.adminUrl(''))
    t.match(ups.routes[0].replicas[1], { name: 'r1', state: 'down' })
    for (let i = 0; i < 4; i++) {
      const leg = platformLeg(t, follower.url('/audio/demo'), audioInit(700000 + i, 'RX'))
      t.equal((await leg.answer).command, 'CONNECTED')
    }
    t.equal(a.sessions().length, 4, 'every new leg on the follower went to the healthy replica')
  }
)

t.test("stream counts are fleet-wide: the second instance balances against the first one's legs", async t => {
  const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const b = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const cfg = fleet(await needRedis(), { routes: { demo: routeTo([a, b], 'mappings/json-events.yaml') } })
  const g1 = await startGateway(t, cfg)
  const g2 = await startGateway(t, cfg)
  // g1 places 3 legs: a, b, a (ties keep config order), so the fleet has a=2, b=1. Its workers learn each
  // other's streams at the next sync: each leg waits until every process counts the one before it.
  const everyWorkerCounts = async (n: number): Promise<boolean> => {
    const replicas = (await upstreams(g1.adminUrl(''))).routes[0].replicas
    const known = new Map<number, number>()
    for (const r of replicas)
      for (const w of r.workers) known.set(w.worker, (known.get(w.worker) ?? 0) + w.fleetStreams)
    return [...known.values()].every(k => k === n)
  }
  for (let i = 0; i < 3; i++) {
    t.equal((await platformLeg(t, g1.url('/audio/demo'), audioInit(710000 + i, 'RX')).answer).command, 'CONNECTED')
    await until(async () => await everyWorkerCounts(i + 1))
  }
  t.same([a.sessions().length, b.sessions().length], [2, 1])
  // g2 learns g1's counts through Redis (published and read every 0.2 s): polled, not slept for.
  // Every worker of g2 (the leg may land on either): each reads Redis on its own sync.
  await until(async () => {
    const replicas = (await upstreams(g2.adminUrl(''))).routes[0].replicas
    return [2, 1].every((n, i) => replicas[i].workers.every(w => w.fleetStreams === n))
  })
  const seen = await upstreams(g2.adminUrl(''))
  t.same(
    seen.routes[0].replicas.map(r => r.fleetStreams),
    [2, 1],
    "g2 sees g1's streams per replica"
  )
  // Counting only its own (zero) streams, g2 would pick a; fleet-wide it picks b.
  t.equal((await platformLeg(t, g2.url('/audio/demo'), audioInit(710009, 'RX')).answer).command, 'CONNECTED')
  t.same([a.sessions().length, b.sessions().length], [2, 2], 'g2 placed its leg on the less loaded replica')
})

const haveRedisServer = spawnSync('redis-server', ['--version']).status === 0

t.test(
  'Redis stopped mid-call: calls continue on local state, store_up 0, one log line; Redis back: sharing resumes',
  { skip: haveRedisServer ? false : 'redis-server binary not on PATH' },
  async t => {
    const port = await freePort()
    let redis: ChildProcess | null = null
    const startRedis = async (): Promise<void> => {
      redis = spawn(
        'redis-server',
        ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
        { stdio: 'ignore' }
      )
      await until(
        () =>
          spawnSync('redis-cli', ['-p', String(port), 'ping'])
            .stdout?.toString()
            .includes('PONG') ?? false,
        30_000,
        50
      )
    }
    const stopRedis = async (): Promise<void> => {
      const r = redis
      redis = null
      if (r === null) return
      const gone = new Promise(resolve => r.on('exit', resolve))
      r.kill('SIGKILL')
      await gone
    }
    t.teardown(stopRedis)
    await startRedis()
    const v = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const gw = await startGateway(
      t,
      fleet(`redis://127.0.0.1:${port}`, { routes: { demo: routeTo([v], 'mappings/json-events.yaml') } })
    )
    const storeUp = async (): Promise<boolean> => (await upstreams(gw.adminUrl(''))).store.up
    t.ok(await until(storeUp), 'the store is up')
    const leg = platformLeg(t, gw.url('/audio/demo'), audioInit(730001, 'RX'))
    t.equal((await leg.answer).command, 'CONNECTED')
    await stopRedis()
    t.ok(await until(async () => !(await storeUp())), 'the store notices')
    for (let i = 0; i < 10; i++) {
      leg.send(Buffer.alloc(160, i))
      await sleep(20)
    }
    await until(() => v.sessions()[0].bytes === 10 * 160)
    t.equal(v.sessions()[0].bytes, 10 * 160, 'the call goes on')
    const during = platformLeg(t, gw.url('/audio/demo'), audioInit(730002, 'RX'))
    t.equal((await during.answer).command, 'CONNECTED', 'new calls are taken on local state')
    let metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
    t.match(metrics, 'assist_gateway_store_up 0')
    t.equal((await fetch(gw.adminUrl('/readyz'))).status, 200, 'still ready: it takes new work on local state')
    t.match(
      await (await fetch(gw.adminUrl('/admin/readiness'))).json(),
      { ready: true, store: { up: false }, degraded: [/Redis/] },
      'the verbose view says the shared store is away'
    )
    // Every process of the instance (each worker, and the main process that counts the failure budget for
    // them) has its own connection to Redis, and says so once.
    const each = gw.workers + 1
    const lines = (event: string): number => gw.logs.lines.filter(l => l.event === event).length
    await until(() => lines('store_down') >= each)
    t.equal(lines('store_down'), each, 'one log line per process for the outage')
    await startRedis()
    t.ok(await until(storeUp), 'the store reconnects')
    const streamKeys = (): string =>
      spawnSync('redis-cli', ['-p', String(port), '--scan', '--pattern', '*streams*'])
        .stdout.toString()
        .trim()
    // The next sync (every 0.2 s) publishes again: polled, not slept for.
    await until(
      async () =>
        streamKeys() !== '' &&
        (await (await fetch(gw.adminUrl('/metrics'))).text()).includes('assist_gateway_store_up 1'),
      30_000,
      50
    )
    metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
    t.match(metrics, 'assist_gateway_store_up 1')
    const keys = streamKeys()
    t.not(keys, '', 'stream counts are published again')
    await until(() => lines('store_up') >= 2 * each)
    t.equal(lines('store_up'), 2 * each, 'one log line per process when it came back (after the first)')
  }
)
