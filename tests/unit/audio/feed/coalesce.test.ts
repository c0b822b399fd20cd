import t from 'tap'
import { FlushWheel, TICK_MS, type WheelClient } from '../../../../gateway/audio/feed/coalescer'
import { VendorFeed } from '../../../../gateway/audio/feed/feed'
import { LegCounters } from '../../../../gateway/telemetry/metrics'
import { FakeClock } from '../../../helpers/fake-clock'
import { frame, harness, readyHarness, recordingSink, SETTINGS } from '../harness'

// Coalescing towards the vendor on the fake clock: the shared flush wheel, chunk boundaries, and the
// partial chunk at the end, at a park and on failover. Frames are 160 bytes (20 ms); chunks of 100 ms
// are 800 bytes, five frames.

const sink = recordingSink

/** The first byte of every frame in `writes`, in order (frames are told apart by their first byte). */
const framesIn = (writes: Buffer[]): number[] => {
  const all = Buffer.concat(writes)
  const out: number[] = []
  for (let i = 0; i < all.length; i += 160) out.push(all[i])
  return out
}
const range = (a: number, b: number): number[] => Array.from({ length: b - a }, (_, i) => a + i)

function relay(clock: FakeClock, chunkMs = 100, settings = {}) {
  const counters = new LegCounters('r')
  const r = new VendorFeed(counters, { ...SETTINGS, ...settings }, clock, () => {}, undefined, 0, chunkMs)
  return { r, counters }
}

t.test('the flush wheel: one timer for every client, each woken once at its time (within a tick)', async t => {
  const clock = new FakeClock(5)
  const wheel = new FlushWheel(clock)
  const woken: [number, number][] = []
  const clients: WheelClient[] = range(0, 100).map(i => ({ wheelDue: 0, onWheel: now => woken.push([i, now]) }))
  clients.forEach((c, i) => wheel.schedule(c, 5 + 20 + (i % 7) * 30))
  t.equal(clock.pending, 1, 'one interval for 100 clients')
  t.equal(wheel.pending, 100)
  wheel.schedule(clients[0], 1000)
  t.equal(wheel.pending, 100, 'a later wake while an earlier one stands changes nothing')
  wheel.schedule(clients[1], 10)
  wheel.cancel(clients[2])
  clock.advance(300)
  t.equal(woken.length, 99, 'each once, the cancelled one never')
  for (const [i, now] of woken) {
    const at = i === 1 ? 10 : 25 + (i % 7) * 30
    if (now < at || now >= at + 2 * TICK_MS) t.fail(`client ${i} woken at ${now}, asked for ${at}`)
  }
  t.equal(woken[0][0], 1, 'the earlier wake replaced the later one')
  t.equal(clock.pending, 0, 'the interval stops when nobody waits')
  wheel.schedule(clients[3], clock.now() + 5000)
  t.equal(clock.pending, 1, 'and starts again')
  clock.advance(2000)
  t.equal(woken.length, 100, 'a wake past the wheel turn comes early, never late (the client asks again)')
})

t.test('chunks: whole frames, written as soon as a chunk is full, every byte in order', async t => {
  const clock = new FakeClock()
  const { r, counters } = relay(clock)
  const s = sink()
  r.flowTo(s)
  for (let i = 0; i < 23; i++) {
    r.write(frame(i))
    clock.advance(20)
  }
  // 4 full chunks by frame 20; the 3 frames after it waited 60 ms < 100 ms.
  t.same(
    s.writes.map(w => w.length),
    [800, 800, 800, 800]
  )
  t.same(framesIn(s.writes), range(0, 20))
  clock.advance(40)
  t.same(
    s.writes.map(w => w.length),
    [800, 800, 800, 800, 480],
    'the partial chunk goes once its oldest frame waited 100 ms'
  )
  t.same(framesIn(s.writes), range(0, 23))
  t.equal(counters.framesToVendor, 5, 'framesToVendor counts writes')
  t.equal(counters.bytesToVendor, 23 * 160, 'bytesToVendor every byte')
  const odd = new Uint8Array(300).fill(99).buffer
  r.write(odd)
  for (let i = 100; i < 103; i++) r.write(frame(i))
  t.equal(s.writes.length, 5, '780 bytes: not yet a chunk')
  r.write(frame(103))
  t.equal(s.writes.at(-1)?.length, 300 + 4 * 160, 'frames of any size stay whole: a write is at least a chunk')
  r.close()
})

