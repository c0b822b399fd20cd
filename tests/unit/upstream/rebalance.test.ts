import t from 'tap'
import type { RebalanceSettings } from '../../../gateway/config/types'
import type { Replica, StreamLease } from '../../../gateway/upstream/pool'
import { Rebalancer, workerShare } from '../../../gateway/upstream/rebalance'
import { FakeClock } from '../../helpers/fake-clock'
import { poolOf, replica } from '../../helpers/replicas'

// Issue 19 item 3: load that comes back. A replica that recovers gets calls back, make-before-break,
// paced, until the busiest leads the least busy by no more than the spread; calls that may not move stay.

function world(settings: RebalanceSettings, names = ['a', 'b']) {
  const clock = new FakeClock()
  const p = poolOf(
    names.map(name => replica(name, 100, { text: undefined, maxInFlight: 10 })),
    clock
  )
  const moves: string[] = []
  const r = (name: string): Replica => p.byName(name)!
  /** A call on `replica`: moving it opens its lease on the target and releases the old one (as a rotation does). */
  const call = (replica: Replica, movable = true): void => {
    let lease: StreamLease
    const user = {
      replicaDown: () => {},
      moveTo: (to: Replica): boolean => {
        if (!movable) return false
        lease.release()
        lease = p.leaseStream(to, user)
        return true
      }
    }
    lease = p.leaseStream(replica, user)
  }
  const reb = new Rebalancer(
    () => [p],
    () => settings,
    clock,
    (from, to) => moves.push(`${from.name}>${to.name}`)
  )
  /** Streams on a and b. */
  const streams = (): number[] => [r('a').activeStreams, r('b').activeStreams]
  /** `n` calls on replica `name`. */
  const calls = (name: string, n: number, movable = true): void => {
    for (let i = 0; i < n; i++) call(r(name), movable)
  }
  return { clock, p, r, call, calls, reb, moves, streams }
}

/** A world with `onA` calls on replica a (b empty) and its rebalancer started. */
function started(settings: RebalanceSettings, onA: number) {
  const w = world(settings)
  w.calls('a', onA)
  w.reb.start()
  return w
}

t.test('a recovered replica gets calls back, paced, until the spread holds', async t => {
  const w = started({ spread: 2, perSecond: 2, settleSeconds: 0 }, 12)
  w.clock.advance(1000)
  t.same(w.streams(), [10, 2], 'two calls in the first second, not all at once')
  w.clock.advance(1000)
  t.same(w.streams(), [8, 4])
  w.clock.advance(10_000)
  t.same(w.streams(), [7, 5], 'stops once within the spread (2)')
  t.equal(w.moves.length, 5)
  t.ok(
    w.moves.every(m => m === 'a>b'),
    'always from the busiest to the least busy'
  )
})

t.test("each of N workers moves its share of the instance's perSecond, a share under 1/s too", async t => {
  const settings = { spread: 0, perSecond: 2, settleSeconds: 0 }
  t.same(workerShare(settings, 1), settings, 'one process: the whole rate')
  t.equal(workerShare(settings, 2).perSecond, 1)
  // 4 workers: each moves one call every 2 seconds (a rate under 1/s still moves, at its pace).
  const w = started(workerShare(settings, 4), 12)
  const onB: number[] = []
  for (let s = 0; s < 6; s++) {
    w.clock.advance(1000)
    onB.push(w.r('b').activeStreams)
  }
  t.same(onB, [0, 1, 1, 2, 2, 3], 'one call every 2 s: 4 workers together move 2 a second')
})

t.test('only calls that may move do; a down replica gets none; perSecond 0 turns it off', async t => {
  const w = world({ spread: 0, perSecond: 5, settleSeconds: 0 })
  w.calls('a', 4, false)
  w.calls('a', 2)
  w.reb.tick()
  t.same(w.streams(), [4, 2], 'the movable calls move; the others decline')
  w.reb.tick()
  t.same(w.streams(), [4, 2], 'then none is left that may move')
  const down = world({ spread: 0, perSecond: 5, settleSeconds: 0 }, ['a', 'b', 'c'])
  down.calls('a', 6)
  down.p.markDown(down.r('c'), 'audio', 'gone') // ejected
  down.reb.tick()
  t.equal(down.r('c').activeStreams, 0, 'a replica marked down gets no call')
  const off = world({ spread: 0, perSecond: 0, settleSeconds: 0 })
  off.calls('a', 6)
  off.reb.tick()
  t.equal(off.r('b').activeStreams, 0)
})

t.test('only an imbalance that lasts settleSeconds moves calls; a passing one (counts lagging) moves none', async t => {
  const w = started({ spread: 2, perSecond: 2, settleSeconds: 5 }, 8)
  w.clock.advance(4000)
  t.same(w.streams(), [8, 0], 'nothing moves for the first 5 s')
  // The imbalance goes away for a tick (as counts catch up): the 5 s start again from the next one.
  w.calls('b', 6)
  w.clock.advance(1000)
  t.same(w.moves, [])
  for (const lease of [...w.r('b').leases]) lease.release()
  w.clock.advance(4000)
  t.same(w.moves, [], 'apart again, but for less than 5 s')
  w.clock.advance(2000)
  t.ok(w.moves.length > 0, 'apart for 5 s: calls move')
  t.ok(w.moves.every(m => m === 'a>b'))
})

t.test('issue 32: no call moves onto a replica whose sessions are failing right now, until it answers', async t => {
  const w = world({ spread: 1, perSecond: 5, settleSeconds: 0 }, ['a', 'b', 'c'])
  w.calls('a', 6)
  w.call(w.r('b'))
  w.p.recordFailure(w.r('c'), 'missed pong', 'audio') // a session on c just failed
  w.reb.start()
  w.clock.advance(1000)
  t.equal(w.r('c').activeStreams, 0, 'the least busy, c, is failing: nothing goes there')
  t.same(w.moves, ['a>b', 'a>b'], 'the calls go to b instead')
  w.r('c').answered()
  w.clock.advance(1000)
  t.ok(w.r('c').activeStreams > 0, 'once c answers, it gets calls again')
})
