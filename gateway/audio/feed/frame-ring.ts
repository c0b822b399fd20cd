/**
 * Audio bytes in one preallocated circular buffer, as entries (a platform frame, or a run of whole frames
 * written as one chunk) with their byte length and how many platform frames each holds. The leg's queue
 * (`FrameQueue`) and the replay ring (audio/feed/replay-ring.ts) are both this: pushing copies the bytes in,
 * nothing is allocated per frame. Entries are never split, so every count stays in platform frames.
 */
export class FrameRing {
  protected buf: Buffer
  /** Byte offset of the oldest entry. */
  protected start = 0
  protected lens: Uint32Array
  protected counts: Uint32Array
  /** Index of the oldest entry in `lens` / `counts`. */
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
    this.lens = new Uint32Array(entries)
    this.counts = new Uint32Array(entries)
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
    if (e >= this.lens.length) e -= this.lens.length
    this.lens[e] = n
    this.counts[e] = frames
    this.length++
    this.bytes += n
    this.frames += frames
  }

  /** Bytes of the oldest entry (0 when empty). */
  get nextBytes(): number {
    return this.length === 0 ? 0 : this.lens[this.head]
  }

  /** Platform frames of the oldest entry (0 when empty). */
  get nextFrames(): number {
    return this.length === 0 ? 0 : this.counts[this.head]
  }

  /** Drop the oldest entry; returns its platform frames. */
  dropFront(): number {
    const h = this.head
    const n = this.lens[h]
    const f = this.counts[h]
    this.head = h + 1 === this.lens.length ? 0 : h + 1
    this.length--
    this.bytes -= n
    this.frames -= f
    this.start += n
    if (this.start >= this.buf.length) this.start -= this.buf.length
    if (this.length === 0) this.start = this.head = 0
    return f
  }

  /** Bytes of the oldest entries, whole, until at least `min` (at least one entry; all of them when they hold less). */
  runBytes(min: number): number {
    let n = 0
    let e = this.head
    for (let i = 0; i < this.length && (i === 0 || n < min); i++) {
      n += this.lens[e]
      e = e + 1 === this.lens.length ? 0 : e + 1
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
    while (k < this.length && (k === 0 || n < min)) {
      n += this.lens[e]
      frames += this.counts[e]
      e = e + 1 === this.lens.length ? 0 : e + 1
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

  /** Copy the content, oldest first, to `dst` at `at`, and its entries to `lens`/`counts` from `e` (growing, replay). */
  copyOut(dst: Buffer, at: number, lens: Uint32Array, counts: Uint32Array, e: number): void {
    const cap = this.buf.length
    const first = Math.min(this.bytes, cap - this.start)
    this.buf.copy(dst, at, this.start, this.start + first)
    if (first < this.bytes) this.buf.copy(dst, at + first, 0, this.bytes - first)
    for (let i = 0, h = this.head; i < this.length; i++, h = h + 1 === this.lens.length ? 0 : h + 1) {
      lens[e + i] = this.lens[h]
      counts[e + i] = this.counts[h]
    }
  }
}

const EMPTY = Buffer.alloc(0)
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
    if (this.bytes + src.length > this.buf.length || this.length === this.lens.length) this.grow(src.length, 0)
    this.put(src, frames)
  }

  /** Everything `front` holds goes in front of what is queued (replay before the queue), and `front` is emptied. */
  prependFrom(front: FrameRing): void {
    if (front.length === 0) return
    this.grow(front.bytes, front.length, front)
    front.clear()
  }

  /** Give the memory back if a backlog made it large and it is empty now. */
  shrink(): void {
    if (this.length !== 0 || this.buf.length <= SHRINK_ABOVE) return
    this.buf = EMPTY
    this.lens = new Uint32Array(0)
    this.counts = new Uint32Array(0)
    this.clear()
  }

  /** Room for `bytes` and `entries` more (`front`: content to put first): one new linear buffer. */
  private grow(bytes: number, entries: number, front?: FrameRing): void {
    const needBytes = this.bytes + bytes
    const needEntries = this.length + Math.max(entries, 1)
    let cap = Math.max(FIRST_BYTES, this.buf.length)
    while (cap < needBytes) cap *= 2
    let slots = Math.max(FIRST_ENTRIES, this.lens.length)
    while (slots < needEntries) slots *= 2
    const buf = Buffer.allocUnsafeSlow(cap)
    const lens = new Uint32Array(slots)
    const counts = new Uint32Array(slots)
    let at = 0
    let e = 0
    if (front !== undefined) {
      front.copyOut(buf, 0, lens, counts, 0)
      at = front.bytes
      e = front.length
    }
    this.copyOut(buf, at, lens, counts, e)
    const { bytes: b, frames: f, length: n } = this
    this.buf = buf
    this.lens = lens
    this.counts = counts
    this.start = 0
    this.head = 0
    this.bytes = b + (front?.bytes ?? 0)
    this.frames = f + (front?.frames ?? 0)
    this.length = n + (front?.length ?? 0)
  }
}
