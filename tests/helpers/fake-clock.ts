import type { Clock, TimerHandle } from '../../gateway/clock'

interface Timer {
  id: number
  at: number
  every: number | null
  fn: () => void
}

/**
 * A clock that moves only when told. `advance(ms)` runs every timer that falls due, in time order
 * (ties in the order they were armed), with `now()` reading each timer's own due time while it runs;
 * intervals run as many times as fit.
 */
export class FakeClock implements Clock {
  private time = 0
  private nextId = 1
  private readonly timers = new Map<number, Timer>()

  constructor(start = 0) {
    this.time = start
  }

  now = (): number => this.time

  setTimeout = (fn: () => void, ms: number): TimerHandle => this.arm(fn, ms, null)
  setInterval = (fn: () => void, ms: number): TimerHandle => this.arm(fn, ms, Math.max(1, ms))
  clearTimeout = (t: TimerHandle): void => {
    this.timers.delete(t as unknown as number)
  }
  clearInterval = (t: TimerHandle): void => {
    this.timers.delete(t as unknown as number)
  }

  /** Timers still armed. */
  get pending(): number {
    return this.timers.size
  }

  /** Move time forward by `ms`, running what falls due. */
  advance(ms: number): void {
    const end = this.time + ms
    for (;;) {
      let due: Timer | null = null
      for (const t of this.timers.values()) if (t.at <= end && (due === null || t.at < due.at)) due = t
      if (due === null) break
      this.time = Math.max(this.time, due.at)
      if (due.every === null) this.timers.delete(due.id)
      else due.at += due.every
      due.fn()
    }
    this.time = end
  }

  /** Let promise continuations (mapping evaluations, control chains) run, then advance. */
  async tick(ms = 0): Promise<void> {
    await flush()
    this.advance(ms)
    await flush()
  }

  private arm(fn: () => void, ms: number, every: number | null): TimerHandle {
    const id = this.nextId++
    this.timers.set(id, { id, at: this.time + Math.max(0, ms), every, fn })
    return id as unknown as TimerHandle
  }
}

/** Run queued promise continuations until none are left (a few rounds of macrotask turns). */
export async function flush(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise<void>(resolve => setImmediate(resolve))
}
