/**
 * The load generators' pacing (loadgen.ts, soak/platform.ts): 20 ms frames on a grid split into `slots`
 * phases, so legs spread their sends over the frame period. Frame k of slot s is due at
 * t0 + s × (20 / slots) ms + k × 20 ms. ONE timer ticks every slot period, aimed at t0 + n × period (so
 * lateness never accumulates), and hands each slot the index of its latest due frame; a late tick hands
 * over a larger index and the caller sends every frame up to it (catching up).
 */
import { FRAME_MS } from './lib'

export class SlotTicker {
  private readonly slotMs: number
  private readonly slotK: number[]
  private readonly t0 = performance.now()
  private tickNo = 0
  private timer: NodeJS.Timeout | null = null
  private stopped = false
  /** Lateness figures since the last `resetLateness`. */
  maxLateMs = 0
  lateTicks = 0
  ticks = 0

  constructor(
    private readonly slots: number,
    /** Every frame of `slot` up to index k (inclusive) is due. */
    private readonly due: (slot: number, k: number) => void
  ) {
    this.slotMs = FRAME_MS / slots
    this.slotK = new Array<number>(slots).fill(-1)
  }

  /** The index of `slot`'s next grid point from now (where a leg that starts now begins). */
  nextK(slot: number): number {
    return Math.floor((performance.now() - this.t0 - slot * this.slotMs) / FRAME_MS) + 1
  }

  /** Start ticking (idempotent). */
  start(): void {
    if (this.timer === null && !this.stopped) this.schedule()
  }

  stop(): void {
    this.stopped = true
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
  }

  resetLateness(): void {
    this.maxLateMs = 0
    this.lateTicks = 0
    this.ticks = 0
  }

  private schedule(): void {
    const now = performance.now()
    this.tickNo = Math.max(this.tickNo + 1, Math.floor((now - this.t0) / this.slotMs) + 1)
    this.timer = setTimeout(this.tick, Math.max(0, this.t0 + this.tickNo * this.slotMs - now))
  }

  private readonly tick = (): void => {
    this.timer = null
    if (this.stopped) return
    const now = performance.now()
    const late = now - (this.t0 + this.tickNo * this.slotMs)
    this.ticks++
    if (late > this.maxLateMs) this.maxLateMs = late
    if (late > FRAME_MS) this.lateTicks++
    for (let s = 0; s < this.slots; s++) {
      const k = Math.floor((now - this.t0 - s * this.slotMs) / FRAME_MS)
      if (k <= this.slotK[s]) continue
      this.slotK[s] = k
      this.due(s, k)
    }
    this.schedule()
  }
}
