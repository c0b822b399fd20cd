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

export class Metrics {
  readonly registry = new Registry()
  /** The last failovers, replica changes and refusals, for the status page (`GET /admin/recent`). */
  readonly recent = new RecentEvents()
  private readonly live = new Set<LegCounters>()
  private readonly ended = new Map<string, Totals>()

  readonly buildInfo: Gauge
  readonly draining: Gauge
  readonly configReloads: Counter
  readonly sessionsTotal: Counter
  readonly handshakeDuration: Histogram
  readonly vendorMessages: Counter
  readonly wsCloses: Counter
  readonly authFailures: Counter
  readonly validationFailures: Counter
  readonly frontDoorRefusals: Counter
  readonly mappingErrors: Counter
  readonly textRequests: Counter
  /** textRequests' per-request increments (count-cells.ts). */
  readonly textRequestCounts = new CountCells()
  readonly textDuration: Histogram
  readonly upstreamRequests: Counter
  /** upstreamRequests' per-request increments (count-cells.ts). */
  readonly upstreamRequestCounts = new CountCells()
  readonly upstreamDuration: Histogram
  readonly failovers: Counter
  readonly gapSeconds: Histogram
  readonly reattach: Counter
  readonly joins: Counter
  readonly moves: Counter
  readonly joinSilence: Counter
  readonly upstreamHealthy: Gauge
  readonly ejections: Counter
  readonly healthChecks: Counter
  readonly storeUp: Gauge
  readonly storeErrors: Counter
  readonly limitRefusals: Counter
  readonly upstreamRetries: Counter
  readonly teeSessions: Counter
  readonly teeMessages: Counter
  readonly textTeeDeliveries: Counter
  readonly workers: Gauge
  readonly workerRestarts: Counter
  readonly workerLegsActive: Gauge
  readonly tenantLegs: Counter
  readonly tenantRefusals: Counter
  readonly tenantUtterances: Counter
  /** tenantUtterances' per-request increments (count-cells.ts). */
  readonly tenantUtteranceCounts = new CountCells()
  /** Set by the server: every replica's health, read at scrape time. */
  replicaHealth: () => { route: string; upstream: string; healthy: boolean }[] = () => []
  storeIsUp: () => boolean = () => true
  /** Set by `seed`: the config's routes, replicas and tees (per-route gauges have a sample at 0 when idle). */
  labelSpace: () => LabelSpace = () => EMPTY_SPACE
  private seeder: Seeder | null = null
  private readonly seedable = new Map<MetricName, Seedable>()

