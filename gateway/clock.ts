/** An armed timer, as the clock that armed it knows it. Only that clock can clear it. */
export type TimerHandle = { readonly __timer: unique symbol }

/**
 * Where audio and upstream code read the time and arm timers. Production uses `systemClock`; tests
 * pass a fake clock and move time themselves, so no test sleeps and no test depends on the machine's
 * speed.
 */
export interface Clock {
  /** Milliseconds, monotonic. */
  now: () => number
  setTimeout: (fn: () => void, ms: number) => TimerHandle
  clearTimeout: (t: TimerHandle) => void
  /** Periodic background work: it never keeps the process alive on its own. */
  setInterval: (fn: () => void, ms: number) => TimerHandle
  clearInterval: (t: TimerHandle) => void
}

const asHandle = (t: NodeJS.Timeout): TimerHandle => t as unknown as TimerHandle
const asTimeout = (t: TimerHandle): NodeJS.Timeout => t as unknown as NodeJS.Timeout

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => asHandle(setTimeout(fn, ms)),
  clearTimeout: t => clearTimeout(asTimeout(t)),
  setInterval: (fn, ms) => asHandle(setInterval(fn, ms).unref()),
  clearInterval: t => clearInterval(asTimeout(t))
}

/**
 * A self-cancelling timer (the AudioHook reference's `startTimeout` subscription): at most one callback
 * pending. `set` and `every` replace whatever was pending; `clear` is harmless when nothing is; a cleared
 * or replaced callback never runs. Owners of a timer keep one `Timer` instead of a `TimerHandle | null` field.
 */
export class Timer {
  private handle: TimerHandle | null = null
  private repeats = false

  constructor(private readonly clock: Clock) {}

  /** A callback is armed (a timeout not yet run, or an interval not cleared). */
  get pending(): boolean {
    return this.handle !== null
  }

  /** `fn` once, after `ms`; no longer pending when it runs. */
  set(ms: number, fn: () => void): void {
    this.clear()
    const handle = this.clock.setTimeout(() => {
      if (this.handle !== handle) return
      this.handle = null
      fn()
    }, ms)
    this.handle = handle
    this.repeats = false
  }

  /** `fn` every `ms` until cleared (the clock's `setInterval`: it never keeps the process alive). */
  every(ms: number, fn: () => void): void {
    this.clear()
    const handle = this.clock.setInterval(() => {
      if (this.handle === handle) fn()
    }, ms)
    this.handle = handle
    this.repeats = true
  }

  clear(): void {
    const handle = this.handle
    if (handle === null) return
    this.handle = null
    if (this.repeats) this.clock.clearInterval(handle)
    else this.clock.clearTimeout(handle)
  }
}

/**
 * One `T` per clock, made on first use (`make`): the system clock's one in production, each fake clock's
 * own in a test. For what every leg of a clock shares (the flush wheel, the heartbeat).
 */
export function perClock<T>(make: (clock: Clock) => T): (clock: Clock) => T {
  const made = new WeakMap<Clock, T>()
  return clock => {
    let it = made.get(clock)
    if (it === undefined) {
      it = make(clock)
      made.set(clock, it)
    }
    return it
  }
}
