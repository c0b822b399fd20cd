import t from 'tap'
import { samples } from '../../helpers/metrics'
import { Metrics, PREFIX } from '../../../gateway/telemetry/metrics'
import { aggregateMetrics } from '../../../gateway/workers/aggregate-metrics'

// /metrics of `serve --workers N`: the gateway's series add up over the workers, and each process's own
// series (RSS, heap, event-loop lag, GC) stay one per process under a `worker` label.

t.test('process and Node.js series stay per process with a worker label; gateway series add up', async t => {
  const [w0, w1, main] = [new Metrics(), new Metrics(), new Metrics()]
  w0.sessionsTotal.inc({ route: 'demo', outcome: 'ok' }, 3)
  w1.sessionsTotal.inc({ route: 'demo', outcome: 'ok' }, 4)
  w1.storeIsUp = () => false
  main.workers.set(2)
  const { text } = await aggregateMetrics(
    [
      { worker: 0, json: await w0.registry.getMetricsAsJSON() },
      { worker: 1, json: await w1.registry.getMetricsAsJSON() }
    ],
    main
  )
  t.same(
    [...samples(text, 'process_resident_memory_bytes').keys()].sort(),
    ['{worker="0"}', '{worker="1"}', '{worker="main"}'],
    'RSS: one series per process, not their sum'
  )
  const lag = samples(text, 'nodejs_eventloop_lag_p99_seconds')
  t.same([...lag.keys()].sort(), ['{worker="0"}', '{worker="1"}', '{worker="main"}'], 'event-loop lag p99 per process')
  t.ok(
    [...samples(text, 'nodejs_heap_size_used_bytes').keys()].every(k => k.includes('worker=')),
    'heap per process'
  )
  t.ok(
    [...samples(text, 'process_start_time_seconds').keys()].length === 3,
    'each process’s start time (a restarted worker shows)'
  )
  t.same(samples(text, `${PREFIX}audio_sessions_total`), new Map([['{route="demo",outcome="ok"}', 7]]), 'legs add up')
  t.same(samples(text, `${PREFIX}store_up`), new Map([['', 0]]), 'store_up: the smallest, not a sum')
  t.same(samples(text, `${PREFIX}workers`), new Map([['', 2]]))
  t.same(
    samples(text, `${PREFIX}worker_legs_active`),
    new Map([
      ['{worker="0"}', 0],
      ['{worker="1"}', 0]
    ]),
    'the main process’s per-worker legs'
  )
})