t.test('one wheel timer for many legs with partial chunks; each flushed on time', async t => {
  const clock = new FakeClock()
  const legs = range(0, 50).map(() => ({ ...relay(clock), s: sink() }))
  for (const l of legs) l.r.flowTo(l.s)
  legs.forEach((l, i) => {
    l.r.write(frame(i))
    l.r.write(frame(i))
  })
  t.equal(clock.pending, 1, 'one timer for 50 legs')
  clock.advance(90)
  t.equal(legs.filter(l => l.s.writes.length > 0).length, 0, 'nothing before 100 ms')
  clock.advance(TICK_MS + 10)
  t.same(
    legs.map(l => l.s.writes.map(w => w.length)),
    legs.map(() => [320])
  )
  t.equal(clock.pending, 0)
  for (const l of legs) l.r.close()
})

t.test('end of the leg: drainTo writes the partial chunk; close leaves no timer', async t => {
  const clock = new FakeClock()
  const { r } = relay(clock)
  const s = sink()
  r.flowTo(s)
  for (let i = 0; i < 7; i++) r.write(frame(i))
  r.drainTo(s)
  t.same(
    s.writes.map(w => w.length),
    [800, 320]
  )
  t.same(framesIn(s.writes), range(0, 7))
  r.close()
  t.equal(clock.pending, 0)
})

t.test('backlog and backpressure: chunks keep every byte in order, the partial behind them', async t => {
  const clock = new FakeClock()
  const { r, counters } = relay(clock, 100, { bufferBytes: 64000, holdBufferBytes: 64000 })
  for (let i = 0; i < 12; i++) r.write(frame(i)) // held before ready
  const s = sink()
  s.bufferedAmount = 5000 // backed up at once
  r.flowTo(s)
  for (let i = 12; i < 15; i++) r.write(frame(i))
  t.same(s.writes, [])
  s.bufferedAmount = 0
  clock.advance(TICK_MS)
  t.same(
    s.writes.map(w => w.length),
    [800, 800, 800],
    'fifteen queued frames: three chunks'
  )
  for (let i = 15; i < 18; i++) r.write(frame(i))
  s.bufferedAmount = 5000
  for (let i = 18; i < 21; i++) r.write(frame(i)) // the chunk fills while backed up: queued
  clock.advance(50)
  s.bufferedAmount = 0
  clock.advance(TICK_MS)
  t.same(framesIn(s.writes), range(0, 21))
  t.equal(counters.dropBackpressure, 0)
  r.close()
})

t.test(
  'failover: the replay, then the partial chunk never written, then queued audio: the byte stream stays exact',
  async t => {
    const h = harness({ settings: { coalesceMs: 100, replaySeconds: 0.2 } }) // replay: 1600 bytes, two chunks
    h.session.start(null)
    h.conn().ready()
    for (let i = 0; i < 18; i++) h.session.feed.write(frame(i))
    const first = h.conn()
    t.same(framesIn(first.written), range(0, 15), 'three chunks out, three frames partial')
    first.failWith({ kind: 'closed', code: 1006, reason: '', socket: null })
    for (let i = 18; i < 22; i++) h.session.feed.write(frame(i))
    h.clock.advance(200)
    h.conn().ready()
    t.not(h.conn(), first)
    t.same(framesIn(h.conn().written), range(5, 22), 'the last two chunks replayed, then every frame after, once')
    t.match(
      h.logs.lines.find(l => l.event === 'failover_start'),
      { replayFrames: 10 }
    )
    h.session.close(true)
    t.same(framesIn(h.conn().written), range(5, 22), 'nothing left behind')
  }
)

t.test('park: the partial chunk goes before the pause frame; a graceful close drains it before goodbye', async t => {
  const h = readyHarness({ settings: { coalesceMs: 100 } })
  for (let i = 0; i < 7; i++) h.session.feed.write(frame(i))
  h.session.park()
  t.same(framesIn(h.conn().written), range(0, 7), 'written at the park')
  t.same(h.conn().controls, ['pause'])
  const g = harness({ settings: { coalesceMs: 100 } })
  g.session.start(null)
  g.conn().ready()
  for (let i = 0; i < 3; i++) g.session.feed.write(frame(i))
  t.same(g.conn().written, [])
  g.session.close(true)
  t.same(framesIn(g.conn().written), range(0, 3))
  t.equal(g.conn().state, 'CLOSING', 'then goodbye')
  h.session.close(false)
})
