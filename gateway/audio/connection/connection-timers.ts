import type { Clock, TimerHandle } from '../../clock'

/**
 * A vendor connection's timers (audio/connection/vendor-connection.ts): the deadline for the vendor's
 * readiness, the mapping's keepalive, and the deadline of its goodbye. Liveness has none of its own: the
 * clock's one heartbeat watches every vendor socket (upstream/heartbeat.ts).
 */
export class ConnectionTimers {
  private ready: TimerHandle | null = null
  private keepalive: TimerHandle | null = null
  private close: TimerHandle | null = null

  constructor(private readonly clock: Clock) {}

  /** `fn` after `ms` unless the vendor is ready first (`readyDone`). */
  readyBy(ms: number, fn: () => void): void {
    this.ready = this.clock.setTimeout(() => {
      this.ready = null
      fn()
    }, ms)
  }

  readyDone(): void {
    if (this.ready !== null) this.clock.clearTimeout(this.ready)
    this.ready = null
  }

  /** The keepalive's interval (audio/connection/control-frames.ts `keepalive`), stopped with `stopOpen`. */
  keepWith(handle: TimerHandle | null): void {
    this.keepalive = handle
  }

  /** `fn` after `ms`: the goodbye's deadline (stopped only by `stopAll`). */
  closeBy(ms: number, fn: () => void): void {
    this.close = this.clock.setTimeout(() => {
      this.close = null
      fn()
    }, ms)
  }

  /** The connection closes: readiness and keepalive stop; the goodbye's deadline runs on. */
  stopOpen(): void {
    this.readyDone()
    if (this.keepalive !== null) this.clock.clearInterval(this.keepalive)
    this.keepalive = null
  }

  /** Over: all stop. */
  stopAll(): void {
    this.stopOpen()
    if (this.close !== null) this.clock.clearTimeout(this.close)
    this.close = null
  }
}