  constructor() {
    const r = [this.registry]
    const self = this
    const name = (n: MetricName): string => PREFIX + n
    const help = (n: MetricName): string => CATALOGUE[n].help
    const labels = (n: MetricName): string[] => [...CATALOGUE[n].labels]
    const counter = (n: MetricName, cells?: CountCells): Counter => {
      const c = new Counter({
        name: name(n),
        help: help(n),
        labelNames: labels(n),
        registers: r,
        ...(cells === undefined ? {} : { collect: () => cells.flush() })
      })
      cells?.bind(c)
      if (n !== 'ws_closes_total') this.seedable.set(n, c)
      return c
    }
    const histogram = (n: MetricName, buckets: number[]): Histogram => {
      const h = new Histogram({ name: name(n), help: help(n), labelNames: labels(n), buckets, registers: r })
      this.seedable.set(n, h)
      return h
    }
    // Node's standard series under their standard names; `worker` tells the processes of an instance apart
    // (workers/aggregate-metrics.ts sets each worker's index; a single process is the main one).
    collectDefaultMetrics({ register: this.registry, labels: { worker: 'main' } })
    this.buildInfo = new Gauge({
      name: name('build_info'),
      help: help('build_info'),
      labelNames: labels('build_info'),
      registers: r
    })
    this.draining = new Gauge({ name: name('draining'), help: help('draining'), registers: r })
    this.configReloads = counter('config_reloads_total')
    this.sessionsTotal = counter('audio_sessions_total')
    this.handshakeDuration = histogram(
      'audio_handshake_duration_seconds',
      [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    )
    this.vendorMessages = counter('audio_vendor_messages_total')
    this.wsCloses = counter('ws_closes_total')
    this.authFailures = counter('auth_failures_total')
    this.validationFailures = counter('validation_failures_total')
    this.frontDoorRefusals = counter('front_door_refusals_total')
    this.mappingErrors = counter('mapping_errors_total')
    const httpBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    this.textRequests = counter('text_requests_total', this.textRequestCounts)
    this.textDuration = histogram('text_request_duration_seconds', httpBuckets)
    this.upstreamRequests = counter('upstream_requests_total', this.upstreamRequestCounts)
    this.upstreamDuration = histogram('upstream_request_duration_seconds', httpBuckets)
    this.failovers = counter('audio_failovers_total')
    this.upstreamRetries = counter('upstream_retries_total')
    this.gapSeconds = histogram('audio_gap_seconds', [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60])
    this.reattach = counter('audio_reattach_total')
    this.joins = counter('audio_joins_total')
    this.moves = counter('audio_moves_total')
    this.joinSilence = counter('audio_join_silence_samples_total')
    this.upstreamHealthy = new Gauge({
      name: name('upstream_healthy'),
      help: help('upstream_healthy'),
      labelNames: labels('upstream_healthy'),
      registers: r,
      collect() {
        this.reset()
        for (const h of self.replicaHealth()) this.set({ route: h.route, upstream: h.upstream }, h.healthy ? 1 : 0)
      }
    })
    this.ejections = counter('upstream_ejections_total')
    this.healthChecks = counter('upstream_health_checks_total')
    this.storeUp = new Gauge({
      name: name('store_up'),
      help: help('store_up'),
      registers: r,
      collect() {
        this.set(self.storeIsUp() ? 1 : 0)
      }
    })

    this.storeErrors = counter('store_errors_total')
    this.teeSessions = counter('audio_tee_sessions_total')
    this.teeMessages = counter('audio_tee_messages_total')
    this.textTeeDeliveries = counter('text_tee_deliveries_total')
    // Tee vendor sessions count under the route label <route>/<tee> (route.ts teeLabel); this splits it.
    new Counter({
      name: name('audio_tee_dropped_frames_total'),
      help: help('audio_tee_dropped_frames_total'),
      labelNames: labels('audio_tee_dropped_frames_total'),
      registers: r,
      collect() {
        this.reset()
        for (const [label, t] of self.totals()) {
          const at = label.indexOf('/')
          if (at < 0) continue
          const route = label.slice(0, at)
          const tee = label.slice(at + 1)
          for (const [reason, field] of Object.entries(TEE_DROPS)) {
            const n = t[field]
            if (n > 0) this.inc({ route, tee, reason }, n)
          }
        }
        self.seedPublished('audio_tee_dropped_frames_total', this)
      }
    })
    this.limitRefusals = counter('limit_refusals_total')
    this.workers = new Gauge({ name: name('workers'), help: help('workers'), registers: r })
    this.workerRestarts = counter('worker_restarts_total')
    this.workerLegsActive = new Gauge({
      name: name('worker_legs_active'),
      help: help('worker_legs_active'),
      labelNames: labels('worker_legs_active'),
      registers: r
    })

    this.tenantLegs = counter('tenant_legs_total')
    this.tenantRefusals = counter('tenant_refusals_total')
    this.tenantUtterances = counter('tenant_utterances_total', this.tenantUtteranceCounts)

    // Published at scrape time from the plain per-leg integers: nothing per frame touches prom-client.
    new Gauge({
      name: name('tenant_legs_active'),
      help: help('tenant_legs_active'),
      labelNames: labels('tenant_legs_active'),
      registers: r,
      collect() {
        this.reset()
        for (const tenant of self.labelSpace().tenants) this.set({ tenant }, 0)
        for (const l of self.live) if (l.active && l.tenant !== null) this.inc({ tenant: l.tenant })
      }
    })
    new Gauge({
      name: name('audio_sessions_active'),
      help: help('audio_sessions_active'),
      labelNames: labels('audio_sessions_active'),
      registers: r,
      collect() {
        this.reset()
        for (const route of self.labelSpace().routes) this.set({ route: route.name }, 0)
        for (const l of self.live) if (l.active) this.inc({ route: l.route })
      }
    })
    new Gauge({
      name: name('audio_buffered_bytes'),
      help: help('audio_buffered_bytes'),
      labelNames: labels('audio_buffered_bytes'),
      registers: r,
      collect() {
        this.reset()
        for (const route of self.labelSpace().routes) this.set({ route: route.name }, 0)
        for (const l of self.live) if (l.bufferedBytes > 0) this.inc({ route: l.route }, l.bufferedBytes)
      }
    })
    for (const [metric, { label, fields }] of Object.entries(PUBLISHED))
      new Counter({
        name: name(metric as MetricName),
        help: help(metric as MetricName),
        labelNames: labels(metric as MetricName),
        registers: r,
        collect() {
          this.reset()
          for (const [route, t] of self.totals())
            for (const [value, field] of Object.entries(fields)) {
              const n = t[field]
              if (n > 0) this.inc({ route, [label]: value }, n)
            }
          self.seedPublished(metric as MetricName, this)
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
