import { type Clock, Timer } from '../../clock'
import type { Connection } from './connection-contract'

/**
 * One vendor connection following another in a handover (audio/session/handover.ts): where results are
 * placed on the call's timeline, the new connection's messages wait until the old one has ended (or its
 * close timeout), so the finals the old one still sends for the audio before the switch are placed first
 * and never read as before a later final. Both sides are here: `follow` and `defers` on the new
 * connection, `whenClosed` and `closed` on the one it follows.
 */
export class FollowOn {
  /** Vendor messages deferred while the connection followed says goodbye; null: none deferred. */
  private waiting: string[] | null = null
  /** The longest they wait: the close timeout of the connection followed. */
  private readonly wait: Timer
  private readonly closedFns: (() => void)[] = []

  /**
   * `over`: the connection is closed. `read`: what it does with a vendor text message, deferred or not.
   */
  constructor(
    clock: Clock,
    private readonly over: () => boolean,
    private readonly read: (text: string) => void
  ) {
    this.wait = new Timer(clock)
  }

  /** A vendor text message: true when it is deferred (read once the connection followed has ended). */
  defers(text: string): boolean {
    if (this.waiting === null) return false
    this.waiting.push(text)
    return true
  }

  /** From now on messages are deferred until `old` has ended, or `waitMs` has passed. */
  follow(old: Connection, waitMs: number): void {
    if (old.whenClosed === undefined) return
    const waiting: string[] = []
    this.waiting = waiting
    const release = (): void => {
      if (this.waiting !== waiting) return
      this.waiting = null
      this.wait.clear()
      for (const text of waiting) this.read(text)
    }
    this.wait.set(waitMs, release)
    old.whenClosed(release)
  }

  /** `fn` once the connection is over (at once if it is). */
  whenClosed(fn: () => void): void {
    if (this.over()) fn()
    else this.closedFns.push(fn)
  }

  /** The connection is over: whoever waits for it is told. */
  closed(): void {
    for (const fn of this.closedFns.splice(0)) fn()
  }
}
