/**
 * A bounded FIFO of audio frames, in bytes. Used before CONNECTED (hold) and while the vendor socket
 * is backed up. Frames are copied in, because uWS neuters the ArrayBuffer it lends once the message
 * handler returns. Off the steady-state path: the relay only touches this when it cannot write through.
 */
export class HoldBuffer {
  private frames: Buffer[] = []
  private head = 0
  bytes = 0
  /**
   * Frames given back after they were written (`recycle`), reused by `push` when the size matches: a
   * backlog that lasts (a vendor paced at 1× real time keeps live audio queued behind its replay) copies
   * every frame but allocates none once warm.
   */
  private readonly spare: Buffer[] = []

  get length(): number {
    return this.frames.length - this.head
  }

  /** Copy a frame in; the caller checks the byte bound first. */
  push(data: ArrayBuffer): void {
    const n = data.byteLength
    const last = this.spare.length - 1
    let copy: Buffer
    if (last >= 0 && this.spare[last].length === n) {
      copy = this.spare.pop()!
      copy.set(new Uint8Array(data))
    } else copy = Buffer.from(new Uint8Array(data))
    this.frames.push(copy)
    this.bytes += n
  }

  /** A shifted frame that nobody references any more (written: the socket copied it). */
  recycle(f: Buffer): void {
    if (this.spare.length < SPARE_FRAMES && f.length > 0) this.spare.push(f)
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
const SPARE_FRAMES = 64
