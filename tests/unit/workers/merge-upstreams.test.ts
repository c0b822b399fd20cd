import t from 'tap'
import { mergeUpstreams } from '../../../gateway/workers/merge-upstreams'

// GET /admin/upstreams of serve --workers N: the workers' views merged into one gateway's.

const replica = (name: string, over: Record<string, unknown>) => ({
  name,
  healthy: true,
  state: 'up',
  reason: 'no failures seen',
  activeStreams: 0,
  fleetStreams: 0,
  inFlight: 0,
  consecutiveFailures: 0,
  ejections: 0,
  ...over
})
const view = (parked: number, a: Record<string, unknown>, b: Record<string, unknown>) => ({
  instance: 'x/w?',
  store: { kind: 'memory', up: true },
  parkedSessions: parked,
  routes: [{ route: 'demo', vendor: 'json-events', probe: 'http', replicas: [replica('a', a), replica('b', b)] }]
})

t.test('counts add up, fleet counts are the largest, health is every worker’s', async t => {
  const merged = mergeUpstreams(
    [
      { worker: 0, view: view(1, { activeStreams: 3, fleetStreams: 7, inFlight: 1 }, { activeStreams: 2 }) },
      {
        worker: 1,
        view: view(
          2,
          { activeStreams: 4, fleetStreams: 7, inFlight: 2 },
          { activeStreams: 1, healthy: false, state: 'ejected', reason: 'connect failures', ejections: 1 }
        )
      }
    ],
    'host-1'
  ) as any
  t.equal(merged.instance, 'host-1')
  t.equal(merged.workers, 2)
  t.equal(merged.parkedSessions, 3)
  const [a, b] = merged.routes[0].replicas
  t.match(a, { name: 'a', activeStreams: 7, fleetStreams: 7, inFlight: 3, healthy: true })
  t.match(b, { name: 'b', activeStreams: 3, healthy: false, ejections: 1 })
  t.same(
    b.workers.map((w: any) => [w.worker, w.state, w.activeStreams]),
    [
      [0, 'up', 2],
      [1, 'ejected', 1]
    ],
    'each worker’s state of the replica is listed'
  )
})

t.test('one worker: its view, with the counts as they are', async t => {
  const merged = mergeUpstreams([{ worker: 0, view: view(0, { activeStreams: 5 }, {}) }], 'h') as any
  t.equal(merged.routes[0].replicas[0].activeStreams, 5)
  t.equal(merged.routes[0].replicas[1].healthy, true)
})
