/** Audio held as whole entries that can go, oldest first, in front of a leg's queue (`FrameQueue.prependFrom`). */
export interface RingContent {
  /** Entries held. */
  readonly length: number
  readonly bytes: number
  /** Platform frames held. */
  readonly frames: number
  /** Copy the content, oldest first, to `dst` at `at`, and its entries ([bytes, frames] pairs) to `entries` from entry `e`. */
  copyOut(dst: Buffer, at: number, entries: Uint32Array, e: number): void
  /** Empty it; returns the platform frames it held. */
  clear(): number
}

/**
 * Audio bytes in one circular buffer, as entries (a platform frame, or a run of whole frames written as
 * one chunk) with their byte length and how many platform frames each holds: the leg's queue
 * (`FrameQueue`). Pushing copies the bytes in, nothing is allocated per frame. Entries are never split,
 * so every count stays in platform frames. An entry's bytes and frames sit side by side in one table
 * (the per-frame path touches one object for them, not two). (The replay ring, audio/feed/replay-ring.ts,
 * keeps its entries the same way in slabs of a shared pool.)
 */
export class FrameRing implements RingContent {
  protected buf: Buffer
  /** Byte offset of the oldest entry. */
  protected start = 0
  /** [bytes, platform frames] of each entry, oldest first from `head` (circular). */
  protected entries: Uint32Array
  /** Entries the table has room for (half its length). */
  protected slots: number
  /** Index of the oldest entry. */
  protected head = 0
  /** Entries held. */
  length = 0
  bytes = 0
  /** Platform frames held. */
  frames = 0
  /** Platform frames in the last run taken (`takeRun`). */
  runFrames = 0

  constructor(bytes: number, entries: number) {
    this.buf = bytes === 0 ? EMPTY : Buffer.allocUnsafeSlow(bytes)
    this.entries = new Uint32Array(2 * entries)
    this.slots = entries
  }

  get capacity(): number {
    return this.buf.length
  }

  /** Copy `src` in as one entry of `frames` platform frames; the caller has made room. */
  protected put(src: Uint8Array, frames: number): void {
    const n = src.length
    const cap = this.buf.length
    let pos = this.start + this.bytes
    if (pos >= cap) pos -= cap
    const first = cap - pos
    if (n <= first) this.buf.set(src, pos)
    else {
      // Wraps around the end: once per turn of the buffer, not per frame.
      this.buf.set(src.subarray(0, first), pos)
      this.buf.set(src.subarray(first), 0)
    }
    let e = this.head + this.length
    if (e >= this.slots) e -= this.slots
    this.entries[2 * e] = n
    this.entries[2 * e + 1] = frames
    this.length++
    this.bytes += n
    this.frames += frames
  }

  /** Bytes of the oldest entry (0 when empty). */
  get nextBytes(): number {
    return this.length === 0 ? 0 : this.entries[2 * this.head]
  }

  /** Platform frames of the oldest entry (0 when empty). */
  get nextFrames(): number {
    return this.length === 0 ? 0 : this.entries[2 * this.head + 1]
  }

  /** Drop the oldest entry; returns its platform frames. */
  dropFront(): number {
    const h = this.head
    const n = this.entries[2 * h]
    const f = this.entries[2 * h + 1]
    this.head = h + 1 === this.slots ? 0 : h + 1
    this.length--
    this.bytes -= n
    this.frames -= f
    this.start += n
    if (this.start >= this.buf.length) this.start -= this.buf.length
    if (this.length === 0) this.start = this.head = 0
    return f
  }

  /**
   * Drop the first `frames` platform frames of the oldest entry (fewer than it holds), keeping the rest
   * as that entry: a replay that starts inside a write (audio/feed/feed.ts `recover`). An entry's frames
   * are all the same size, so its bytes split at a frame boundary.
   */
  trimFront(frames: number): void {
    const h = this.head
    const f = this.entries[2 * h + 1]
    if (this.length === 0 || frames <= 0 || frames >= f) return
    const n = (this.entries[2 * h] / f) * frames
    this.entries[2 * h] -= n
    this.entries[2 * h + 1] = f - frames
    this.bytes -= n
    this.frames -= frames
    this.start += n
    if (this.start >= this.buf.length) this.start -= this.buf.length
  }

  /** Bytes of the oldest entries, whole, until at least `min` (at least one entry; all of them when they hold less). */
  runBytes(min: number): number {
    let n = 0
    let e = this.head
    for (let i = 0; i < this.length && (i === 0 || n < min); i++) {
      n += this.entries[2 * e]
      e = e + 1 === this.slots ? 0 : e + 1
    }
    return n
  }

