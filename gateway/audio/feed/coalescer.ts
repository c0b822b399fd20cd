import { type Clock, perClock, Timer } from '../../clock'
import type { FramesSpec } from '../../mapping/audio'

/**
 * Coalescing audio towards the vendor: the feed (audio/feed/feed.ts) writes runs of whole platform frames
 * of at least `chunkMs`; a partial chunk goes when its oldest byte has waited `chunkMs`, woken by the
 * one flush wheel of its clock (below), never by a timer of its own.
 */

/** Bytes of the platform's 8 kHz µ-law per ms. */
export const PLATFORM_BYTES_PER_MS = 8

/**
 * Ms of platform audio per feed write on a route. A mapping that declares `frames.chunkMs` gets exact
 * chunks of that size from its encoder (audio/feed/encoder.ts; a vendor such as AssemblyAI refuses a short
 * one mid-call), so the feed hands it each frame (0); one that declares none is coalesced to the
 * gateway's `audio.coalesceMs` (0: one vendor write per platform frame).
 */
export function feedChunkMs(frames: FramesSpec, coalesceMs: number): number {
  return frames.chunkMs === null ? coalesceMs : 0
}

/** What the wheel wakes: `wheelDue` is the wheel's own mark (0: not scheduled), never set by anyone else. */
export interface WheelClient {
  wheelDue: number
  onWheel: (now: number) => void
}

/** The wheel's resolution: a partial chunk waits at most `chunkMs` + this. */
export const TICK_MS = 10
/** Slots: more than the longest wait (1000 ms) in ticks, so a wake never laps the wheel. */
const SLOTS = 128

/**
 * One timer for every leg of a clock: clients ask to be woken at a time (`schedule`), and each tick
 * wakes those due. A client has at most one live wake: asking for a later one while an earlier stands
 * changes nothing (the client asks again when woken); an earlier one replaces it (the stale entry is
 * skipped). The interval runs only while some wake is pending; scheduling allocates nothing once warm.
 */
export class FlushWheel {
  private readonly slots: (WheelClient | null)[][] = Array.from({ length: SLOTS }, () => [])
  private readonly fill = new Uint32Array(SLOTS)
  /** Slot entries, stale ones included. */
  private entries = 0
  /** Clients with a wake pending. */
  private live = 0
  /** The last tick processed. */
  private done = 0
  private readonly timer: Timer
  private ticking = false

  constructor(private readonly clock: Clock) {
    this.timer = new Timer(clock)
  }

  /** Wake `c` at clock time `at` (ms) or within one tick after it. */
  schedule(c: WheelClient, at: number): void {
    if (!this.timer.pending) {
      this.done = Math.floor(this.clock.now() / TICK_MS)
      this.timer.every(TICK_MS, () => this.tick())
    }
    let tick = Math.ceil(at / TICK_MS)
    if (tick <= this.done) tick = this.done + 1
    else if (tick - this.done >= SLOTS) tick = this.done + SLOTS - 1
    if (c.wheelDue !== 0 && c.wheelDue <= tick) return
    if (c.wheelDue === 0) this.live++
    c.wheelDue = tick
    const s = tick % SLOTS
    this.slots[s][this.fill[s]++] = c
    this.entries++
  }

  /**
   * Wake `c` at `at` instead of the wake that stands, earlier or later (a partial chunk written once it
   * filled leaves its wake behind: the next chunk moves it instead of being woken early for nothing).
   * The entry that stood is skipped when its tick comes.
   */
  move(c: WheelClient, at: number): void {
    if (c.wheelDue !== 0) {
      c.wheelDue = 0
      this.live--
    }
    this.schedule(c, at)
  }

  /** `c` needs no wake any more (its leg is over): the wheel stops once nobody does. */
  cancel(c: WheelClient): void {
    if (c.wheelDue === 0) return
    c.wheelDue = 0
    if (--this.live === 0 && !this.ticking) this.stop()
  }

  /** Clients with a wake pending. */
  get pending(): number {
    return this.live
  }

  private tick(): void {
    const now = this.clock.now()
    const to = Math.floor(now / TICK_MS)
    this.ticking = true
    try {
      this.wake(now, to)
    } finally {
      this.ticking = false
    }
    if (this.done < to) this.done = to
    if (this.live === 0) this.stop()
  }

  /** Wake the clients due up to tick `to`, tick by tick. */
  private wake(now: number, to: number): void {
    while (this.done < to && this.live > 0) {
      const t = ++this.done
      const s = t % SLOTS
      const list = this.slots[s]
      const n = this.fill[s]
      // Clients woken here schedule at t + 1 or later: never into this slot.
      this.fill[s] = 0
      this.entries -= n
      for (let i = 0; i < n; i++) {
        const c = list[i]
        list[i] = null
        if (c === null || c.wheelDue !== t) continue
        c.wheelDue = 0
        this.live--
        c.onWheel(now)
      }
    }
  }

  /** Nobody waits: the interval stops and stale entries are let go. */
  private stop(): void {
    this.timer.clear()
    if (this.entries === 0) return
    for (let s = 0; s < SLOTS; s++) {
      this.slots[s].fill(null, 0, this.fill[s])
      this.fill[s] = 0
    }
    this.entries = 0
  }
}

/** The one flush wheel of `clock` (the system clock's in production, each fake clock's in tests). */
export const flushWheel = perClock(clock => new FlushWheel(clock))
