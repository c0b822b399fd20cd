import t from 'tap'
import type { UpstreamConfig } from '../../../gateway/config/types'
import { MemoryStore } from '../../../gateway/store/memory'
import { type DownSource, type Replica, TextBalancer } from '../../../gateway/upstream/pool'
import { FakeClock } from '../../helpers/fake-clock'
import { health, poolOf, replica } from '../../helpers/replicas'

// Replica state lives in the pool: leases, balancing, passive ejection on the clock, one markDown.

function pool(names: string[], over: Record<string, Partial<UpstreamConfig>> = {}) {
  const clock = new FakeClock()
  const store = new MemoryStore('i1')
  const p = poolOf(
    names.map(name => replica(name, 10, over[name])),
    clock,
    health(),
    store
  )
  const downs: [string, DownSource, string][] = []
  p.onDown((r, source, reason) => downs.push([r.name, source, reason]))
  const r = (name: string): Replica => p.byName(name)!
  return { p, clock, store, downs, r }
}

/** A stream's user: what the pool tells when its replica goes down. */
function user() {
  const told: string[] = []
  return { told, replicaDown: (why: string) => told.push(why) }
}

t.test('a stream lease counts the stream and its handshake, once, whatever order it ends in', async t => {
  const { p, r } = pool(['a'])
  const lease = p.leaseStream(r('a'), user())
  t.equal(r('a').activeStreams, 1)
  t.equal(r('a').pendingHandshakes, 1)
  lease.handshakeDone()
  lease.handshakeDone()
  t.equal(r('a').pendingHandshakes, 0)
  lease.release()
  lease.release()
  t.equal(r('a').activeStreams, 0)
  const early = p.leaseStream(r('a'), user())
  early.release()
  t.same([r('a').activeStreams, r('a').pendingHandshakes], [0, 0], 'released before its handshake ended')
})

t.test(
  'audio balancing: least streams relative to weight; full or ejected replicas are skipped; excluded go last',
  async t => {
    const { p, r } = pool(['a', 'b', 'c'], { b: { weight: 2 }, c: { maxStreams: 1 } })
    for (let i = 0; i < 2; i++) p.leaseStream(r('a'), user())
    for (let i = 0; i < 3; i++) p.leaseStream(r('b'), user())
    p.leaseStream(r('c'), user())
    t.same(
      p.audioCandidates().map(x => x.name),
      ['b', 'a'],
      'b: 3/2 streams per weight beats a: 2; c is full'
    )
    t.same(
      p.audioCandidates(new Set([r('b')])).map(x => x.name),
      ['a', 'b']
    )
  }
)

t.test(
  'passive ejection: after N failures in a row, for 30 s × n up to 300 s, never the last healthy replica',
  async t => {
    const { p, clock, downs, r } = pool(['a', 'b'])
    t.equal(p.recordFailure(r('a'), 'x', 'audio'), false)
    p.recordSuccess(r('a'))
    for (let i = 0; i < 2; i++) p.recordFailure(r('a'), 'x', 'audio')
    t.equal(p.recordFailure(r('a'), 'connect: ECONNREFUSED', 'audio'), true, 'the third in a row ejects')
    t.equal(r('a').healthy, false)
    t.match(r('a').describe(), {
      state: 'ejected',
      reason: /3 failures in a row, last: connect: ECONNREFUSED; ejected for 30 s/
    })
    t.same(downs, [['a', 'audio', r('a').ejectReason]])
    for (let i = 0; i < 3; i++) t.equal(p.recordFailure(r('b'), 'x', 'audio'), false, 'b is the last healthy one')
    clock.advance(30_000)
    t.equal(r('a').healthy, true, 'back after 30 s')
    for (let i = 0; i < 3; i++) p.recordFailure(r('a'), 'x', 'text')
    clock.advance(59_999)
    t.equal(r('a').healthy, false, 'the second ejection lasts 60 s')
    clock.advance(1)
    t.equal(r('a').healthy, true)
  }
)

t.test('markDown from every source moves the streams of this instance off the replica', async t => {
  const { p, r, downs } = pool(['a', 'b'])
  const onA = user()
  const onB = user()
  p.leaseStream(r('a'), onA)
  p.leaseStream(r('b'), onB)
  // A text-side ejection moves audio streams too.
  for (let i = 0; i < 3; i++) p.recordFailure(r('a'), 'text: timeout', 'text')
  t.same(onA.told, ['replica a marked down'])
  t.same(onB.told, [])
  t.equal(downs[0][1], 'text')
  p.markDown(r('b'), 'probe', '3 failed probes')
  t.same(onB.told, ['replica b marked down'])
  t.same(downs[1], ['b', 'probe', '3 failed probes'])
})

t.test('probe verdicts from the store go through markDown once per down, again after an up', async t => {
  const { p, store, r, downs } = pool(['a'])
  const onA = user()
  p.leaseStream(r('a'), onA)
  const down = { state: 'down', reason: '3 failed probes: HTTP 503', since: 0, by: 'i2' } as const
  store.writeHealth(r('a').key, down)
  p.refreshProbes()
  p.refreshProbes()
  t.same(downs, [['a', 'probe', '3 failed probes: HTTP 503']])
  t.same(onA.told, ['replica a marked down'])
  store.writeHealth(r('a').key, { ...down, state: 'up', reason: '2 good probes' })
  p.refreshProbes()
  store.writeHealth(r('a').key, down)
  p.refreshProbes()
  t.equal(downs.length, 2)
})

t.test('text balancing: round-robin over eligible replicas; p2c prefers the less busy; in-flight counted', async t => {
  const { p, r } = pool(['a', 'b', 'c'], { c: { text: undefined } })
  const rr = new TextBalancer(p.replicas, 'round-robin')
  t.same(
    [rr.pick(new Set()), rr.pick(new Set()), rr.pick(new Set()), rr.pick(new Set([r('a')]))].map(x => x?.name),
    ['a', 'b', 'a', 'b'],
    'c has no text URL; excluded replicas are skipped'
  )
  const p2c = new TextBalancer(p.replicas, 'p2c')
  for (let i = 0; i < 5; i++) p2c.begin(r('a'))
  t.equal(r('a').inFlight, 5)
  for (let i = 0; i < 10; i++) t.equal(p2c.pick(new Set())?.name, 'b')
  for (let i = 0; i < 5; i++) p2c.end(r('a'))
  t.equal(r('a').inFlight, 0)
})
