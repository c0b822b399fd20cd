import { type Clock, Timer } from '../../clock'
import { JOIN_TICK_MS } from './join-mixer'

/** What the hub ticks: a joined contact (audio/session/join.ts Join). */
export interface Ticked {
  readonly key: string
  tick: (now: number) => void
}

/**
 * The one 20 ms clock of every joined contact of an instance (one interval, not a timer per contact):
 * armed while any join is open.
 */
export class JoinHub<J extends Ticked> {
  readonly joins = new Map<string, J>()
  private readonly timer: Timer

  constructor(private readonly clock: Clock) {
    this.timer = new Timer(clock)
  }

  add(join: J): void {
    this.joins.set(join.key, join)
    if (!this.timer.pending) this.timer.every(JOIN_TICK_MS, () => this.tick())
  }

  remove(join: J): void {
    if (this.joins.get(join.key) === join) this.joins.delete(join.key)
    if (this.joins.size === 0) this.timer.clear()
  }

  private tick(): void {
    const now = this.clock.now()
    for (const j of this.joins.values()) j.tick(now)
  }
}
