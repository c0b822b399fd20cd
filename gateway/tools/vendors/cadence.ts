/**
 * Splits audio time into result boundaries: each `step` ms of audio crossed yields one tick.
 * `start` is where the current, not yet finalised, result segment begins.
 */
export class Cadence {
  audioMs = 0
  start = 0
  ticks = 0
  private next: number

  constructor(readonly step: number) {
    this.next = step
  }

  /** Adds audio; returns how many boundaries were crossed. */
  add(ms: number): number {
    this.audioMs += ms
    if (this.step <= 0) return 0
    let n = 0
    while (this.audioMs + 1e-9 >= this.next) {
      n++
      this.next += this.step
    }
    return n
  }

  /** Audio time of tick `i` counted from the last `add` (0-based among the ones it returned). */
  boundary(i: number, crossed: number): number {
    return this.next - this.step * (crossed - i)
  }

  /** Audio received since the last finalised segment. */
  get pending(): boolean {
    return this.audioMs > this.start + 1e-9
  }
}

/** Deterministic stand-in words for result number `n`. */
export function phrase(n: number): string[] {
  return ['emulated', 'segment', String(n)]
}

export function round3(x: number): number {
  return Math.round(x * 1000) / 1000
}
