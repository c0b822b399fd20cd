import t from 'tap'
import { mergeReadiness, mergeUpstreams } from '../../../gateway/workers/merge-upstreams'

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

t.test(
  'readiness of the gateway in the one-process shape: some worker ready, store up on all, every degradation',
  async t => {
    const worker = (ready: boolean, storeUp: boolean, servable: boolean, degraded: string[]) => ({
      ready,
      reasons: ready ? [] : ['no route can take new work'],
      draining: false,
      instance: 'x/w?',
      store: { kind: 'redis', up: storeUp },
      routes: [{ route: 'demo', servable, audio: null, text: null, replicas: [] }],
      degraded
    })
    const merged = mergeReadiness(
      [
        { worker: 0, status: 200, view: worker(true, true, true, []) },
        {
          worker: 1,
          status: 503,
          view: worker(false, false, false, ['shared store (Redis) unreachable: serving on local state'])
        }
      ],
      'x',
      false
    )
    t.match(merged, {
      ready: true,
      reasons: [],
      draining: false,
      instance: 'x',
      store: { kind: 'redis', up: false },
      routes: [{ route: 'demo', servable: true }],
      degraded: ['shared store (Redis) unreachable: serving on local state']
    })
    t.equal((merged.workers as unknown[]).length, 2, 'each worker’s own view is kept')
    const none = mergeReadiness([{ worker: 0, status: 503, view: worker(false, true, false, []) }], 'x', true)
    t.match(none, { ready: false, reasons: ['draining', 'no route can take new work'], draining: true }, 'theirs')
    t.same(mergeReadiness([], 'x', false).reasons, ['no worker is ready'], 'none answered')
  }
)
