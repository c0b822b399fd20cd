import { type Clock, perClock, Timer } from '../clock'

/**
 * One watched peer (upstream/ws-leg.ts `VendorSocket`): it says when it last heard from the peer, and the
 * heartbeat tells it when to ping and when it is lost. Hearing costs the peer one field write per read.
 */
export interface Beating {
  /** Clock ms of the last thing read from the peer: any message, a pong (or the start of the watch). */
  readonly heardAt: number
  /** A ping is out and unanswered (a frozen peer is not pinged again: its pong would answer the first). */
  readonly pingOut: boolean
  /** Silent this long (ms): a ping is due, and once more every `pingMs` while it stays silent and answered. */
  readonly pingMs: number
  /** Silent this long (ms): the peer is lost (`pingMs` + the pong timeout: the detection window). */
  readonly windowMs: number
  /** A ping is due now (the peer goes on writing: it may ride with the next write). */
  pingDue(now: number): void
  /** Silent for `windowMs`: lost. The heartbeat has already forgotten it. */
  lost(now: number): void
}

/** A check at least this often (ms), so a loss is seen at most this long after the window ends. */
export const MAX_TICK_MS = 250
/** Nor more often than this. */
const MIN_TICK_MS = 50

/** How often a peer with these settings needs looking at: a quarter of its pong timeout, within the bounds. */
export function tickFor(pingMs: number, windowMs: number): number {
  return Math.min(MAX_TICK_MS, pingMs, Math.max(MIN_TICK_MS, (windowMs - pingMs) / 4))
}

/**
 * One heartbeat for every watched peer on a clock (so one per process in production): a single interval
 * timer walks them all, where each leg had its own timer. A peer heard from within its `pingMs` costs the
 * walk two comparisons and nothing else: no ping goes to a vendor that speaks. A silent one is asked for a
 * ping once per `pingMs`; one silent for its whole `windowMs` is lost, found on the first tick that sees
 * it (at most one tick late). The timer runs only while there is something to watch.
 *
 * A tick that comes late (a busy or stopped event loop) declares nobody lost at once: timers run before
 * sockets are read, so what a peer sent meanwhile may be waiting unread. It judges right after the next
 * read instead (a timer of 0 ms: the next turn of the event loop, after its poll for I/O), so a loop that
 * is late on every tick still finds a frozen peer.
 */
export class Heartbeat {
  private readonly watched = new Set<Beating>()
  private readonly timer: Timer
  private tickMs = MAX_TICK_MS
  private lastTick = 0

  constructor(private readonly clock: Clock) {
    this.timer = new Timer(clock)
  }

  /** Peers watched now. */
  get size(): number {
    return this.watched.size
  }

  /** The interval of the one timer (ms); null while nothing is watched. */
  get interval(): number | null {
    return this.timer.pending ? this.tickMs : null
  }

  watch(peer: Beating): void {
    this.watched.add(peer)
    const tick = tickFor(peer.pingMs, peer.windowMs)
    if (this.timer.pending && tick >= this.tickMs) return
    this.tickMs = this.timer.pending ? Math.min(tick, this.tickMs) : tick
    this.arm()
  }

  forget(peer: Beating): void {
    if (this.watched.delete(peer) && this.watched.size === 0) this.timer.clear()
  }

  private arm(): void {
    this.lastTick = this.clock.now()
    this.timer.every(this.tickMs, () => this.tick())
  }

  /** One walk over every watched peer (the timer's; a test may call it at times of its own). */
  tick(now: number = this.clock.now()): void {
    const late = now - this.lastTick > this.tickMs * 1.5
    this.lastTick = now
    this.walk(now, true, !late)
    if (late) this.clock.setTimeout(() => this.walk(this.clock.now(), false, true), 0)
  }

  /** Pings to the silent (`ping`), and the silent for their whole window lost (`judge`). */
  private walk(now: number, ping: boolean, judge: boolean): void {
    for (const peer of this.watched) {
      const silent = now - peer.heardAt
      if (silent < peer.pingMs) continue
      if (silent >= peer.windowMs) {
        if (!judge) continue
        this.watched.delete(peer)
        peer.lost(now)
      } else if (ping && !peer.pingOut) peer.pingDue(now)
    }
    if (this.watched.size === 0) this.timer.clear()
  }
}

/** The heartbeat of `clock`: one per clock, so one per process on the system clock, one per fake clock in a test. */
export const heartbeatOf = perClock(clock => new Heartbeat(clock))
