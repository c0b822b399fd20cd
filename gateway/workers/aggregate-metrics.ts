import { AggregatorRegistry } from 'prom-client'
import type { Metrics } from '../telemetry/metrics'
import { PREFIX } from '../telemetry/metrics'
import { type MetricJson, PER_PROCESS } from './instance-counters'

/** Gauges that are the same on every worker: the aggregate takes one value, not their sum. */
const AGGREGATE: Record<string, 'max' | 'min'> = {
  build_info: 'max',
  draining: 'max',
  workers: 'max',
  store_up: 'min',
  upstream_healthy: 'min'
}

/**
 * A process's list with its per-process series (PER_PROCESS: memory, heap, event-loop lag, GC, CPU) labelled
 * by `worker` (`main`, `0`, `1`, …) and the one-value gauges marked. A sum of RSS or of lag percentiles over
 * processes means nothing, and one worker's leak or stall must show as its own.
 */
function prepared(list: MetricJson[], worker: string): MetricJson[] {
  return list.map(x => {
    if (PER_PROCESS.test(x.name))
      return {
        ...x,
        // Distinct labels per process: `sum` keeps each series as it is.
        aggregator: 'sum',
        values: (x.values ?? []).map(v => ({ ...v, labels: { ...v.labels, worker } }))
      }
    const how = AGGREGATE[x.name.slice(PREFIX.length)]
    return how === undefined ? x : { ...x, aggregator: how }
  })
}

/**
 * The exposition text of a multi-worker gateway: every worker's metrics (`getMetricsAsJSON()` lists, by
 * worker index) summed with the counters of exited worker processes (`folded`, workers/instance-counters.ts)
 * and the main process's own. Gauges that are the same on every worker take one value (AGGREGATE);
 * per-process series stay per process (PER_PROCESS); the main process's `worker_legs_active{worker}` is set
 * for each of the `slots` workers from its live legs (0 for one that is not running).
 */
export async function aggregateMetrics(
  workers: { worker: number; json: unknown[] }[],
  main: Metrics,
  folded: MetricJson[] = [],
  slots = 0
): Promise<{ contentType: string; text: string }> {
  const lists: MetricJson[][] = []
  main.workerLegsActive.reset()
  for (let w = 0; w < slots; w++) main.workerLegsActive.set({ worker: String(w) }, 0)
  for (const w of workers) {
    const list = w.json as MetricJson[]
    const active = list.find(x => x.name === `${PREFIX}audio_sessions_active`)
    main.workerLegsActive.set(
      { worker: String(w.worker) },
      (active?.values ?? []).reduce((n, v) => n + v.value, 0)
    )
    lists.push(prepared(list, String(w.worker)))
  }
  lists.push(prepared((await main.registry.getMetricsAsJSON()) as unknown as MetricJson[], 'main'))
  if (folded.length > 0) lists.push(folded)
  const registry = AggregatorRegistry.aggregate(lists as unknown as Parameters<typeof AggregatorRegistry.aggregate>[0])
  return { contentType: registry.contentType, text: await registry.metrics() }
}
