/**
 * The last `capacity` bytes of audio written to the vendor, frame by frame, kept so a replacement
 * vendor session can be given what the failed one may not have processed. Preallocated: pushing a
 * frame is a copy into the ring (the per-frame path allocates nothing here).
 */
export class ReplayRing {
  private readonly bytes: Uint8Array
  private readonly lens: Uint32Array
  private start = 0
  private used = 0
  private head = 0
  private count = 0

  constructor(readonly capacity: number) {
    this.bytes = new Uint8Array(capacity)
    this.lens = new Uint32Array(Math.max(64, Math.ceil(capacity / 80)))
  }

  get frames(): number {
    return this.count
  }

  push(data: ArrayBuffer | Uint8Array): void {
    const n = data.byteLength
    if (this.capacity === 0) return
    if (n > this.capacity) {
      this.clear()
      return
    }
    while (this.used + n > this.capacity || this.count === this.lens.length) this.evict()
    const src = data instanceof Uint8Array ? data : new Uint8Array(data)
    const pos = (this.start + this.used) % this.capacity
    const first = Math.min(n, this.capacity - pos)
    this.bytes.set(first === n ? src : src.subarray(0, first), pos)
    if (first < n) this.bytes.set(src.subarray(first), 0)
    this.lens[(this.head + this.count) % this.lens.length] = n
    this.count++
    this.used += n
  }

  private evict(): void {
    const n = this.lens[this.head]
    this.head = (this.head + 1) % this.lens.length
    this.count--
    this.used -= n
    this.start = (this.start + n) % this.capacity
  }

  /** Copies of the kept frames, oldest first; the ring is left empty. */
  drain(): Buffer[] {
    const out: Buffer[] = []
    let pos = this.start
    for (let i = 0; i < this.count; i++) {
      const n = this.lens[(this.head + i) % this.lens.length]
      const f = Buffer.allocUnsafe(n)
      const first = Math.min(n, this.capacity - pos)
      f.set(this.bytes.subarray(pos, pos + first), 0)
      if (first < n) f.set(this.bytes.subarray(0, n - first), first)
      out.push(f)
      pos = (pos + n) % this.capacity
    }
    this.clear()
    return out
  }

  clear(): void {
    this.start = this.used = this.head = this.count = 0
  }
}
