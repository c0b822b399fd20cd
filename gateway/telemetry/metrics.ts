import { RecentEvents } from './recent'
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { CountCells } from './count-cells'
import { CATALOGUE, type MetricName, PREFIX } from './catalogue'
import { type ClosedLabels, EMPTY_SPACE, type LabelSpace, type Seedable, Seeder } from './seeds'

export { CATALOGUE, type MetricName, PREFIX } from './catalogue'

/** Plain per-leg integers; the feed and the leg increment these and nothing else per frame. */
export class LegCounters {
  framesFromPlatform = 0
  bytesFromPlatform = 0
  framesToVendor = 0
  bytesToVendor = 0
  framesFromVendor = 0
  bytesFromVendor = 0
  framesToPlatform = 0
  bytesToPlatform = 0
  dropHold = 0
  dropBackpressure = 0
  dropVendorBinary = 0
  dropAfterClose = 0
  dropFailover = 0
  dropVendorPaused = 0
  /** Frames the lost vendor may not have processed (since its last sign of life, or unread) that the replay did not cover. */
  dropFailoverUnreplayed = 0
  bufferedBytes = 0
  active = false
  /** A platform leg's tenant (tenant_legs_active): `unknown` until its credential is accepted; null for a tee's. */
  tenant: string | null = null
  constructor(readonly route: string) {}
}

type Totals = Omit<LegCounters, 'route' | 'active' | 'bufferedBytes' | 'tenant'>
const FIELDS = [
  'framesFromPlatform',
  'bytesFromPlatform',
  'framesToVendor',
  'bytesToVendor',
  'framesFromVendor',
  'bytesFromVendor',
  'framesToPlatform',
  'bytesToPlatform',
  'dropHold',
  'dropBackpressure',
  'dropVendorBinary',
  'dropAfterClose',
  'dropFailover',
  'dropVendorPaused',
  'dropFailoverUnreplayed'
] as const

type Field = keyof Totals

/** Counters published at scrape time from the per-leg totals: each label value and the field it sums. */
const PUBLISHED: Partial<Record<MetricName, { label: string; fields: Record<string, Field> }>> = {
  audio_frames_total: {
    label: 'direction',
    fields: {
      from_platform: 'framesFromPlatform',
      to_vendor: 'framesToVendor',
      from_vendor: 'framesFromVendor',
      to_platform: 'framesToPlatform'
    }
  },
  audio_bytes_total: {
    label: 'direction',
    fields: {
      from_platform: 'bytesFromPlatform',
      to_vendor: 'bytesToVendor',
      from_vendor: 'bytesFromVendor',
      to_platform: 'bytesToPlatform'
    }
  },
  audio_dropped_frames_total: {
    label: 'reason',
    fields: {
      hold_overflow: 'dropHold',
      backpressure: 'dropBackpressure',
      vendor_binary: 'dropVendorBinary',
      after_close: 'dropAfterClose',
      failover: 'dropFailover',
      vendor_paused: 'dropVendorPaused',
      failover_unreplayed: 'dropFailoverUnreplayed'
    }
  }
}

/** audio_tee_dropped_frames_total's reasons: a tee's vendor session counts as a leg under `<route>/<tee>`. */
const TEE_DROPS: Record<string, Field> = {
  backpressure: 'dropBackpressure',
  hold_overflow: 'dropHold',
  failover: 'dropFailover',
  failover_unreplayed: 'dropFailoverUnreplayed',
  ended: 'dropAfterClose'
}

/** The closed labels of the published counters, from the tables above (telemetry/seeds.ts). */
export const PUBLISHED_LABELS: ClosedLabels = {
  ...Object.fromEntries(
    Object.entries(PUBLISHED).map(([metric, p]) => [metric, [{ values: { [p.label]: Object.keys(p.fields) } }]])
  ),
  audio_tee_dropped_frames_total: [{ values: { reason: Object.keys(TEE_DROPS) } }]
}

/** audio_tee_dropped_frames_total from one route label's totals: only a tee's (`<route>/<tee>`) count. */
function addTeeDrops(c: Counter, label: string, t: Totals): void {
  const at = label.indexOf('/')
  if (at < 0) return
  const route = label.slice(0, at)
  const tee = label.slice(at + 1)
  for (const [reason, field] of Object.entries(TEE_DROPS)) {
    const n = t[field]
    if (n > 0) c.inc({ route, tee, reason }, n)
  }
}

/** Latency buckets of the HTTP hops (text hook requests, upstream requests). */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

/** A registry that has Node's standard series, under their standard names, first. */
function withDefaultMetrics(registry: Registry): Registry {
  // `worker` tells the processes of an instance apart (workers/aggregate-metrics.ts sets each worker's index;
  // a single process is the main one).
  collectDefaultMetrics({ register: registry, labels: { worker: 'main' } })
  return registry
}

/**
 * Every series is a field below, in the order a scrape lists them; names, help texts and labels come from
 * CATALOGUE. The ones read at scrape time (a `collect`) are published from state, never incremented.
 */
