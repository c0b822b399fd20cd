import type { Logger } from '../../telemetry/log'
import type { SpanAttributes } from '../../telemetry/tracing'
import type { LegCounters, Metrics } from '../../telemetry/metrics'
import type { Replica } from '../../upstream/pool'
import type { SessionEventName } from './session-contract'
import type { SessionStats } from './session-stats'

/**
 * What a session's recovery tells the operator: `audio_failovers_total` by result, the gap histogram,
 * and one log line per step. Kept apart so that `session.ts` reads as its state machine.
 */
export class FailoverReport {
  constructor(
    private readonly metrics: Metrics,
    private readonly route: string,
    private readonly counters: LegCounters,
    /** The session's context: its `log` changes when a leg re-attaches. */
    private readonly ctx: { log: Logger },
    /** The session's own figures, for its leg's summary line. */
    private readonly stats: SessionStats,
    /** Tells the session's leg, for its trace (session-contract.ts `sessionEvent`). */
    private readonly tell: (name: SessionEventName, attributes: SpanAttributes) => void
  ) {}

  /** A connection was lost mid-call; a replacement opens after `backoffMs` (0: at once). */
  started(lost: Replica, why: string, replayed: number, unreplayed: number, backoffMs: number): void {
    this.stats.lost()
    this.tell('failover.start', { upstream: lost.name, why, replayFrames: replayed, unreplayed, backoffMs })
    this.ctx.log.warn(
      { event: 'failover_start', upstream: lost.name, why, replayFrames: replayed, unreplayed, backoffMs },
      'vendor session lost mid-call; opening a replacement, the platform leg stays open'
    )
    // Lost again soon after the last ready: the backoff is what keeps a flapping vendor from a storm.
    if (backoffMs > 0) this.metrics.failovers.inc({ route: this.route, result: 'backoff' })
  }

  /** A replacement is ready after `gapSeconds` without a vendor. */
  done(to: Replica, from: Replica | null, gapSeconds: number, queuedFrames: number): void {
    this.metrics.failovers.inc({ route: this.route, result: 'ok' })
    this.metrics.gapSeconds.observe({ route: this.route }, gapSeconds)
    this.stats.gap(gapSeconds)
    this.tell('failover.done', { upstream: to.name, from: from?.name, gapSeconds, queuedFrames })
    const gap = `gap ${Math.round(gapSeconds * 1000)} ms`
    this.metrics.recent.add({ kind: 'failover', route: this.route, upstream: to.name, from: from?.name, detail: gap })
    this.ctx.log.warn(
      {
        event: 'failover_done',
        upstream: to.name,
        from: from?.name,
        gapSeconds,
        queuedFrames,
        droppedFrames: this.counters.dropFailover
      },
      'vendor session replaced; audio flowing again'
    )
  }

  /** One replica of the walk could not be opened: unreachable on the first open, or a failed replacement. */
  attemptFailed(replica: Replica, why: string, firstOpen: boolean): void {
    this.tell('vendor.connect_failed', { upstream: replica.name, error: why, firstOpen })
    if (firstOpen)
      this.ctx.log.warn(
        { event: 'upstream_connect_failed', upstream: replica.name, error: why },
        'vendor replica unreachable; trying the next one'
      )
    else
      this.ctx.log.warn(
        { event: 'failover_attempt_failed', upstream: replica.name, why },
        'replacement vendor session failed; trying on'
      )
  }

  /**
   * A goodbye the vendor never completed (audio/connection/connection-contract.ts `unconfirmed`): the `frames` it
   * had not read are lost, counted as `failover_unreplayed` even when the leg has just ended.
   */
  unconfirmed(replica: Replica, frames: number): void {
    if (frames <= 0) return
    this.metrics.lateUnreplayed(this.counters, frames)
    this.ctx.log.warn(
      { event: 'goodbye_unconfirmed', upstream: replica.name, unreplayed: frames },
      'a vendor session ended without its close; the audio it had not read is counted lost'
    )
  }

  /** The failover deadline passed with no replica taking over. */
  timedOut(): void {
    this.metrics.failovers.inc({ route: this.route, result: 'failed' })
  }

  /** The recovery ends the leg (timed out, or a replacement's answer ends it) after `gapSeconds`. */
  failed(gapSeconds: number, detail: string | undefined): void {
    this.metrics.gapSeconds.observe({ route: this.route }, gapSeconds)
    this.stats.gap(gapSeconds)
    this.tell('failover.failed', { gapSeconds, detail })
    this.metrics.recent.add({
      kind: 'failover',
      route: this.route,
      code: 'UPSTREAM_CLOSED',
      detail: 'no replica took over'
    })
    this.ctx.log.error(
      { event: 'failover_failed', droppedFrames: this.counters.dropFailover, detail },
      'no vendor session could replace the lost one; ending the leg'
    )
  }
}
