import t from 'tap'
import { Metrics, PREFIX } from '../../../gateway/telemetry/metrics'
import { aggregateMetrics } from '../../../gateway/workers/aggregate-metrics'

// /metrics of `serve --workers N`: the gateway's series add up over the workers, and each process's own
// series (RSS, heap, event-loop lag, GC) stay one per process under a `worker` label.

/** The value of each sample line of `name` in Prometheus text, by its label text. */
function samples(text: string, name: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = /^(\S+?)(\{[^}]*\})? (\S+)$/.exec(line)
    if (m !== null && m[1] === name) out.set(m[2] ?? '', Number(m[3]))
  }
  return out
}

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
