import { type Clock, Timer } from '../../clock'

/**
 * A vendor connection's timers (audio/connection/vendor-connection.ts): the deadline for the vendor's
 * readiness, the mapping's keepalive, and the deadline of its goodbye. Liveness has none of its own: the
 * clock's one heartbeat watches every vendor socket (upstream/heartbeat.ts).
 */
export class ConnectionTimers {
  private readonly ready: Timer
  /** The mapping's keepalive (audio/connection/control-frames.ts `keepalive`), stopped with `stopOpen`. */
  readonly keepalive: Timer
  private readonly close: Timer

  constructor(clock: Clock) {
    this.ready = new Timer(clock)
    this.keepalive = new Timer(clock)
    this.close = new Timer(clock)
  }

  /** `fn` after `ms` unless the vendor is ready first (`readyDone`). */
  readyBy(ms: number, fn: () => void): void {
    this.ready.set(ms, fn)
  }

  readyDone(): void {
    this.ready.clear()
  }

  /** `fn` after `ms`: the goodbye's deadline (stopped only by `stopAll`). */
  closeBy(ms: number, fn: () => void): void {
    this.close.set(ms, fn)
  }

  /** The connection closes: readiness and keepalive stop; the goodbye's deadline runs on. */
  stopOpen(): void {
    this.ready.clear()
    this.keepalive.clear()
  }

  /** Over: all stop. */
  stopAll(): void {
    this.stopOpen()
    this.close.clear()
  }
}
