/**
 * A bounded FIFO of audio frames, in bytes. Used before CONNECTED (hold) and while the vendor socket
 * is backed up. Frames are copied in, because uWS neuters the ArrayBuffer it lends once the message
 * handler returns. Off the steady-state path: the relay only touches this when it cannot write through.
 */
export class HoldBuffer {
  private frames: Buffer[] = []
  private head = 0
  bytes = 0

  get length(): number {
    return this.frames.length - this.head
  }

  /** Copy a frame in; the caller checks the byte bound first. */
  push(data: ArrayBuffer): void {
    const copy = Buffer.from(new Uint8Array(data))
    this.frames.push(copy)
    this.bytes += copy.length
  }

  /** Put already-copied frames in front of what is queued (replay before live audio). */
  unshiftAll(frames: readonly Buffer[]): void {
    if (frames.length === 0) return
    this.frames = [...frames, ...this.frames.slice(this.head)]
    this.head = 0
    for (const f of frames) this.bytes += f.length
  }

  /** Bytes of the oldest frame (0 when empty). */
  get nextBytes(): number {
    return this.frames[this.head]?.length ?? 0
  }

  shift(): Buffer | undefined {
    const f = this.frames[this.head]
    if (f === undefined) return undefined
    this.frames[this.head] = EMPTY
    this.head++
    this.bytes -= f.length
    if (this.head === this.frames.length) {
      this.frames = []
      this.head = 0
    } else if (this.head > 1024 && this.head * 2 > this.frames.length) {
      this.frames = this.frames.slice(this.head)
      this.head = 0
    }
    return f
  }

  clear(): number {
    const n = this.length
    this.frames = []
    this.head = 0
    this.bytes = 0
    return n
  }
}

const EMPTY = Buffer.alloc(0)
