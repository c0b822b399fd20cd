import t from 'tap'
import { afterFailureDelay, FailureBudget } from '../../../gateway/auth/failure-budget'
import { FleetKey } from '../../../gateway/auth/fleet-key'
import { callerTag } from '../../../gateway/auth/hook-auth'
import { LegLimits } from '../../../gateway/auth/leg-limits'
import type { AuthSettings } from '../../../gateway/config/types'
import { LocalAuthState } from '../../../gateway/store/local-auth'
import { FakeClock } from '../../helpers/fake-clock'

const settings =
  (failureDelayMs: number, failures: number, windowSeconds = 60): (() => AuthSettings) =>
  () => ({
    failureDelayMs,
    failureBudget: { failures, windowSeconds }
  })

t.test(
  'a refusal is answered exactly when auth.failureDelayMs has passed, on the clock (nothing waits meanwhile)',
  async t => {
    const clock = new FakeClock(1000)
    const order: string[] = []
    afterFailureDelay(settings(500, 0)(), clock, () => order.push('first'))
    clock.advance(200)
    afterFailureDelay(settings(500, 0)(), clock, () => order.push('second'))
    order.push('other work')
    clock.advance(299)
    t.same(order, ['other work'], 'nothing before its 500 ms')
    clock.advance(1)
    t.same(order, ['other work', 'first'])
    clock.advance(200)
    t.same(order, ['other work', 'first', 'second'], 'each counted from its own failure')
    let answered = false
    afterFailureDelay(settings(0, 0)(), clock, () => (answered = true))
    t.ok(answered, 'a delay of 0 answers at once, synchronously')
    t.equal(clock.pending, 0)
  }
)

t.test('the per-address budget engages after N failures in a window and releases when the window ends', async t => {
  const clock = new FakeClock(0)
  const budget = new FailureBudget(settings(0, 3, 60), clock)
  const fail = (address: string): void => {
    t.equal(budget.begin(address), true, 'a check may run')
    budget.settle(address, true)
  }
  fail('a')
  fail('a')
  clock.advance(10_000)
  fail('a')
  t.equal(budget.begin('a'), 50, 'the third spends the budget: refused until the window (opened at 0) ends')
  t.equal(budget.begin('b'), true, 'another address is not affected')
  budget.settle('b', false)
  clock.advance(49_500)
  t.equal(budget.begin('a'), 1, 'a part of a second left reads as 1')
  clock.advance(500)
  t.equal(budget.begin('a'), true, 'released at the end of the window')
  budget.settle('a', true)
  t.equal(budget.begin('a'), true, 'a new window counts from 0')
})

t.test('exact under concurrency: checks running count against the budget until they settle', async t => {
  const clock = new FakeClock(0)
  const budget = new FailureBudget(settings(0, 20, 60), clock)
  // 300 attempts arrive before any of them has been checked (a burst of concurrent legs, or workers).
  let admitted = 0
  for (let i = 0; i < 300; i++) if (budget.begin('10.9.9.9') === true) admitted++
  t.equal(admitted, 20, 'only as many checks run as the budget has room for')
  for (let i = 0; i < 20; i++) budget.settle('10.9.9.9', true)
  t.type(budget.begin('10.9.9.9'), 'number', 'all of them failed: the address is out until the window ends')
  const ok = new FailureBudget(settings(0, 2, 60), clock)
  t.equal(ok.begin('p'), true)
  t.equal(ok.begin('p'), true)
  t.type(ok.begin('p'), 'number', 'two checks in flight fill a budget of two')
  ok.settle('p', false)
  ok.settle('p', false)
  t.equal(ok.begin('p'), true, 'successes give their room back: a busy honest caller is never blocked')
})

t.test("the fleet's count keeps an address out once it passes the budget there", async t => {
  const clock = new FakeClock(0)
  const budget = new FailureBudget(settings(0, 3, 60), clock, async () => ({ count: 7, resetInMs: 30_000 }))
  t.equal(budget.begin('a'), true)
  budget.settle('a', true)
  await clock.tick()
  t.equal(budget.begin('a'), 30, "one failure here, seven in the fleet: out for the fleet window's 30 s")
})

t.test('failures spread over more than one window never spend the budget', async t => {
  const clock = new FakeClock(0)
  const budget = new FailureBudget(settings(0, 3, 10), clock)
  for (let i = 0; i < 10; i++) {
    t.equal(budget.begin('a'), true)
    budget.settle('a', true)
    clock.advance(i % 2 === 1 ? 10_000 : 0)
  }
  const off = new FailureBudget(settings(0, 0), clock)
  for (let i = 0; i < 50; i++) {
    off.begin('a')
    off.settle('a', true)
  }
  t.equal(off.begin('a'), true, 'failures: 0 turns the budget off')
})

