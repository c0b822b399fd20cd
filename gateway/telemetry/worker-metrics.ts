import { AggregatorRegistry } from 'prom-client'
import { PREFIX } from './catalogue'

// `/metrics` of `serve --workers N`: the main process's registry and each worker's, as one gateway's.
// The gateway's own series add up over the workers (legs, frames, requests), a few state gauges take one
// value, and the per-process series (prom-client's process_* and nodejs_* defaults: memory, heap, event
// loop lag, GC, CPU) stay apart, one series per process with a `worker` label: a sum of RSS or of lag
// percentiles over processes means nothing, and one worker's leak or stall must show as that worker's.

/** Gauges that are the same on every worker: the aggregate takes one value, not their sum. */
const ONE_VALUE: Record<string, 'max' | 'min'> = {
  build_info: 'max',
  draining: 'max',
  workers: 'max',
  store_up: 'min',
  upstream_healthy: 'min'
}

/** Series of one process, kept per process under a `worker` label. */
const PER_PROCESS = /^(process_|nodejs_)/

/** One metric of prom-client's `getMetricsAsJSON()`, as far as the aggregation reads it. */
interface Json {
  name: string
  aggregator?: string
  values?: { value: number; labels?: Record<string, string | number> }[]
}

/** One process's metrics and whose they are: a worker's index, or `main`. */
export interface ProcessMetrics {
  worker: string
  json: unknown[]
}

/** The Prometheus text of every process's metrics together (see the top of this file). */
export async function aggregateWorkers(processes: ProcessMetrics[]): Promise<{ contentType: string; text: string }> {
  const lists = processes.map(p =>
    (p.json as Json[]).map(x => {
      const own = x.name.slice(PREFIX.length)
      if (PER_PROCESS.test(own))
        return {
          ...x,
          // Distinct labels per process: `sum` keeps each series as it is.
          aggregator: 'sum',
          values: (x.values ?? []).map(v => ({ ...v, labels: { ...v.labels, worker: p.worker } }))
        }
      const how = ONE_VALUE[own]
      return how === undefined ? x : { ...x, aggregator: how }
    })
  )
  const registry = AggregatorRegistry.aggregate(lists as unknown as Parameters<typeof AggregatorRegistry.aggregate>[0])
  return { contentType: registry.contentType, text: await registry.metrics() }
}
