import { AggregatorRegistry } from 'prom-client'
import type { Metrics } from '../telemetry/metrics'
import { PREFIX } from '../telemetry/metrics'

/** Gauges that are the same on every worker: the aggregate takes one value, not their sum. */
const AGGREGATE: Record<string, 'max' | 'min'> = {
  build_info: 'max',
  draining: 'max',
  workers: 'max',
  store_up: 'min',
  upstream_healthy: 'min',
  process_start_time_seconds: 'min'
}

/** One metric of `getMetricsAsJSON()`, as far as the aggregation reads it. */
interface Json {
  name: string
  aggregator?: string
  values?: { value: number }[]
}

/**
 * The exposition text of a multi-worker gateway: every worker's metrics (`getMetricsAsJSON()` lists, by
 * worker index) summed, and the main process's own. Gauges that are the same on every worker take one
 * value (AGGREGATE); the main process's `worker_legs_active{worker}` is set from each worker's live legs.
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
    lists.push(list)
  }
  lists.push((await main.registry.getMetricsAsJSON()) as unknown as Json[])
  for (const list of lists)
    for (const x of list) {
      const how = AGGREGATE[x.name.slice(PREFIX.length)]
      if (how !== undefined) x.aggregator = how
    }
  const registry = AggregatorRegistry.aggregate(lists as unknown as Parameters<typeof AggregatorRegistry.aggregate>[0])
  return { contentType: registry.contentType, text: await registry.metrics() }
}