t.test('the local auth state: revocations only extend and end with their time', async t => {
  const s = new LocalAuthState()
  s.revoke('j', 2000, 1000)
  s.revoke('j', 1500, 1000)
  t.ok(s.isRevoked('j', 1999), 'the later time wins')
  t.notOk(s.isRevoked('j', 2000), 'over at its time')
  s.revoke('past', 900, 1000)
  t.notOk(s.isRevoked('past', 1000), 'a time already over is not kept')
  t.same(s.countFailure('x', 100, 0), { count: 1, resetInMs: 100 })
  t.same(s.countFailure('x', 100, 40), { count: 2, resetInMs: 60 })
  t.same(s.countFailure('x', 100, 100), { count: 1, resetInMs: 100 }, 'a new window')
})

t.test('legs per route and per client, released once, forced for a takeover', async t => {
  let limits = { headerBytes: 16384, initMessageBytes: 1024, legsPerRoute: 3, legsPerClient: 2 }
  const l = new LegLimits(() => limits)
  const r1 = l.acquire('demo', 'static:a')
  const r2 = l.acquire('demo', 'static:a')
  t.equal(l.acquire('demo', 'static:a'), 'legs_per_client')
  t.type(l.acquire('demo', 'static:a', true), 'function', 'a takeover of its own session is not refused')
  t.equal(l.acquire('demo', 'static:b'), 'legs_per_route')
  t.equal(l.acquire('other', 'static:a'), 'legs_per_client', 'a client counts across routes')
  t.type(l.acquire('other', 'anonymous'), 'function', 'anonymous legs count per route only')
  if (typeof r1 !== 'function' || typeof r2 !== 'function') throw new Error('not granted')
  r1()
  r1()
  t.type(l.acquire('demo', 'static:b'), 'function', 'a released place is free again')
  t.equal(l.acquire('demo', 'static:c'), 'legs_per_route', 'and a release counts once')
  limits = { ...limits, legsPerRoute: 0, legsPerClient: 0 }
  t.type(l.acquire('demo', 'static:a'), 'function', '0: no limit (read at each leg: a reload applies)')
})

t.test('legs per route and per client, released once, forced for a takeover', async t => {
  let limits = { headerBytes: 16384, initMessageBytes: 1024, legsPerRoute: 3, legsPerClient: 2 }
  const l = new LegLimits(() => limits)
  const r1 = l.acquire('demo', 'static:a')
  const r2 = l.acquire('demo', 'static:a')
  t.equal(l.acquire('demo', 'static:a'), 'legs_per_client')
  t.type(l.acquire('demo', 'static:a', true), 'function', 'a takeover of its own session is not refused')
  t.equal(l.acquire('demo', 'static:b'), 'legs_per_route')
  t.equal(l.acquire('other', 'static:a'), 'legs_per_client', 'a client counts across routes')
  t.type(l.acquire('other', 'anonymous'), 'function', 'anonymous legs count per route only')
  if (typeof r1 !== 'function' || typeof r2 !== 'function') throw new Error('not granted')
  r1()
  r1()
  t.type(l.acquire('demo', 'static:b'), 'function', 'a released place is free again')
  t.equal(l.acquire('demo', 'static:c'), 'legs_per_route', 'and a release counts once')
  limits = { ...limits, legsPerRoute: 0, legsPerClient: 0 }
  t.type(l.acquire('demo', 'static:a'), 'function', '0: no limit (read at each leg: a reload applies)')
})

t.test('the caller tag key comes from the config: alike on every instance, never the credential', async t => {
  const principal = { kind: 'static' } as const
  const key = (secrets: string[], secret?: string): Buffer =>
    FleetKey.fromConfig({ secrets, ...(secret !== undefined ? { fleet: { secret } } : {}) })!.callerKey
  const k1 = key(['secret-one-0123', 'secret-two-4567'])
  const a = callerTag(principal, 'secret-one-0123', k1)
  t.equal(callerTag(principal, 'Bearer secret-one-0123', k1), a, 'raw and Bearer alike')
  t.not(callerTag(principal, 'secret-two-4567', k1), a, 'another credential, another tag')
  t.notOk(a.includes('secret-one'), 'never the credential')
  t.equal(
    callerTag(principal, 'secret-one-0123', key(['secret-two-4567', 'secret-one-0123'])),
    a,
    'any order: the same key'
  )
  t.not(
    callerTag(principal, 'secret-one-0123', key(['secret-one-0123', 'secret-three-89'])),
    a,
    'other secrets: another key'
  )
  const f = key(['secret-one-0123'], 'fleet-secret-0123456789')
  t.equal(
    callerTag(principal, 'x-credential', f),
    callerTag(principal, 'x-credential', key(['other-0123'], 'fleet-secret-0123456789')),
    'fleet.secret alone decides the key'
  )
  t.equal(FleetKey.fromConfig({ secrets: [] }), null, 'no secret at all: no fleet key from the config')
  t.equal(FleetKey.fromConfig({ secrets: ['abcdabcd'] })!.source, 'config secrets')
})
