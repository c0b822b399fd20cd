import t from 'tap'
import fc from 'fast-check'
import { ReplicaWalk } from '../../../../gateway/audio/session/failover'
import type { UpstreamPool } from '../../../../gateway/upstream/pool'
import { FakeClock } from '../../../helpers/fake-clock'
import { harness, readyHarness, route, SETTINGS } from '../harness'

// Issue 32 item 5 on the fake clock: a failover never goes back to the replica it is leaving, nor to one
// whose sessions are failing right now, until that replica has proven itself again (a probe that passes,
// or a session on it that answers); the first replacement attempt goes where an upgrade will be answered.

const LOST = { kind: 'closed', code: 1006, reason: '', socket: { kind: 'missed-pong' } } as const
const NOBODY = { replicaDown: () => {} }

/** A probe the test answers: each call waits until the test settles it. */
function fakeProbe(pool: UpstreamPool): { asked: string[]; answer: (ok: boolean) => void } {
  const pending: ((ok: boolean) => void)[] = []
  const asked: string[] = []
  pool.probe = async r => {
    asked.push(r.name)
    return await new Promise<boolean>(resolve => pending.push(resolve))
  }
  return {
    asked,
    answer: ok => {
      for (const p of pending.splice(0)) p(ok)
    }
  }
}

const tick = async (): Promise<void> => await new Promise(resolve => setImmediate(resolve))

t.test(
  'a replica whose sessions fail right now is passed over by a failover, although it is the least busy',
  async t => {
    const h = harness({ replicas: ['a', 'b', 'c'] })
    h.session.start(null)
    t.equal(h.conn().replica.name, 'a')
    h.conn().ready()
    h.route.pool.leaseStream(h.replica('b'), NOBODY) // b is busier than c
    h.route.pool.recordFailure(h.replica('c'), 'missed pong', 'audio') // another session on c just failed
    h.conn().failWith(LOST)
    t.equal(h.conn().replica.name, 'b', 'the first replacement goes to b, not to the failing c nor back to a')
    h.conn().ready()
    t.equal(h.session.state, 'READY')
  }
)

t.test('a failing replica that answers again (a ready, a pong, a message, a probe) is a candidate again', async t => {
  const clock = new FakeClock()
  const r = route(clock, ['a'])
  const a = r.pool.byName('a')!
  a.failed()
  t.ok(a.failing)
  const before = a.failures
  a.failed() // a second session fails while a probe started before it is out
  a.answered(before)
  t.ok(a.failing, 'a probe that started before the latest failure proves nothing')
  a.answered()
  t.notOk(a.failing, 'evidence of now clears it')
  t.equal(a.proofs, 1)
})

t.test('the only other replica is failing: it is probed first and tried only once the probe passes', async t => {
  const h = harness({ replicas: ['a', 'b'] })
  const probe = fakeProbe(h.route.pool)
  h.session.start(null)
  h.conn().ready()
  h.route.pool.recordFailure(h.replica('b'), 'missed pong', 'audio')
  h.conn().failWith(LOST)
  t.equal(h.conns.length, 1, 'no session opened on an unproven replica')
  await tick()
  t.same(probe.asked.sort(), ['a', 'b'], 'both are probed at once: the one left and the failing one')
  probe.answer(true)
  await tick()
  t.equal(h.conns.length, 2)
  t.equal(h.conn().replica.name, 'b', 'the less busy proven replica first')
  t.notOk(h.replica('b').failing, 'the probe proved it')
  h.conn().ready()
  t.equal(h.session.state, 'READY')
})

t.test(
  'a lone replica that fails its probe is not tried; the next round probes it again, and a pass lets it in',
  async t => {
    const h = harness({ replicas: ['a'], settings: { failoverTimeoutSeconds: 10 } })
    const probe = fakeProbe(h.route.pool)
    h.session.start(null)
    h.conn().ready()
    h.conn().failWith(LOST)
    await tick()
    t.same(probe.asked, ['a'])
    probe.answer(false)
    await tick()
    t.equal(h.conns.length, 1, 'a failed probe: no session on it')
    t.equal(h.session.state, 'RECOVERING')
    h.clock.advance(100) // the backoff (random 1: the top of 100 ms)
    await tick()
    t.same(probe.asked, ['a', 'a'], 'the next round proves it again')
    probe.answer(true)
    await tick()
    t.equal(h.conns.length, 2)
    t.equal(h.conn().replica.name, 'a')
  }
)

