import { RecentEvents } from './recent'
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { CountCells } from './count-cells'
import { CATALOGUE, type MetricName, PREFIX } from './catalogue'

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
  constructor(readonly route: string) {}
}

type Totals = Omit<LegCounters, 'route' | 'active' | 'bufferedBytes'>
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
  /** Set by the server: every replica's health, read at scrape time. */
  replicaHealth: () => { route: string; upstream: string; healthy: boolean }[] = () => []
  storeIsUp: () => boolean = () => true
  /** Set by the server: every configured route, so per-route gauges have a sample at 0 when idle. */
  routeNames: () => readonly string[] = () => []

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
      return c
    }
    collectDefaultMetrics({ register: this.registry, prefix: PREFIX })
    this.buildInfo = new Gauge({
      name: name('build_info'),
      help: help('build_info'),
      labelNames: labels('build_info'),
      registers: r
    })
    this.draining = new Gauge({ name: name('draining'), help: help('draining'), registers: r })
    this.configReloads = counter('config_reloads_total')
    this.sessionsTotal = counter('audio_sessions_total')
    this.handshakeDuration = new Histogram({
      name: name('audio_handshake_duration_seconds'),
      help: help('audio_handshake_duration_seconds'),
      labelNames: labels('audio_handshake_duration_seconds'),
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r
    })
    this.vendorMessages = counter('audio_vendor_messages_total')
    this.wsCloses = counter('ws_closes_total')
    this.authFailures = counter('auth_failures_total')
    this.validationFailures = counter('validation_failures_total')
    this.frontDoorRefusals = counter('front_door_refusals_total')
    this.mappingErrors = counter('mapping_errors_total')
    const httpBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    this.textRequests = counter('text_requests_total', this.textRequestCounts)
    this.textDuration = new Histogram({
      name: name('text_request_duration_seconds'),
      help: help('text_request_duration_seconds'),
      labelNames: labels('text_request_duration_seconds'),
      buckets: httpBuckets,
      registers: r
    })
    this.upstreamRequests = counter('upstream_requests_total', this.upstreamRequestCounts)
    this.upstreamDuration = new Histogram({
      name: name('upstream_request_duration_seconds'),
      help: help('upstream_request_duration_seconds'),
      labelNames: labels('upstream_request_duration_seconds'),
      buckets: httpBuckets,
      registers: r
    })
    this.failovers = counter('audio_failovers_total')
    this.upstreamRetries = counter('upstream_retries_total')
    this.gapSeconds = new Histogram({
      name: name('audio_gap_seconds'),
      help: help('audio_gap_seconds'),
      labelNames: labels('audio_gap_seconds'),
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60],
      registers: r
    })
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
          for (const [reason, n] of [
            ['backpressure', t.dropBackpressure],
            ['hold_overflow', t.dropHold],
            ['failover', t.dropFailover],
            ['failover_unreplayed', t.dropFailoverUnreplayed],
            ['ended', t.dropAfterClose]
          ] as const)
            if (n > 0) this.inc({ route, tee, reason }, n)
        }
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

    // Published at scrape time from the plain per-leg integers: nothing per frame touches prom-client.
    new Gauge({
      name: name('audio_sessions_active'),
      help: help('audio_sessions_active'),
      labelNames: labels('audio_sessions_active'),
      registers: r,
      collect() {
        this.reset()
        for (const route of self.routeNames()) this.set({ route }, 0)
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
        for (const route of self.routeNames()) this.set({ route }, 0)
        for (const l of self.live) if (l.bufferedBytes > 0) this.inc({ route: l.route }, l.bufferedBytes)
      }
    })
    const publish = (metric: MetricName, pairs: [string, (t: Totals) => number][], labelName: string): void => {
      new Counter({
        name: name(metric),
        help: help(metric),
        labelNames: labels(metric),
        registers: r,
        collect() {
          this.reset()
          for (const [route, t] of self.totals()) {
            for (const [value, get] of pairs) {
              const n = get(t)
              if (n > 0) this.inc({ route, [labelName]: value }, n)
            }
          }
        }
      })
    }
    publish(
      'audio_frames_total',
      [
        ['from_platform', t => t.framesFromPlatform],
        ['to_vendor', t => t.framesToVendor],
        ['from_vendor', t => t.framesFromVendor],
        ['to_platform', t => t.framesToPlatform]
      ],
      'direction'
    )
    publish(
      'audio_bytes_total',
      [
        ['from_platform', t => t.bytesFromPlatform],
        ['to_vendor', t => t.bytesToVendor],
        ['from_vendor', t => t.bytesFromVendor],
        ['to_platform', t => t.bytesToPlatform]
      ],
      'direction'
    )
    publish(
      'audio_dropped_frames_total',
      [
        ['hold_overflow', t => t.dropHold],
        ['backpressure', t => t.dropBackpressure],
        ['vendor_binary', t => t.dropVendorBinary],
        ['after_close', t => t.dropAfterClose],
        ['failover', t => t.dropFailover],
        ['vendor_paused', t => t.dropVendorPaused],
        ['failover_unreplayed', t => t.dropFailoverUnreplayed]
      ],
      'reason'
    )
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
