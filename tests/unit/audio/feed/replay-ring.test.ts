import t from 'tap'
import { FrameQueue } from '../../../../gateway/audio/feed/frame-ring'
import { ReplayRing } from '../../../../gateway/audio/feed/replay-ring'
import { SlabPool } from '../../../../gateway/audio/feed/slab-pool'

// Issue 32 item 4: a leg's replay ring keeps its writes in slabs of a shared pool, taken as it fills and
// given back as releases empty them; it keeps exactly what a ring of one preallocated buffer kept.

function chunk(seq: number, bytes: number): Uint8Array {
  return new Uint8Array(bytes).fill(seq & 0xff)
}

t.test('no storage before the first write; slabs are taken as it fills, up to what the ceiling needs', async t => {
  const pool = new SlabPool(1024, 8)
  const r = new ReplayRing(28000, pool)
  t.equal(r.storageBytes, 0, 'a connected leg that has not streamed holds nothing')
  t.equal(pool.made, 0, 'and the pool has made nothing')
  r.keep(chunk(1, 800), 5)
  t.equal(r.storageBytes, 1024, 'the first write takes one slab')
  for (let i = 2; i <= 100; i++) r.keep(chunk(i, 800), 5)
  t.equal(r.bytes, 28000, 'full: exactly its ceiling of whole writes')
  t.ok(
    r.storageBytes <= 28000 + 2 * 1024,
    `storage ${r.storageBytes}: the audio kept and at most two partly used slabs`
  )
  t.equal(pool.taken, r.storageBytes / 1024, 'every slab it holds is taken from the pool')
  t.equal(r.capacity, 28000)
  r.clear()
  t.equal(r.storageBytes, 0)
  t.equal(pool.taken, 0, 'cleared: every slab is back in the pool')
})

t.test('released writes give their slabs back: the storage follows what it holds', async t => {
  const pool = new SlabPool(1024, 4)
  const r = new ReplayRing(28000, pool)
  for (let i = 0; i < 30; i++) r.keep(chunk(i, 800), 5)
  const full = r.storageBytes
  while (r.length > 3) r.dropFront()
  t.equal(r.bytes, 2400)
  t.ok(r.storageBytes <= 2400 + 2 * 1024 && r.storageBytes < full, `3 writes left: ${r.storageBytes} bytes of slabs`)
  t.equal(pool.taken * 1024, r.storageBytes)
  const made = pool.made
  for (let i = 0; i < 1000; i++) {
    r.keep(chunk(i, 800), 5)
    r.dropFront()
  }
  t.equal(pool.made, made, 'a ring that turns over takes back the slabs it gave: no new allocation')
  while (r.length > 0) r.dropFront()
  t.equal(r.storageBytes, 0, 'empty: no slab held')
  t.equal(pool.taken, 0)
})

t.test('the ring keeps the same writes, oldest first, as one of one buffer of its ceiling', async t => {
  const sizes = [160, 800, 160, 480, 800, 800, 160, 320, 1600, 2400]
  const r = new ReplayRing(8000, new SlabPool(1024, 2))
  const kept: number[] = []
  for (let i = 0; i < 300; i++) {
    const n = sizes[i % sizes.length]
    r.keep(chunk(i, n), n / 160)
    kept.push(i)
    // What a ring of one 8000-byte buffer would hold: the newest writes whose bytes fit in 8000.
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
  t.equal(r.storageBytes, 0, 'and holds no slab')
  let prev = -1
  while (q.length > 0) {
    const w = q.takeRun(0)
    const seq = w[0]
    if (prev >= 0 && seq !== ((prev + 1) & 0xff)) t.fail(`out of order: ${prev} then ${seq}`)
    if (!w.every(b => b === seq)) t.fail('a write was split or mixed')
    prev = seq
  }
  t.equal(prev, 299 & 0xff, 'the newest write last')
})

t.test('a ring of ceiling 0 keeps nothing; a write larger than the ceiling empties it', async t => {
  const pool = new SlabPool(1024, 2)
  const none = new ReplayRing(0, pool)
  none.keep(chunk(1, 160), 1)
  t.equal(none.bytes, 0)
  t.equal(none.storageBytes, 0)
  const r = new ReplayRing(1000, pool)
  r.keep(chunk(1, 800), 5)
  r.keep(chunk(2, 1600), 10)
  t.equal(r.bytes, 0)
  t.equal(r.frames, 0)
  t.equal(pool.taken, 0, 'its slabs went back')
})

t.test('two rings of one pool never hold the same slab', async t => {
  const pool = new SlabPool(512, 3)
  const a = new ReplayRing(4000, pool)
  const b = new ReplayRing(4000, pool)
  for (let i = 0; i < 200; i++) {
    a.keep(chunk(i, 160 * (1 + (i % 4))), 1 + (i % 4))
    if (i % 3 === 0) b.keep(chunk(i, 800), 5)
    if (i % 5 === 0) a.dropFront()
    if (i % 7 === 0) b.dropFront()
    const held = [...a.slabsInUse(), ...b.slabsInUse()]
    if (new Set(held).size !== held.length) t.fail(`write ${i}: a slab is held twice`)
    if (pool.taken !== held.length) t.fail(`write ${i}: ${pool.taken} taken, ${held.length} held`)
  }
  a.clear()
  b.clear()
  t.equal(pool.taken, 0)
  t.equal(pool.available, pool.made)
})

t.test('the pool refuses a slab size or batch that is not a positive integer', async t => {
  t.throws(() => new SlabPool(0), TypeError)
  t.throws(() => new SlabPool(1024, 0.5), TypeError)
})
