import t from 'tap'
import { FrameQueue } from '../../../../gateway/audio/feed/frame-ring'
import { ReplayRing } from '../../../../gateway/audio/feed/replay-ring'

// Issue 24: a leg's replay ring takes its storage as it fills, and keeps exactly what a preallocated one kept.

/** Storage the ring holds now (protected in FrameRing; read here to check memory, not behaviour). */
function storage(r: ReplayRing): { bytes: number; entries: number } {
  const inner = r as unknown as { buf: Buffer; lens: Uint32Array }
  return { bytes: inner.buf.length, entries: inner.lens.length }
}

function chunk(seq: number, bytes: number): Uint8Array {
  return new Uint8Array(bytes).fill(seq & 0xff)
}

t.test('no storage before the first write; it grows as it fills, up to the capacity', async t => {
  const r = new ReplayRing(28000)
  t.same(storage(r), { bytes: 0, entries: 0 }, 'a connected leg that has not streamed holds nothing')
  r.keep(chunk(1, 800), 5)
  t.ok(storage(r).bytes > 0 && storage(r).bytes < 28000, 'the first write takes a small buffer')
  t.ok(storage(r).entries <= 16, 'and a small entry table')
  for (let i = 2; i <= 100; i++) r.keep(chunk(i, 800), 5)
  t.equal(storage(r).bytes, 28000, 'full: exactly its capacity')
  t.ok(storage(r).entries < 350 / 4, 'coalesced writes: an entry table for what it holds, not one per 80 bytes')
  t.equal(r.capacity, 28000)
})

t.test('a growing ring keeps the same writes, oldest first, as one that was full from the start', async t => {
  const sizes = [160, 800, 160, 480, 800, 800, 160, 320]
  const r = new ReplayRing(8000)
  const kept: number[] = []
  for (let i = 0; i < 200; i++) {
    const n = sizes[i % sizes.length]
    r.keep(chunk(i, n), n / 160)
    kept.push(i)
    // What a full-size ring would hold: the newest writes whose bytes fit in 8000.
    let bytes = 0
    let from = kept.length
    while (from > 0 && bytes + sizes[(from - 1) % sizes.length] <= 8000) bytes += sizes[--from % sizes.length]
    if (r.bytes !== bytes) t.fail(`write ${i}: ${r.bytes} bytes kept, ${bytes} expected`)
  }
  // Out in front of a queue, as on failover: whole writes, oldest first.
  const q = new FrameQueue()
  const before = { bytes: r.bytes, frames: r.frames }
  q.prependFrom(r)
  t.equal(q.bytes, before.bytes)
  t.equal(q.frames, before.frames)
  t.equal(r.bytes, 0, 'the ring is emptied')
  let prev = -1
  while (q.length > 0) {
    const w = q.takeRun(0)
    const seq = w[0]
    if (prev >= 0 && seq !== ((prev + 1) & 0xff)) t.fail(`out of order: ${prev} then ${seq}`)
    if (!w.every(b => b === seq)) t.fail('a write was split or mixed')
    prev = seq
  }
  t.equal(prev, 199 & 0xff, 'the newest write last')
})

t.test('a ring of capacity 0 keeps nothing; a write larger than the capacity empties it', async t => {
  const none = new ReplayRing(0)
  none.keep(chunk(1, 160), 1)
  t.equal(none.bytes, 0)
  t.same(storage(none), { bytes: 0, entries: 0 })
  const r = new ReplayRing(1000)
  r.keep(chunk(1, 800), 5)
  r.keep(chunk(2, 1600), 10)
  t.equal(r.bytes, 0)
  t.equal(r.frames, 0)
})