t.test(
  'the replica left by a loss that was not its fault (a classified close) is still proven before it is reused',
  async t => {
    const h = harness({ replicas: ['a'], audio: { closeCodes: { 3005: 'transient' } } })
    const probe = fakeProbe(h.route.pool)
    h.session.start(null)
    h.conn().ready()
    h.conn().failWith({ kind: 'closed', code: 3005, reason: 'internal', socket: null })
    t.notOk(h.replica('a').failing, 'the vendor verdict is not a gateway-side failure')
    t.equal(h.conns.length, 1)
    await tick()
    t.same(probe.asked, ['a'], 'the replica being left is probed')
    probe.answer(true)
    await tick()
    t.equal(h.conn().replica.name, 'a')
  }
)

t.test('a session that closes while its proof is out opens nothing when the proof comes back', async t => {
  const h = harness({ replicas: ['a'] })
  const probe = fakeProbe(h.route.pool)
  h.session.start(null)
  h.conn().ready()
  h.conn().failWith(LOST)
  await tick()
  h.session.close(false)
  probe.answer(true)
  await tick()
  t.equal(h.conns.length, 1)
  t.equal(h.clock.pending, 0, 'no timer left')
})

t.test('a route with no probe keeps trying the failing replicas last (a session is the only proof)', async t => {
  const h = readyHarness({ replicas: ['a', 'b'] })
  h.route.pool.recordFailure(h.replica('b'), 'missed pong', 'audio')
  h.conn().failWith(LOST)
  t.equal(h.conns.length, 2, 'at once, synchronously')
  t.equal(h.conn().replica.name, 'b', 'b is failing but not the replica being left')
})

t.test('property: whatever the interleaving of failures and answers, the first attempt is never unproven', async t => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant('fail' as const), r: fc.nat(3) }),
    fc.record({ kind: fc.constant('answer' as const), r: fc.nat(3) }),
    fc.record({ kind: fc.constant('probeStart' as const), r: fc.nat(3) }),
    fc.record({ kind: fc.constant('probeEnd' as const), r: fc.nat(3), ok: fc.boolean() }),
    fc.record({ kind: fc.constant('lease' as const), r: fc.nat(3) })
  )
  fc.assert(
    fc.property(fc.array(op, { maxLength: 40 }), fc.nat(3), (ops, lostIndex) => {
      const clock = new FakeClock()
      const r = route(clock, ['a', 'b', 'c', 'd'])
      r.pool.probe = async () => true
      const reps = r.pool.replicas
      // The model: failing = a failure after which nothing that started later answered.
      const failing = [false, false, false, false]
      const probes: { r: number; since: number; failedSince: boolean }[] = []
      for (const o of ops) {
        const rep = reps[o.r]
        if (o.kind === 'fail') {
          rep.failed()
          failing[o.r] = true
          for (const p of probes) if (p.r === o.r) p.failedSince = true
        } else if (o.kind === 'answer') {
          rep.answered()
          failing[o.r] = false
        } else if (o.kind === 'probeStart') probes.push({ r: o.r, since: rep.failures, failedSince: false })
        else if (o.kind === 'probeEnd') {
          const i = probes.findIndex(p => p.r === o.r)
          if (i < 0) continue
          const [p] = probes.splice(i, 1)
          if (o.ok) {
            rep.answered(p.since)
            if (!p.failedSince) failing[o.r] = false
          }
        } else r.pool.leaseStream(rep, NOBODY)
      }
      for (const [i, rep] of reps.entries()) if (rep.failing !== failing[i]) return false
      const lost = reps[lostIndex]
      const walk = new ReplicaWalk(r.pool, { ...SETTINGS, failoverTimeoutSeconds: 10 }, clock)
      walk.beginRecovery(lost)
      const first = walk.next()
      const proven = reps.filter((rep, i) => rep !== lost && !failing[i])
      if (proven.length === 0) return first === undefined && walk.hasSuspects
      return first !== undefined && first !== lost && !first.failing && proven.includes(first)
    }),
    { numRuns: 500 }
  )
  t.pass('500 interleavings')
})
