import type { RingContent } from './frame-ring'
import { audioSlabs, type SlabPool } from './slab-pool'

/** The entry table's first size (it doubles from there, up to one entry per 80 bytes of the ceiling). */
const FIRST_ENTRIES = 16
/** The slab table's first size (it doubles from there, up to the slabs the ceiling needs). */
const FIRST_SLOTS = 4
const NO_ENTRIES = new Uint32Array(0)

/**
 * The audio written to the vendor that a replacement vendor session may need, write by write (a platform
 * frame, or a coalesced chunk of whole frames): what delivered finals do not cover yet (the feed releases
 * the rest, audio/feed/feed.ts `writeOut`), never more than `capacity` bytes (`audio.replaySeconds`, the
 * ceiling: the oldest writes go first). Its bytes are in slabs of the process's pool (audio/feed/slab-pool.ts),
 * taken as writes reach past the slabs it holds and given back as releases empty them: a leg holds the
 * audio it keeps plus at most two partly used slabs, and nothing once it is empty. Keeping a write is one
 * copy into the slabs; nothing is allocated per write (a slab is a pop from the pool's free list, and the
 * tables double a few times in a leg's life). On failover its content goes in front of the leg's queue
 * (`FrameQueue.prependFrom`).
 */
export class ReplayRing implements RingContent {
  /** Writes held. */
  length = 0
  bytes = 0
  /** Platform frames held. */
  frames = 0
  /** The ceiling, in bytes. */
  private readonly maxBytes: number
  /** Room for writes as small as 80 bytes (a 10 ms µ-law frame) over the whole ceiling. */
  private readonly maxEntries: number
  /** Ids of the slabs held (audio/feed/slab-pool.ts), oldest first from `slabHead` (circular). */
  private slabs: number[] = []
  private slabHead = 0
  private slabCount = 0
  /** Offset of the oldest byte in the oldest slab. */
  private start = 0
  /** [bytes, platform frames] of each write, oldest first from `head` (circular). */
  private entries: Uint32Array = NO_ENTRIES
  private head = 0

  constructor(
    capacity: number,
    private readonly pool: SlabPool = audioSlabs
  ) {
    this.maxBytes = capacity
    this.maxEntries = Math.max(64, Math.ceil(capacity / 80))
  }

  /** Bytes it keeps at most (its storage follows what it keeps). */
  get capacity(): number {
    return this.maxBytes
  }

  /** Bytes of storage it holds now (whole slabs). */
  get storageBytes(): number {
    return this.slabCount * this.pool.slabBytes
  }

  /** Bytes of the oldest write (0 when empty). */
  get nextBytes(): number {
    return this.length === 0 ? 0 : this.entries[2 * this.head]
  }

  /** Platform frames of the oldest write (0 when empty). */
  get nextFrames(): number {
    return this.length === 0 ? 0 : this.entries[2 * this.head + 1]
  }

  /** Keep one write of `frames` platform frames; the oldest writes go if it would pass the ceiling. */
  keep(data: Uint8Array, frames: number): void {
    const n = data.length
    if (this.maxBytes === 0) return
    if (n > this.maxBytes) {
      this.clear()
      return
    }
    while (this.bytes + n > this.maxBytes || this.length === this.maxEntries) this.dropFront()
    if (2 * this.length === this.entries.length) this.growEntries()
    this.copyIn(data)
    const slots = this.entries.length >> 1
    let e = this.head + this.length
    if (e >= slots) e -= slots
    this.entries[2 * e] = n
    this.entries[2 * e + 1] = frames
    this.length++
    this.bytes += n
    this.frames += frames
  }

  /** Release the oldest write; returns its platform frames. Slabs it leaves empty go back to the pool. */
  dropFront(): number {
    if (this.length === 0) return 0
    const h = this.head
    const n = this.entries[2 * h]
    const f = this.entries[2 * h + 1]
    this.head = h + 1 === this.entries.length >> 1 ? 0 : h + 1
    this.length--
    this.bytes -= n
    this.frames -= f
    if (this.length === 0) {
      this.releaseAll()
      return f
    }
    const s = this.pool.slabBytes
    let start = this.start + n
    while (start >= s) {
      this.giveFront()
      start -= s
    }
    this.start = start
    return f
  }

