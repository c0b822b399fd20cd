import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { HealthSettings } from '../../gateway/config/types'
import { MemoryStore } from '../../gateway/store/memory'
import { Prober } from '../../gateway/upstream/health'
import { FakeClock, flush } from '../helpers/fake-clock'
import { health, poolOf, replica } from '../helpers/replicas'

// The active prober on the fake clock against a tiny real HTTP vendor: its verdicts reach the store,
// and the pool turns a down verdict into markDown, which moves the streams on the replica.

const ACTIVE: HealthSettings['active'] = {
  kind: 'http',
  path: '/healthz',
  intervalSeconds: 5,
  timeoutSeconds: 1,
  unhealthyThreshold: 2,
  healthyThreshold: 2
}

t.test('probes every interval: down after 2 failures, up after 2 successes; the pool moves streams off', async t => {
  let status = 200
  const server = createServer((_req, res) => {
    res.statusCode = status
    res.end()
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const clock = new FakeClock()
  const store = new MemoryStore('i1')
  const pool = poolOf([replica('a', 1, { audio: undefined, text: url })], clock, health(ACTIVE, 5), store)
  store.onSync(() => pool.refreshProbes())
  const a = pool.byName('a')!
  const moved: string[] = []
  pool.leaseStream(a, { replicaDown: why => moved.push(why) })
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
      checked: () => checked(),
      changed: (_r, state) => verdicts.push(state)
    },
    clock
  )
  t.teardown(() => prober.stop())
  /** Run the prober's next interval and wait for its probe to finish. */
  const tick = async (): Promise<void> => {
    round = new Promise<void>(resolve => {
      checked = resolve
    })
    clock.advance(5000)
    await round
    await flush() // the round is over once its verdict is written
  }
  prober.start()
  await round
  await flush()
  t.equal(clock.pending, 1, 'one interval armed, on the clock')
  status = 503
  await tick()
  t.same(verdicts, [])
  await tick()
  t.same(verdicts, ['down'])
  t.equal(a.healthy, false)
  t.same(moved, ['replica a marked down'], 'the stream on it is told to move')
  t.match(a.describe(), { state: 'down', reason: /2 failed probes: HTTP 503/ })
  status = 200
  await tick()
  await tick()
  t.same(verdicts, ['down', 'up'])
  t.equal(a.healthy, true)
  prober.stop()
  t.equal(clock.pending, 0)
})
