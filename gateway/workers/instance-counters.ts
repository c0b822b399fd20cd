/**
 * What the main process of `serve --workers N` keeps so that the instance's counters never go down when a
 * worker exits (a crash, `kill -9`, a drain): each worker's last-known metrics (from every gather, and
 * the final ones a drained worker sends), and a base into which an exited worker's counters are folded.
 * The restarted worker counts from 0 on top of that base, so every counter series of the instance, and
 * each histogram's _bucket, _sum and _count, only grows and never vanishes. What a worker counted after
 * its last gather and before a `kill -9` is lost (as in a single process killed so).
 *
 * Gauges are not folded: a gone worker's gauges (its live legs, its buffered bytes) went with it, and the
 * others' still give each series. Per-process series (`process_*`, `nodejs_*`, labelled `worker`) are
 * not either: they are that process's, and a restarted worker's start from 0 like any process's.
 */

/** One metric of `getMetricsAsJSON()`, as far as the aggregation reads it. */
export interface MetricJson {
  name: string
  type?: string
  help?: string
  aggregator?: string
  values?: { value: number; labels?: Record<string, string | number>; metricName?: string }[]
}

/** Series of one process (prom-client's Node.js defaults): kept per process, never summed or folded. */
export const PER_PROCESS = /^(process_|nodejs_)/

function isInstanceCounter(m: MetricJson): boolean {
  return (m.type === 'counter' || m.type === 'histogram') && !PER_PROCESS.test(m.name)
}

function seriesKey(v: { labels?: Record<string, string | number>; metricName?: string }): string {
  const labels = v.labels ?? {}
  const names = Object.keys(labels).sort()
  return `${v.metricName ?? ''}{${names.map(n => `${n}=${String(labels[n])}`).join(',')}}`
}

/** `base` with the instance counters of `list` added, series by series (a pure function). */
export function foldCounters(base: readonly MetricJson[], list: readonly MetricJson[]): MetricJson[] {
  type Sums = Map<string, { value: number; labels?: Record<string, string | number>; metricName?: string }>
  // Each counter by name, in first-seen order: its header and its series summed by labels.
  const out = new Map<string, { metric: MetricJson; sums: Sums }>()
  for (const m of [...base, ...list]) {
    if (!isInstanceCounter(m)) continue
    let entry = out.get(m.name)
    if (entry === undefined) {
      entry = { metric: { name: m.name, type: m.type, help: m.help, aggregator: 'sum', values: [] }, sums: new Map() }
      out.set(m.name, entry)
    }
    for (const v of m.values ?? []) {
      const key = seriesKey(v)
      const had = entry.sums.get(key)
      if (had === undefined) entry.sums.set(key, { ...v })
      else had.value += v.value
    }
  }
  return [...out.values()].map(e => ({ ...e.metric, values: [...e.sums.values()] }))
}

export class InstanceCounters {
  private readonly last = new Map<number, MetricJson[]>()
  private base: MetricJson[] = []

  /**
   * A worker's metrics, from a process that still runs: its last-known. (An answer that arrives after its
   * process exited is not kept: that process's counters were folded already, and count once.)
   */
  gathered(worker: number, json: MetricJson[]): void {
    this.last.set(worker, json)
  }

  /** The worker's last-known metrics, when it did not answer this gather. */
  lastKnown(worker: number): MetricJson[] | undefined {
    return this.last.get(worker)
  }

  /** The worker's process exited: its last-known counters go into the base. */
  exited(worker: number): void {
    const last = this.last.get(worker)
    if (last === undefined) return
    this.last.delete(worker)
    this.base = foldCounters(this.base, last)
  }

  /** The counters of every exited worker process, summed: one more list for the aggregation. */
  folded(): MetricJson[] {
    return this.base
  }
}
