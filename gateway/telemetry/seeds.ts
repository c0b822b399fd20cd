import { CATALOGUE, type MetricName } from './catalogue'

/**
 * Every counter and histogram series the gateway can count exists at 0 from the start: Prometheus
 * sees a first event as 0 → 1 (what `increase()` and `rate()` need), not as a new series at 1.
 *
 * A label is closed (a reason, a result, a code, a limit: the values the code can count, taken from
 * the modules that count them, server/metric-labels.ts) or open (route, upstream, tee, from, to, worker, tenant:
 * what the config names, read at every collection, so a route a reload adds shows at once). The series
 * of a metric are its closed groups, each a product of value lists, filled with the open labels the
 * group does not fix. Their number is bounded by the config and the catalogues, never by traffic.
 * Labels whose values a peer chooses (ws_closes_total's close codes) are not seeded.
 */

/** The open label values of this process: the config's routes, replicas and tees, and its workers. */
export interface LabelSpace {
  readonly routes: readonly { readonly name: string; readonly join: boolean }[]
  /** Every replica of every pool (a tee's pool under the route label `<route>/<tee>`). */
  readonly replicas: readonly { readonly route: string; readonly upstream: string }[]
  readonly tees: readonly { readonly route: string; readonly tee: string }[]
  /** Worker indexes (the main process of `serve --workers N`); none in a worker or a single process. */
  readonly workers: readonly string[]
  /**
   * The tenant label's values: the configured tenants, the routes that are a tenant of their own (own auth,
   * or open to anonymous callers) and `unknown` (server/metric-labels.ts `tenantsOf`); none in the main process.
   */
  readonly tenants: readonly string[]
}

export const EMPTY_SPACE: LabelSpace = { routes: [], replicas: [], tees: [], workers: [], tenants: [] }

/** One product of closed label values; `routes: 'join'` keeps it to join routes. */
export interface SeedGroup {
  readonly values: Readonly<Record<string, readonly string[]>>
  readonly routes?: 'join'
}

/** The closed groups of each metric that is seeded; a metric absent here gets one group with no closed label. */
export type ClosedLabels = Partial<Record<MetricName, readonly SeedGroup[]>>

const OPEN = new Set(['route', 'upstream', 'tee', 'from', 'to', 'worker', 'tenant'])

export function isOpenLabel(label: string): boolean {
  return OPEN.has(label)
}

type Labels = Record<string, string>

/** The open part of a series: every way to fill `open` (labels the group leaves unset) from the space. */
function openFills(open: readonly string[], space: LabelSpace, group: SeedGroup): Labels[] {
  if (open.length === 0) return [{}]
  const has = (l: string): boolean => open.includes(l)
  if (has('worker')) return space.workers.map(worker => ({ worker }))
  if (has('tenant')) return space.tenants.map(tenant => ({ tenant }))
  if (has('tee')) return space.tees.map(t => ({ route: t.route, tee: t.tee }))
  if (has('from') && has('to'))
    return space.replicas.flatMap(a =>
      space.replicas
        .filter(b => b.route === a.route && b.upstream !== a.upstream)
        .map(b => ({
          route: a.route,
          from: a.upstream,
          to: b.upstream
        }))
    )
  if (has('upstream')) return space.replicas.map(r => ({ route: r.route, upstream: r.upstream }))
  const routes = group.routes === 'join' ? space.routes.filter(r => r.join) : space.routes
  return routes.map(r => ({ route: r.name }))
}

/** The closed part of a group: the product of its value lists. */
function product(values: Readonly<Record<string, readonly string[]>>): Labels[] {
  let out: Labels[] = [{}]
  for (const [label, list] of Object.entries(values)) out = out.flatMap(l => list.map(v => ({ ...l, [label]: v })))
  return out
}

/** Every label set of `metric` to show at 0, for this closed catalogue and this space. */
export function seedSeries(metric: MetricName, closed: ClosedLabels, space: LabelSpace): Labels[] {
  const labels: readonly string[] = CATALOGUE[metric].labels
  const groups = closed[metric] ?? [{ values: {} }]
  return groups.flatMap(g => {
    const open = labels.filter(l => g.values[l] === undefined)
    for (const l of open)
      if (!isOpenLabel(l)) throw new TypeError(`${metric}: label ${l} is closed and has no values in its seed group`)
    const fills = openFills(open, space, g)
    return product(g.values).flatMap(c => fills.map(f => ({ ...f, ...c })))
  })
}

/** A series' identity within its metric. */
export function seriesKey(labels: Labels): string {
  return Object.keys(labels)
    .sort()
    .map(k => `${k}=${labels[k]}`)
    .join(',')
}

/** What a seeded metric must offer: a counter's `inc(labels, 0)` or a histogram's `zero(labels)`. */
export type Seedable = { inc(labels: Labels, value: number): void } | { zero(labels: Labels): void }

/**
 * Brings every seed series into being once. A histogram's `zero` replaces its series: so none is seeded
 * twice, and `apply` MUST run before the series it seeds can be observed: at start before any listener,
 * and after a reload's swap in the same tick, before the new routes take traffic.
 */
export class Seeder {
  private readonly done = new Map<MetricName, Set<string>>()

  constructor(
    private readonly closed: ClosedLabels,
    private readonly space: () => LabelSpace
  ) {}

  apply(metrics: ReadonlyMap<MetricName, Seedable>): void {
    const space = this.space()
    for (const [name, metric] of metrics) {
      const done = this.done.get(name) ?? new Set<string>()
      this.done.set(name, done)
      for (const labels of seedSeries(name, this.closed, space)) {
        const key = seriesKey(labels)
        if (done.has(key)) continue
        done.add(key)
        if ('zero' in metric) metric.zero(labels)
        else metric.inc(labels, 0)
      }
    }
  }

  /** The series of a metric rebuilt at every collection (its collect resets it): all of them, every time. */
  series(name: MetricName): Labels[] {
    return seedSeries(name, this.closed, this.space())
  }
}
