import { AggregatorRegistry } from 'prom-client'
import type { Metrics } from '../telemetry/metrics'
import { PREFIX } from '../telemetry/metrics'

/** Gauges that are the same on every worker: the aggregate takes one value, not their sum. */
const AGGREGATE: Record<string, 'max' | 'min'> = {
  build_info: 'max',
  draining: 'max',
  workers: 'max',
  store_up: 'min',
  upstream_healthy: 'min'
}

/**
 * Series of one process (prom-client's process_* and nodejs_* defaults: memory, heap, event-loop lag, GC,
 * CPU): kept one per process under a `worker` label (`main`, `0`, `1`, …), never summed. A sum of RSS or
 * of lag percentiles over processes means nothing, and one worker's leak or stall must show as its own.
 */
const PER_PROCESS = /^(process_|nodejs_)/

/** One metric of `getMetricsAsJSON()`, as far as the aggregation reads it. */
interface Json {
  name: string
  aggregator?: string
  values?: { value: number; labels?: Record<string, string | number> }[]
}

/** A process's list with its per-process series labelled by `worker` and the one-value gauges marked. */
function prepared(list: Json[], worker: string): Json[] {
  return list.map(x => {
    const own = x.name.slice(PREFIX.length)
    if (PER_PROCESS.test(own))
      return {
        ...x,
        // Distinct labels per process: `sum` keeps each series as it is.
        aggregator: 'sum',
        values: (x.values ?? []).map(v => ({ ...v, labels: { ...v.labels, worker } }))
      }
    const how = AGGREGATE[own]
    return how === undefined ? x : { ...x, aggregator: how }
  })
}

/**
 * The exposition text of a multi-worker gateway: every worker's metrics (`getMetricsAsJSON()` lists, by
 * worker index) summed, and the main process's own. Gauges that are the same on every worker take one
 * value (AGGREGATE); per-process series stay per process (PER_PROCESS); the main process's
 * `worker_legs_active{worker}` is set from each worker's live legs.
 */
export async function aggregateMetrics(
  workers: { worker: number; json: unknown[] }[],
  main: Metrics
): Promise<{ contentType: string; text: string }> {
  const lists: Json[][] = []
  main.workerLegsActive.reset()
  for (const w of workers) {
    const list = w.json as Json[]
    const active = list.find(x => x.name === `${PREFIX}audio_sessions_active`)
    main.workerLegsActive.set(
      { worker: String(w.worker) },
      (active?.values ?? []).reduce((n, v) => n + v.value, 0)
    )
    lists.push(prepared(list, String(w.worker)))
  }
  lists.push(prepared((await main.registry.getMetricsAsJSON()) as unknown as Json[], 'main'))
  const registry = AggregatorRegistry.aggregate(lists as unknown as Parameters<typeof AggregatorRegistry.aggregate>[0])
  return { contentType: registry.contentType, text: await registry.metrics() }
}
