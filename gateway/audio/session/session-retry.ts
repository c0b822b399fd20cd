import { type Clock, Timer } from '../../clock'
import type { ReplicaWalk } from './failover'

/** What a recovering session's next attempt needs of its session (audio/session/session.ts). */
export interface RetryHost {
  /** The session is recovering (its state is RECOVERING). */
  recovering: () => boolean
  /** Recovering with no replacement being opened. */
  idle: () => boolean
  /** Open the walk's next replica. */
  tryNext: () => void
  /** No replica could take over before the failover deadline. */
  timedOut: () => void
}

/**
 * When a recovering session tries again: after the walk's backoff, or once its suspects are proved (each
 * probed now; those that answer are tried). Only the latest attempt counts: a newer recovery or the close
 * makes an older proof's answer moot, and the close clears the timer.
 */
export class RetryPacer {
  private readonly timer: Timer
  /** Suspect proofs asked for (audio/session/failover.ts `proveSuspects`): only the latest one's answer counts. */
  private proofs = 0

  constructor(
    clock: Clock,
    private readonly walk: ReplicaWalk,
    private readonly host: RetryHost
  ) {
    this.timer = new Timer(clock)
  }

  /** Only replicas held back are left (the one being left, ones failing now): prove them, else wait a round. */
  prove(): void {
    const mine = ++this.proofs
    void this.walk.proveSuspects().then(any => {
      if (!this.host.idle() || mine !== this.proofs) return
      if (any) this.host.tryNext()
      else this.backoff()
    })
  }

  /** The next round after the walk's backoff, refilled; past the failover deadline: timed out. */
  backoff(): void {
    const wait = this.walk.backoff()
    if (wait === null) return this.host.timedOut()
    this.timer.set(wait, () => {
      if (!this.host.recovering()) return
      this.walk.refill()
      this.host.tryNext()
    })
  }

  /** The first attempt of a recovery, after `ms`. */
  after(ms: number): void {
    this.timer.set(ms, () => {
      if (this.host.recovering()) this.host.tryNext()
    })
  }

  /** A new recovery began: an older proof's answer is moot. */
  restart(): void {
    this.proofs++
  }

  /** The session closed: nothing pending runs. */
  cancel(): void {
    this.proofs++
    this.timer.clear()
  }
}
