import { type Clock, Timer } from '../clock'
import type { Logger } from './log'

/** Lines of one kind written per window before the rest are counted instead (`log.flood.lines`' default). */
export const FLOOD_LINES = 20
/** The window of FLOOD_LINES, in ms (`log.flood.windowSeconds`' default). */
export const FLOOD_WINDOW_MS = 10_000

interface Window {
  /** When the window ends (clock ms). */
  until: number
  written: number
  suppressed: number
  /** Armed at the first suppressed line: writes the summary at the window's end. */
  readonly timer: Timer
}

/**
 * Lines an attacker can cause at will (refused credentials, 404s, refused upgrades, requests and relays,
 * oversize frames, the lines of a leg whose init was not accepted) go through here, by kind (their error
 * code, or the event of a line without one): the first `lines` of a kind per window of `windowMs` are
 * written, the rest only counted, and at the window's end one line
 * `{"event":"log_suppressed","kind":…,"suppressed":K}` says how many were left out. The kinds are a closed
 * set (error codes, leg outcomes, OAuth errors), so the map stays small. Driven by the injected clock.
 * One limiter per process: a worker of `serve --workers N` gets its share of the instance's lines
 * (`LogLimiter.of`), so an instance writes about as many whatever its worker count.
 */
export class LogLimiter {
  /** The limiter of one process, from `log.flood`: a worker of `workers` gets its share of the lines, rounded up. */
  static of(clock: Clock, log: () => Logger, flood: { lines: number; windowSeconds: number }, workers = 1): LogLimiter {
    return new LogLimiter(clock, log, Math.max(1, Math.ceil(flood.lines / workers)), flood.windowSeconds * 1000)
  }

  private readonly windows = new Map<string, Window>()

  constructor(
    private readonly clock: Clock,
    private readonly log: () => Logger,
    private readonly lines = FLOOD_LINES,
    private readonly windowMs = FLOOD_WINDOW_MS
  ) {}

  /** True when a line of `kind` may be written now (else it is counted as suppressed). */
  allow(kind: string): boolean {
    const now = this.clock.now()
    let w = this.windows.get(kind)
    if (w !== undefined && now >= w.until) {
      this.flush(kind, w)
      w = undefined
    }
    if (w === undefined) {
      w = { until: now + this.windowMs, written: 0, suppressed: 0, timer: new Timer(this.clock) }
      this.windows.set(kind, w)
    }
    if (w.written < this.lines) {
      w.written++
      return true
    }
    w.suppressed++
    if (!w.timer.pending) {
      const window = w
      w.timer.set(w.until - now, () => {
        if (this.windows.get(kind) === window) this.flush(kind, window)
      })
    }
    return false
  }

  /** Summaries of the windows still open are written now (shutdown). */
  close(): void {
    for (const [kind, w] of [...this.windows]) this.flush(kind, w)
  }

  private flush(kind: string, w: Window): void {
    this.windows.delete(kind)
    w.timer.clear()
    if (w.suppressed === 0) return
    this.log().warn(
      { event: 'log_suppressed', kind, suppressed: w.suppressed, windowMs: this.windowMs },
      `suppressed ${w.suppressed} similar lines`
    )
  }
}
