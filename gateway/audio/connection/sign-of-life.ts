/** What a vendor socket counts and can do (upstream/ws-leg.ts `VendorSocket`). */
export interface SocketCounts {
  readonly bufferedAmount: number
  readonly bytesSent: number
  readonly unreadAtLoss: number
  /** Pings run on it. */
  readonly pinging: boolean
  /** A ping now; false when one is already out (or none can go). */
  pingNow(): boolean
}

/**
 * The vendor's last sign of life on one connection, in audio written (the connection counts platform
 * audio bytes, whatever the writes were): a pong answers everything written before its ping, exactly (a
 * ping travels in order behind the audio). A vendor message says less: the vendor read audio up to some
 * point, but what sat in the kernel's socket buffers then (ours and the vendor's, invisible from here;
 * tens of ms of audio on a busy machine) may never have been read. So while pings run (`pongs`), a
 * message only says the vendor is alive; without pings it stands for everything but our own socket
 * buffer, the best there is.
 * At a loss, what was written since is what the vendor may not have processed (audio/feed/feed.ts `recover`).
 * Updated on pings, pongs and vendor messages only: nothing per audio frame. It also answers a
 * handover's `confirm` (audio/session/handover.ts): with the pong to a ping sent when asked.
 */
export class SignOfLife {
  /** Pings run on this connection: only their pongs move the watermark. */
  pongs = false
  private writesAtPing = 0
  private pingAt = 0
  private writes = 0
  /** Clock ms of the last sign of life. */
  at = 0
  private confirmed: (() => void) | null = null
  private confirmNext = false

  /** Ready: everything before counts as seen. */
  reset(now: number, writes: number): void {
    this.writes = writes
    this.at = now
  }

  ping(now: number, writes: number): void {
    this.writesAtPing = writes
    this.pingAt = now
  }

  pong(socket: SocketCounts | null): void {
    this.advance(this.writesAtPing, this.pingAt)
    const done = this.confirmed
    if (done === null) return
    // The pong answered a ping that was out before the confirmation was asked for: one more round trip.
    if (this.confirmNext && socket?.pingNow() === true) {
      this.confirmNext = false
      return
    }
    this.confirmed = null
    done()
  }

  /**
   * `done` once the vendor has shown it read what it was sent up to now: the pong to a ping sent now (or
   * to the one after the ping already out). At once when no pings run. Never when the socket is lost first.
   */
  confirm(socket: SocketCounts | null, done: () => void): void {
    if (socket === null || !socket.pinging) return done()
    this.confirmed = done
    this.confirmNext = !socket.pingNow()
  }

  /** A vendor message at `at`: it had read all `written` but what `socket` still holds (see above). */
  messageOn(socket: SocketCounts, written: number, at: number): void {
    this.message(written - framesIn(socket.bufferedAmount, socket.bytesSent, written), at)
  }

  /** At a loss: what was written since the last sign of life, and what `socket` still held unread. */
  report(
    socket: SocketCounts | null,
    written: number
  ): { bytesSinceLife: number; unreadBytes: number; lastLifeAt: number } {
    const unread = socket === null ? 0 : framesIn(socket.unreadAtLoss, socket.bytesSent, written)
    return { bytesSinceLife: this.since(written), unreadBytes: unread, lastLifeAt: this.at }
  }

  /** A vendor message at `at`, when our socket buffer held all but the first `writes` (see above). */
  message(writes: number, at: number): void {
    if (!this.pongs) return this.advance(writes, at)
    if (at > this.at) this.at = at
  }

  /** The vendor had read the first `writes` frames at `at`. */
  private advance(writes: number, at: number): void {
    if (writes < this.writes) return
    this.writes = writes
    if (at > this.at) this.at = at
  }

  /** Frames written (of `total`) since the last sign of life. */
  since(total: number): number {
    return total - this.writes
  }
}

/** Audio (in `frames` units: the connection's audio bytes) that `bytes` of a socket buffer hold, from the socket's ratio so far. */
export function framesIn(bytes: number, bytesSent: number, frames: number): number {
  return bytes <= 0 || bytesSent === 0 ? 0 : Math.min(frames, Math.ceil((bytes * frames) / bytesSent))
}