  /**
   * Take the run `runBytes(min)` describes out as one view (`runFrames`: its platform frames). The view
   * is valid until the next push or take on any ring: sinks copy it synchronously (audio/feed/feed.ts).
   */
  takeRun(min: number): Buffer {
    let n = 0
    let frames = 0
    let e = this.head
    let k = 0
    const entries = this.entries
    while (k < this.length && (k === 0 || n < min)) {
      n += entries[2 * e]
      frames += entries[2 * e + 1]
      e = e + 1 === this.slots ? 0 : e + 1
      k++
    }
    const pos = this.start
    const cap = this.buf.length
    let out: Buffer
    if (pos + n <= cap) out = this.buf.subarray(pos, pos + n)
    else {
      if (scratch.length < n) scratch = Buffer.allocUnsafeSlow(Math.max(n, scratch.length * 2))
      this.buf.copy(scratch, 0, pos, cap)
      this.buf.copy(scratch, cap - pos, 0, n - (cap - pos))
      out = scratch.subarray(0, n)
    }
    this.head = e
    this.length -= k
    this.bytes -= n
    this.frames -= frames
    this.start = pos + n >= cap ? pos + n - cap : pos + n
    if (this.length === 0) this.start = this.head = 0
    this.runFrames = frames
    return out
  }

  /** Empty it; returns the platform frames it held. */
  clear(): number {
    const f = this.frames
    this.start = this.head = this.length = this.bytes = this.frames = 0
    return f
  }

  /** Copy the content, oldest first, to `dst` at `at`, and its entries to `entries` from entry `e` (growing, replay). */
  copyOut(dst: Buffer, at: number, entries: Uint32Array, e: number): void {
    const cap = this.buf.length
    const first = Math.min(this.bytes, cap - this.start)
    this.buf.copy(dst, at, this.start, this.start + first)
    if (first < this.bytes) this.buf.copy(dst, at + first, 0, this.bytes - first)
    for (let i = 0, h = this.head; i < this.length; i++, h = h + 1 === this.slots ? 0 : h + 1) {
      entries[2 * (e + i)] = this.entries[2 * h]
      entries[2 * (e + i) + 1] = this.entries[2 * h + 1]
    }
  }
}

const EMPTY = Buffer.alloc(0)
const NO_ENTRIES = new Uint32Array(0)
/** Where a run that wraps around a ring's end is made contiguous (one for all legs: sinks copy at once). */
let scratch = Buffer.allocUnsafeSlow(8192)
/** Room for the partial chunk of the default coalescing (100 ms: 800 bytes); a backlog doubles it. */
const FIRST_BYTES = 1024
const FIRST_ENTRIES = 16
/** A queue that grew past this gives its memory back once it is empty (a backlog is over). */
const SHRINK_ABOVE = 16384

/**
 * The leg's queue, in bytes: audio held before the vendor is first ready, queued while it is backed up,
 * gated or being replaced, the replay put in front of it, and the partial chunk being coalesced. Frames
 * are copied in (uWS neuters the ArrayBuffer it lends once the message handler returns) into one buffer
 * that grows by doubling (the feed bounds it) and is given back once a large backlog is gone.
 */
export class FrameQueue extends FrameRing {
  constructor() {
    super(0, 0)
  }

  /** Copy one entry in (a platform frame: `frames` 1); the caller checks the byte bound first. */
  push(src: Uint8Array, frames = 1): void {
    if (this.bytes + src.length > this.buf.length || this.length === this.slots) this.grow(src.length, 0)
    this.put(src, frames)
  }

  /** Everything `front` holds goes in front of what is queued (replay before the queue), and `front` is emptied. */
  prependFrom(front: RingContent): void {
    if (front.length === 0) return
    this.grow(front.bytes, front.length, front)
    front.clear()
  }

  /** Give the memory back if a backlog made it large and it is empty now. */
  shrink(): void {
    if (this.length !== 0 || this.buf.length <= SHRINK_ABOVE) return
    this.buf = EMPTY
    this.entries = NO_ENTRIES
    this.slots = 0
    this.clear()
  }

  /** Room for `bytes` and `more` entries more (`front`: content to put first): one new linear buffer. */
  private grow(bytes: number, more: number, front?: RingContent): void {
    const needBytes = this.bytes + bytes
    const needEntries = this.length + Math.max(more, 1)
    let cap = Math.max(FIRST_BYTES, this.buf.length)
    while (cap < needBytes) cap *= 2
    let slots = Math.max(FIRST_ENTRIES, this.slots)
    while (slots < needEntries) slots *= 2
    const buf = Buffer.allocUnsafeSlow(cap)
    const entries = new Uint32Array(2 * slots)
    let at = 0
    let e = 0
    if (front !== undefined) {
      front.copyOut(buf, 0, entries, 0)
      at = front.bytes
      e = front.length
    }
    this.copyOut(buf, at, entries, e)
    const { bytes: b, frames: f, length: n } = this
    this.buf = buf
    this.entries = entries
    this.slots = slots
    this.start = 0
    this.head = 0
    this.bytes = b + (front?.bytes ?? 0)
    this.frames = f + (front?.frames ?? 0)
    this.length = n + (front?.length ?? 0)
  }
}
