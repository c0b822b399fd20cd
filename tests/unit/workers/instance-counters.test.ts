import t from 'tap'
import fc from 'fast-check'
import { Metrics } from '../../../gateway/telemetry/metrics'
import { aggregateMetrics } from '../../../gateway/workers/aggregate-metrics'
import { InstanceCounters, type MetricJson } from '../../../gateway/workers/instance-counters'

// The main process of `serve --workers N` keeps each worker's last-known counters and folds an exited
// worker's into a base: whatever the order of counts, gathers and exits, no instance counter goes down.

/** Every sample of the exposition text by series (name and labels). */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = /^(\S+?(?:\{[^}]*\})?) (\S+)$/.exec(line)
    if (m !== null && !line.startsWith('#')) out.set(m[1], Number(m[2]))
  }
  return out
}

const counterSeries = (all: Map<string, number>): Map<string, number> =>
  new Map([...all].filter(([k]) => /^assist_gateway_\w+_(total|bucket|sum|count)\b/.test(k)))

type Step = { kind: 'count'; worker: number; n: number } | { kind: 'gather' } | { kind: 'exit'; worker: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant('count' as const),
    worker: fc.integer({ min: 0, max: 1 }),
    n: fc.integer({ min: 1, max: 5 })
  }),
  fc.constant({ kind: 'gather' as const }),
  fc.record({ kind: fc.constant('exit' as const), worker: fc.integer({ min: 0, max: 1 }) })
)

t.test('instance counters never go down and no counter series vanishes, whatever exits when', async t => {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { maxLength: 25 }), async steps => {
      const workers = [new Metrics(), new Metrics()]
      const main = new Metrics()
      const kept = new InstanceCounters()
      let before = new Map<string, number>()
      for (const s of steps) {
        if (s.kind === 'count') {
          workers[s.worker].sessionsTotal.inc({ route: 'demo', outcome: 'ok' }, s.n)
          workers[s.worker].handshakeDuration.observe({ route: 'demo' }, s.n / 100)
          continue
        }
        if (s.kind === 'exit') {
          kept.exited(s.worker)
          workers[s.worker] = new Metrics() // restarted: counts from 0
          continue
        }
        const lists: { worker: number; json: MetricJson[] }[] = []
        for (const [i, w] of workers.entries()) {
          kept.gathered(i, (await w.registry.getMetricsAsJSON()) as unknown as MetricJson[])
          lists.push({ worker: i, json: kept.lastKnown(i)! })
        }
        const now = counterSeries(parse((await aggregateMetrics(lists, main, kept.folded(), 2)).text))
        for (const [series, value] of before) {
          if (!now.has(series)) return false
          if (now.get(series)! < value) return false
        }
        before = now
      }
      return true
    }),
    { numRuns: 60 }
  )
  t.pass('checked over random sequences of counts, gathers and worker exits')
})

t.test('a worker that exits is folded once: its last-known counters add to its successor’s', async t => {
  const kept = new InstanceCounters()
  const old = new Metrics()
  old.sessionsTotal.inc({ route: 'demo', outcome: 'ok' }, 17)
  old.limitRefusals.inc({ limit: 'failure_budget', hook: 'text' }, 3)
  kept.gathered(1, (await old.registry.getMetricsAsJSON()) as unknown as MetricJson[])
  kept.exited(1)
  kept.exited(1)
  const successor = new Metrics()
  successor.sessionsTotal.inc({ route: 'demo', outcome: 'ok' }, 1)
  const text = (
    await aggregateMetrics(
      [{ worker: 1, json: (await successor.registry.getMetricsAsJSON()) as unknown as MetricJson[] }],
      new Metrics(),
      kept.folded(),
      2
    )
  ).text
  const all = parse(text)
  t.equal(all.get('assist_gateway_audio_sessions_total{route="demo",outcome="ok"}'), 18)
  t.equal(
    all.get('assist_gateway_limit_refusals_total{limit="failure_budget",hook="text"}'),
    3,
    'a series only the old one had'
  )
  t.equal(all.get('assist_gateway_worker_legs_active{worker="0"}'), 0, 'a worker not running has no legs')
})