export class Metrics {
  readonly registry = withDefaultMetrics(new Registry())
  /** The last failovers, replica changes and refusals, for the status page (`GET /admin/recent`). */
  readonly recent = new RecentEvents()
  private readonly live = new Set<LegCounters>()
  private readonly ended = new Map<string, Totals>()
  private seeder: Seeder | null = null
  private readonly seedable = new Map<MetricName, Seedable>()
  /** Set by the server: every replica's health, read at scrape time. */
  replicaHealth: () => { route: string; upstream: string; healthy: boolean }[] = () => []
  storeIsUp: () => boolean = () => true
  /** Set by `seed`: the config's routes, replicas and tees (per-route gauges have a sample at 0 when idle). */
  labelSpace: () => LabelSpace = () => EMPTY_SPACE
  /** textRequests' per-request increments (count-cells.ts). */
  readonly textRequestCounts = new CountCells()
  /** upstreamRequests' per-request increments (count-cells.ts). */
  readonly upstreamRequestCounts = new CountCells()
  /** tenantUtterances' per-request increments (count-cells.ts). */
  readonly tenantUtteranceCounts = new CountCells()

  // The process.
  readonly buildInfo = this.gauge('build_info')
  readonly draining = this.gauge('draining')
  readonly configReloads = this.counter('config_reloads_total')

  // Audio legs.
  readonly sessionsTotal = this.counter('audio_sessions_total')
  readonly handshakeDuration = this.histogram(
    'audio_handshake_duration_seconds',
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
  )
  readonly vendorMessages = this.counter('audio_vendor_messages_total')
  readonly wsCloses = this.counter('ws_closes_total')

  // Refusals at the front door.
  readonly authFailures = this.counter('auth_failures_total')
  readonly validationFailures = this.counter('validation_failures_total')
  readonly frontDoorRefusals = this.counter('front_door_refusals_total')
  readonly mappingErrors = this.counter('mapping_errors_total')

  // The HTTP hops: text hook requests, upstream requests.
  readonly textRequests = this.counter('text_requests_total', this.textRequestCounts)
  readonly textDuration = this.histogram('text_request_duration_seconds', HTTP_BUCKETS)
  readonly upstreamRequests = this.counter('upstream_requests_total', this.upstreamRequestCounts)
  readonly upstreamDuration = this.histogram('upstream_request_duration_seconds', HTTP_BUCKETS)

  // Failover, re-attach, joins and moves.
  readonly failovers = this.counter('audio_failovers_total')
  readonly upstreamRetries = this.counter('upstream_retries_total')
  readonly gapSeconds = this.histogram('audio_gap_seconds', [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60])
  readonly reattach = this.counter('audio_reattach_total')
  readonly joins = this.counter('audio_joins_total')
  readonly moves = this.counter('audio_moves_total')
  readonly joinSilence = this.counter('audio_join_silence_samples_total')

  // Replica health.
  readonly upstreamHealthy = this.gauge('upstream_healthy', g => this.publishHealth(g))
  readonly ejections = this.counter('upstream_ejections_total')
  readonly healthChecks = this.counter('upstream_health_checks_total')

  // The shared store.
  readonly storeUp = this.gauge('store_up', g => g.set(this.storeIsUp() ? 1 : 0))
  readonly storeErrors = this.counter('store_errors_total')

  // Tees.
  readonly teeSessions = this.counter('audio_tee_sessions_total')
  readonly teeMessages = this.counter('audio_tee_messages_total')
  readonly textTeeDeliveries = this.counter('text_tee_deliveries_total')
  /** Tee vendor sessions count under the route label <route>/<tee> (route.ts teeLabel); this splits it. */
  readonly teeDroppedFrames = this.fromTotals('audio_tee_dropped_frames_total', addTeeDrops)

  // Limits and worker processes.
  readonly limitRefusals = this.counter('limit_refusals_total')
  readonly workers = this.gauge('workers')
  readonly workerRestarts = this.counter('worker_restarts_total')
  readonly workerLegsActive = this.gauge('worker_legs_active')

  // Tenants.
  readonly tenantLegs = this.counter('tenant_legs_total')
  readonly tenantRefusals = this.counter('tenant_refusals_total')
  readonly tenantUtterances = this.counter('tenant_utterances_total', this.tenantUtteranceCounts)

  // Published at scrape time from the plain per-leg integers: nothing per frame touches prom-client.
  readonly tenantLegsActive = this.gauge('tenant_legs_active', g => this.publishTenantLegs(g))
  readonly sessionsActive = this.gauge('audio_sessions_active', g => this.publishPerRoute(g, l => (l.active ? 1 : 0)))
  readonly bufferedBytes = this.gauge('audio_buffered_bytes', g => this.publishPerRoute(g, l => l.bufferedBytes))
  /** audio_frames_total, audio_bytes_total, audio_dropped_frames_total: the PUBLISHED table. */
  readonly legTotals = Object.entries(PUBLISHED).map(([metric, { label, fields }]) =>
    this.fromTotals(metric as MetricName, (c, route, t) => {
      for (const [value, field] of Object.entries(fields)) {
        const n = t[field]
        if (n > 0) c.inc({ route, [label]: value }, n)
      }
    })
  )

