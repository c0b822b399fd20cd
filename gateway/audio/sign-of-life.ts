/**
 * The vendor's last sign of life on one connection, in audio written (the connection counts platform
 * audio bytes, whatever the writes were): a pong answers everything written before its ping; a vendor
 * message, everything but what is still in our socket buffer.
 * At a loss, what was written since is what the vendor may not have processed (audio/relay.ts `recover`).
 * Updated on pings, pongs and vendor messages only: nothing per audio frame.
 */
export class SignOfLife {
  private writesAtPing = 0
  private pingAt = 0
  private writes = 0
  /** Clock ms of the last sign of life. */
  at = 0

  /** Ready: everything before counts as seen. */
  reset(now: number, writes: number): void {
    this.writes = writes
    this.at = now
  }

  ping(now: number, writes: number): void {
    this.writesAtPing = writes
    this.pingAt = now
  }

  pong(): void {
    this.seen(this.writesAtPing, this.pingAt)
  }

  /** The vendor had read the first `writes` frames at `at`. */
  seen(writes: number, at: number): void {
    if (writes < this.writes) return
    this.writes = writes
    this.at = at
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