  /** Empty it, every slab back to the pool; returns the platform frames it held. */
  clear(): number {
    const f = this.frames
    this.releaseAll()
    return f
  }

  /** Copy the content, oldest first, to `dst` at `at`, and its writes to `entries` from entry `e` (replay). */
  copyOut(dst: Buffer, at: number, entries: Uint32Array, e: number): void {
    const pool = this.pool
    const s = pool.slabBytes
    const cap = this.slabs.length
    let left = this.bytes
    let pos = this.start
    for (let i = this.slabHead; left > 0; i = i + 1 === cap ? 0 : i + 1) {
      const m = Math.min(s - pos, left)
      const id = this.slabs[i]
      const base = pool.offsetOf(id)
      pool.blockOf(id).copy(dst, at, base + pos, base + pos + m)
      at += m
      left -= m
      pos = 0
    }
    const slots = this.entries.length >> 1
    for (let i = 0, h = this.head; i < this.length; i++, h = h + 1 === slots ? 0 : h + 1) {
      entries[2 * (e + i)] = this.entries[2 * h]
      entries[2 * (e + i) + 1] = this.entries[2 * h + 1]
    }
  }

  /** The id of each slab held, oldest first (checks of the pool's bookkeeping; not on the audio path). */
  slabsInUse(): number[] {
    const out: number[] = []
    for (let k = 0; k < this.slabCount; k++) out.push(this.slabs[(this.slabHead + k) % this.slabs.length])
    return out
  }

  /** Copy `src` in after the newest byte, taking slabs as it reaches past the last one held. */
  private copyIn(src: Uint8Array): void {
    const pool = this.pool
    const s = pool.slabBytes
    const n = src.length
    const pos = this.start + this.bytes
    let k = Math.floor(pos / s)
    let off = pos - k * s
    let done = 0
    while (done < n) {
      if (k === this.slabCount) this.takeSlab()
      let i = this.slabHead + k
      if (i >= this.slabs.length) i -= this.slabs.length
      const m = Math.min(s - off, n - done)
      const id = this.slabs[i]
      const at = pool.offsetOf(id) + off
      // A write that fits in its slab is copied whole; one across slabs is cut once per slab it crosses.
      if (m === n) pool.blockOf(id).set(src, at)
      else pool.blockOf(id).set(src.subarray(done, done + m), at)
      done += m
      k++
      off = 0
    }
  }

  private takeSlab(): void {
    if (this.slabCount === this.slabs.length) this.growSlots()
    let i = this.slabHead + this.slabCount
    if (i >= this.slabs.length) i -= this.slabs.length
    this.slabs[i] = this.pool.take()
    this.slabCount++
  }

  private giveFront(): void {
    const i = this.slabHead
    this.pool.give(this.slabs[i])
    this.slabs[i] = NO_SLAB
    this.slabHead = i + 1 === this.slabs.length ? 0 : i + 1
    this.slabCount--
  }

  private releaseAll(): void {
    while (this.slabCount > 0) this.giveFront()
    this.slabHead = this.start = this.head = 0
    this.length = this.bytes = this.frames = 0
  }

  /** A slab table twice the size, oldest first from 0. */
  private growSlots(): void {
    const old = this.slabs
    const next = new Array<number>(Math.max(FIRST_SLOTS, old.length * 2)).fill(NO_SLAB)
    for (let k = 0; k < this.slabCount; k++) next[k] = old[(this.slabHead + k) % old.length]
    this.slabs = next
    this.slabHead = 0
  }

  /** An entry table twice the size (at most `maxEntries`), oldest first from 0. */
  private growEntries(): void {
    const old = this.entries
    const slots = Math.min(this.maxEntries, Math.max(FIRST_ENTRIES, old.length))
    const next = new Uint32Array(2 * slots)
    const oldSlots = old.length >> 1
    for (let i = 0, h = this.head; i < this.length; i++, h = h + 1 === oldSlots ? 0 : h + 1) {
      next[2 * i] = old[2 * h]
      next[2 * i + 1] = old[2 * h + 1]
    }
    this.entries = next
    this.head = 0
  }
}

const NO_SLAB = -1
