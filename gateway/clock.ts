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