  private publishHealth(g: Gauge): void {
    g.reset()
    for (const h of this.replicaHealth()) g.set({ route: h.route, upstream: h.upstream }, h.healthy ? 1 : 0)
  }

  /** Live legs per tenant whose credential was accepted, with every configured tenant at 0 when idle. */
  private publishTenantLegs(g: Gauge): void {
    g.reset()
    for (const tenant of this.labelSpace().tenants) g.set({ tenant }, 0)
    for (const l of this.live) if (l.active && l.tenant !== null) g.inc({ tenant: l.tenant })
  }

  /** A per-route sum over the live legs, with every configured route at 0 when idle. */
  private publishPerRoute(g: Gauge, value: (l: LegCounters) => number): void {
    g.reset()
    for (const route of this.labelSpace().routes) g.set({ route: route.name }, 0)
    for (const l of this.live) {
      const v = value(l)
      if (v > 0) g.inc({ route: l.route }, v)
    }
  }

  /** What every series of `n` is registered with: its catalogue entry. */
  private spec(n: MetricName): { name: string; help: string; labelNames: string[]; registers: Registry[] } {
    return {
      name: PREFIX + n,
      help: CATALOGUE[n].help,
      labelNames: [...CATALOGUE[n].labels],
      registers: [this.registry]
    }
  }

  /** A counter the gateway increments (or its `cells` do, flushed at scrape time); seeded (all but ws_closes_total). */
  private counter(n: MetricName, cells?: CountCells): Counter {
    const c = new Counter({ ...this.spec(n), ...(cells === undefined ? {} : { collect: () => cells.flush() }) })
    cells?.bind(c)
    if (n !== 'ws_closes_total') this.seedable.set(n, c)
    return c
  }

  private histogram(n: MetricName, buckets: number[]): Histogram {
    const h = new Histogram({ ...this.spec(n), buckets })
    this.seedable.set(n, h)
    return h
  }

  /** A gauge the gateway sets, or (with `collect`) one read at each scrape. */
  private gauge(n: MetricName, collect?: (g: Gauge) => void): Gauge {
    if (collect === undefined) return new Gauge(this.spec(n))
    return new Gauge({
      ...this.spec(n),
      collect() {
        collect(this)
      }
    })
  }

  /** A counter rebuilt at each scrape from the per-route totals, with its seed series at 0 where nothing counted. */
  private fromTotals(n: MetricName, add: (c: Counter, route: string, t: Totals) => void): Counter {
    const self = this
    return new Counter({
      ...this.spec(n),
      collect() {
        this.reset()
        for (const [route, t] of self.totals()) add(this, route, t)
        self.seedPublished(n, this)
      }
    })
  }

  /**
   * Every series the gateway can count, at 0 from now on (telemetry/seeds.ts): `closed` from the modules
   * that count (server/metric-labels.ts), `space` read now and at each `reseed` (after a reload).
   */
  seed(closed: ClosedLabels, space: () => LabelSpace): void {
    this.labelSpace = space
    this.seeder = new Seeder({ ...closed, ...PUBLISHED_LABELS }, space)
    this.reseed()
  }

  /** Seed the series of what the label space names now (a reload's new routes), before they take traffic. */
  reseed(): void {
    this.seeder?.apply(this.seedable)
  }

  /** A counter rebuilt at each collection from the per-leg totals: its seed series, at 0 where nothing counted. */
  private seedPublished(metric: MetricName, c: Counter): void {
    for (const labels of this.seeder?.series(metric) ?? []) c.inc(labels, 0)
  }

  /** A new leg's counters; call `endLeg` exactly once when the leg is over. */
  startLeg(route: string): LegCounters {
    const c = new LegCounters(route)
    this.live.add(c)
    return c
  }

  endLeg(c: LegCounters): void {
    if (!this.live.delete(c)) return
    const t = this.endedTotals(c.route)
    for (const f of FIELDS) t[f] += c[f]
  }

  private endedTotals(route: string): Totals {
    let t = this.ended.get(route)
    if (t === undefined) {
      t = Object.fromEntries(FIELDS.map(f => [f, 0])) as Totals
      this.ended.set(route, t)
    }
    return t
  }

  /**
   * Frames found lost after their leg may have ended (a goodbye the vendor never completed): on the leg's
   * counters while it lives, else on its route's totals, so the counter still moves.
   */
  lateUnreplayed(c: LegCounters, frames: number): void {
    if (frames <= 0) return
    if (this.live.has(c)) c.dropFailoverUnreplayed += frames
    else this.endedTotals(c.route).dropFailoverUnreplayed += frames
  }

  /** Totals per route: ended legs plus the live ones. */
  totals(): Map<string, Totals> {
    const out = new Map<string, Totals>()
    for (const [route, t] of this.ended) out.set(route, { ...t })
    for (const c of this.live) {
      let t = out.get(c.route)
      if (t === undefined) {
        t = Object.fromEntries(FIELDS.map(f => [f, 0])) as Totals
        out.set(c.route, t)
      }
      for (const f of FIELDS) t[f] += c[f]
    }
    return out
  }
}
