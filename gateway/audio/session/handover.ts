import { type Clock, Timer } from '../../clock'
import type { MappingInput } from '../../mapping/run'
import type { Logger } from '../../telemetry/log'
import type { Replica } from '../../upstream/pool'
import type { Connection } from '../connection/connection-contract'

/** What a handover needs of its session. */
export interface HandoverHost {
  readonly clock: Clock
  /** The mapping's `rotateAfterMs` (null: no rotation). */
  readonly rotateAfterMs: number | null
  /** The connection carrying audio now, when the session is READY (null otherwise). */
  current: () => Connection | null
  /** Opens a connection to `to` with `input` (the session's factory and events). */
  open: (to: Replica, input: MappingInput) => Connection
  /** The session's mapping input. */
  input: () => MappingInput
  /** `next` is ready and took the audio over from `old`: the session makes it current. */
  tookOver: (next: Connection, old: Connection, heldFrames: number) => void
  /** The session's logger now (a re-attached leg brings its own). */
  log: () => Logger
}

/**
 * Make-before-break: a second vendor connection opened while the current one still carries audio, made
 * current once ready (audio moves over without a gap, the old one says goodbye). One mechanism for
 * three reasons: the mapping's `rotateAfterMs` (a new vendor session on the same replica before the
 * vendor's own cap), a vendor that asks for a new session (`reconnect` control rule), and rebalancing
 * (another replica: upstream/rebalance.ts). At most one is under way.
 */
export class Handover {
  private next: Connection | null = null
  /** `next` is ready and waits for the current one to confirm what it was sent (`Connection.confirm`). */
  private confirming = false
  private readonly timer: Timer

  constructor(private readonly host: HandoverHost) {
    this.timer = new Timer(host.clock)
  }

  /** Opens the replacement of `from` on `to`; false when `from` is not current or one is under way. */
  begin(from: Connection, to: Replica = from.replica): boolean {
    if (from !== this.host.current() || this.next !== null) return false
    const input = this.host.input()
    this.next = this.host.open(to, from.handover === undefined ? input : { ...input, previous: from.handover() })
    return true
  }

  /**
   * `conn` is ready: true when it was this handover's. It takes over from `old` once `old` confirmed what
   * it was sent (a pong: a frozen or stalled vendor never confirms, and is then lost as any other, with its
   * replay going to `conn`: `takeReady`); so a switch leaves `old` at most a round trip of audio to read.
   */
  ready(conn: Connection, old: Connection): boolean {
    if (conn !== this.next) return false
    this.confirming = true
    const take = (): void => {
      // Still this handover's: nothing replaced `old` meanwhile (a recovery or a close takes `next` first).
      if (this.next !== conn) return
      this.next = null
      this.confirming = false
      this.host.tookOver(conn, old, conn.takeOver(old))
      conn.follow?.(old)
      if (conn.replica === old.replica)
        this.host.log().info({ event: 'rotated', upstream: conn.replica.name }, 'vendor session rotated before its cap')
      else
        this.host
          .log()
          .info(
            { event: 'moved', upstream: conn.replica.name, from: old.replica.name },
            'call moved to a less busy replica (rebalancing), make-before-break'
          )
      old.goodbye()
      this.arm()
    }
    if (old.confirm === undefined) take()
    else old.confirm(take)
    return true
  }

  /** The current connection was lost while a ready replacement waited for it: the replacement, now the session's. */
  takeReady(): Connection | null {
    const conn = this.confirming ? this.next : null
    this.next = null
    this.confirming = false
    return conn
  }

  /** `conn` failed: true when it was this handover's (dropped; the current connection goes on). */
  failed(conn: Connection, why: string): boolean {
    if (conn !== this.next) return false
    this.next = null
    this.confirming = false
    // The current connection keeps the audio.
    this.host
      .log()
      .warn({ event: 'rotation_failed', why }, 'could not open the replacement vendor session; keeping the current one')
    this.arm()
    return true
  }

  /** (Re)starts the rotation timer, when the mapping rotates. */
  arm(): void {
    const after = this.host.rotateAfterMs
    if (after === null) return
    this.timer.set(after, () => {
      const conn = this.host.current()
      if (conn !== null) this.begin(conn)
    })
  }

  /** A handover under way is abandoned (the session recovers or closes); with `andTimer`, no rotation later. */
  abandon(andTimer: boolean): void {
    this.next?.abort()
    this.next = null
    this.confirming = false
    if (andTimer) this.timer.clear()
  }
}
