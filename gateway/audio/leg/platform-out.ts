import type { RouteRuntime } from '../../route'
import type { Logger } from '../../telemetry/log'
import type { LegCounters, Metrics } from '../../telemetry/metrics'
import { type Keep, scrubberFor } from '../../telemetry/scrub'
import { EarlyResults } from './early-results'
import type { PlatformLeg } from './leg-contract'
import { unhandled } from '../../result'

/**
 * What one leg sends its platform. Every text frame is scrubbed of the route's secrets, except those the
 * caller sent itself (telemetry/scrub.ts: the answer never confirms a guess), and counted. Vendor results
 * that come before CONNECTED are kept (bounded: audio/leg/early-results.ts). When the platform's socket backs
 * up past `platformHighWaterBytes`, reading from the vendor pauses (`backedUp`) until it drains.
 */
export class PlatformOut {
  readonly early: EarlyResults
  private paused = false

  constructor(
    private readonly platform: PlatformLeg,
    private readonly deps: { route: RouteRuntime; metrics: Metrics; platformHighWaterBytes: number },
    private readonly counters: LegCounters,
    private readonly log: () => Logger,
    private readonly sentByCaller: Keep,
    private readonly reading: { backedUp: () => void; drained: () => void }
  ) {
    this.early = new EarlyResults((n, first) => this.countEarlyDropped(first, n))
  }

  /** A frame as it is (an ERROR before a close): scrubbed; counted unless dropped. uWS's send status. */
  frame(text: string): number {
    const secrets = this.deps.route.config.secrets
    const status = this.platform.sendText(
      secrets === undefined ? text : scrubberFor(secrets).json(text, this.sentByCaller)
    )
    if (status !== 2) this.counters.framesToPlatform++
    return status
  }

  /** A CONNECTED or MESSAGE frame: sent, counted, and the vendor paused when the platform backs up. */
  send(text: string): void {
    const status = this.frame(text)
    this.counters.bytesToPlatform += text.length
    if (status === 2) {
      this.counters.framesToPlatform++
      this.log().warn(
        { event: 'platform_backpressure_drop' },
        'a message to the platform was dropped at the backpressure limit'
      )
    } else if (status === 0 && !this.paused && this.platform.bufferedAmount() >= this.deps.platformHighWaterBytes) {
      this.paused = true
      this.reading.backedUp()
    }
  }

  /** A vendor result, as the leg's state says (leg-contract.ts ON_RESULT): sent (true), kept until CONNECTED, or dropped. */
  result(text: string, action: 'send' | 'early' | 'drop'): boolean {
    switch (action) {
      case 'send':
        this.send(text)
        return true
      case 'early':
        this.early.keep(text)
        return false
      case 'drop':
        return false
      default:
        return unhandled(action)
    }
  }

  /** The platform's socket drained: reading from the vendor resumes once it is below the high-water mark. */
  drained(): void {
    if (this.paused && this.platform.bufferedAmount() < this.deps.platformHighWaterBytes) {
      this.paused = false
      this.reading.drained()
    }
  }

  private countEarlyDropped(first: boolean, n: number): void {
    this.deps.metrics.vendorMessages.inc({ route: this.deps.route.name, result: 'dropped_before_connected' }, n)
    if (!first) return
    this.log().warn(
      { event: 'early_results_dropped', count: n, kept: this.early.size },
      'vendor results that came before CONNECTED were dropped (over the bound of results kept, or the leg ended first)'
    )
  }
}
