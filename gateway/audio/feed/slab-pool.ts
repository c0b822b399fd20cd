/**
 * Fixed-size slabs of audio memory, shared by every leg of the process (issue 32 item 4): a replay ring
 * takes a slab when its newest write reaches past the slabs it holds, and gives it back once delivered
 * finals (or its ceiling) release all the audio in it, so a leg holds only what it keeps. Slabs come in
 * batches of one allocation each (a few times in a process's life, not per frame); taking and giving
 * back are a pop and a push on the free list. The pool keeps what it has made: at its peak, its memory
 * is the sum of what the legs held at once, and a slab given back is the next one taken.
 */
export class SlabPool {
  /** One allocation per batch; slab `id` is bytes [offsetOf(id), offsetOf(id) + slabBytes) of blockOf(id). */
  private readonly blocks: Buffer[] = []
  /** Ids of the slabs not held by any ring, the most recently given back last (taken first: warm in the cache). */
  private readonly free: number[] = []
  /** Slabs made, in all. */
  made = 0

  constructor(
    /** Bytes per slab. */
    readonly slabBytes = SLAB_BYTES,
    /** Slabs per allocation. */
    private readonly batch = BATCH_SLABS
  ) {
    if (!Number.isInteger(slabBytes) || slabBytes < 1) throw new TypeError('slabBytes must be a positive integer')
    if (!Number.isInteger(batch) || batch < 1) throw new TypeError('batch must be a positive integer')
  }

  /** Slabs held by rings now. */
  get taken(): number {
    return this.made - this.free.length
  }

  /** Slabs ready to be taken without allocating. */
  get available(): number {
    return this.free.length
  }

  /** One slab (its id), for the caller alone until it gives it back. */
  take(): number {
    const id = this.free.pop()
    return id === undefined ? this.grow() : id
  }

  /** A slab the caller no longer holds (it MUST NOT use the id again: the next ring that takes it writes over it). */
  give(id: number): void {
    this.free.push(id)
  }

  /** The allocation slab `id` is in. */
  blockOf(id: number): Buffer {
    return this.blocks[Math.floor(id / this.batch)]
  }

  /** Where slab `id` starts in its allocation. */
  offsetOf(id: number): number {
    return (id % this.batch) * this.slabBytes
  }

  /** One more batch: one allocation, its slabs on the free list (ids only: no object per slab); returns one. */
  private grow(): number {
    const n = this.batch
    const first = this.made
    this.blocks.push(Buffer.allocUnsafeSlow(n * this.slabBytes))
    for (let i = n - 1; i > 0; i--) this.free.push(first + i)
    this.made += n
    return first
  }
}

/**
 * 1 KiB: a 100 ms coalesced write (800 bytes of µ-law) spans at most two, and a ring's storage is at most
 * one slab more than the audio it keeps, plus the part of its oldest slab already released.
 */
export const SLAB_BYTES = 1024
/** 64 slabs (64 KiB) per allocation: a batch is made for every 64 slabs in use at the process's peak. */
export const BATCH_SLABS = 64

/** The process's pool: every leg's replay ring takes its slabs here. */
export const audioSlabs = new SlabPool()
