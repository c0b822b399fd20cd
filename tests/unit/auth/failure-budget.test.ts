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
  t.equal(budget.admit('a', true), true, 'a first failure is answered as one')
  t.equal(budget.admit('a', true), true)
  clock.advance(10_000)
  t.equal(budget.admit('a', true), true, 'the third spends the budget, and is still answered as a failure')
  t.equal(budget.admit('a', true), 50, 'a fourth is refused until the window (opened at 0) ends')
  t.equal(budget.admit('a', false), 50, 'so is a right credential from that address: the answer tells nothing')
  t.equal(budget.admit('b', false), true, 'another address is not affected')
  clock.advance(49_500)
  t.equal(budget.outSeconds('a'), 1, 'a part of a second left reads as 1')
  clock.advance(500)
  t.equal(budget.admit('a', false), true, 'released at the end of the window')
  t.equal(budget.admit('a', true), true, 'a new window counts from 0')
})

t.test('it counts failures only: checks in flight never take room, successes never spend it', async t => {
  const clock = new FakeClock(0)
  const budget = new FailureBudget(settings(0, 20, 60), clock)
  // 300 valid checks of one address at once (a balancer, a platform reconnecting every leg after a drain).
  let admitted = 0
  for (let i = 0; i < 300; i++) if (budget.admit('10.9.9.9', false) === true) admitted++
  t.equal(admitted, 300, 'every valid check is admitted')
  // 300 wrong ones at once: exactly the budget hears "wrong credential", the rest are refused.
  const told = Array.from({ length: 300 }, () => budget.admit('10.8.8.8', true)).filter(v => v === true).length
  t.equal(told, 20, 'failures answered as failures: exactly the budget')
  t.type(budget.admit('10.8.8.8', false), 'number', 'and the address is out, right credential or not')
  t.equal(budget.admit('10.9.9.9', false), true, 'the honest address next to it is not')
})

t.test("the fleet's count decides a failure's answer and keeps the address out once past the budget", async t => {
  const clock = new FakeClock(0)
  const budget = new FailureBudget(settings(0, 3, 60), clock, async () => ({ count: 7, resetInMs: 30_000 }))
  t.equal(await budget.admit('a', true), 30, "one failure here, seven in the fleet: refused for the fleet's 30 s")
  t.equal(budget.admit('a', false), 30, 'a right credential too, without asking the fleet again')
  const within = new FailureBudget(settings(0, 3, 60), clock, async () => ({ count: 3, resetInMs: 30_000 }))
  t.equal(await within.admit('a', true), true, 'within the budget in the fleet: answered as a failure')
  const down = new FailureBudget(settings(0, 1, 60), clock, async () => {
    throw new Error('Redis away')
  })
  t.equal(await down.admit('a', true), true, "the fleet's count failing: this gateway's count decides")
  t.equal(down.admit('a', true), 60, 'and holds')
})

t.test("a success waits for its address's failures still on their way to the fleet's count", async t => {
  const clock = new FakeClock(0)
  const answers: ((w: { count: number; resetInMs: number }) => void)[] = []
  const budget = new FailureBudget(settings(0, 2, 60), clock, () => new Promise(resolve => answers.push(resolve)))
  const failure = budget.admit('g', true)
  const guess = budget.admit('g', false)
  t.type(guess, Promise, 'a right guess behind an uncounted failure is not judged yet')
  t.equal(budget.admit('h', false), true, 'another address is judged at once')
  let judged: unknown = null
  void (guess as Promise<unknown>).then(v => (judged = v))
  await clock.tick()
  t.equal(judged, null, 'still waiting')
  answers[0]({ count: 5, resetInMs: 40_000 })
  t.equal(await failure, 40, 'the fleet says the address is out: the failure is refused')
  t.equal(await guess, 40, 'and so is the right guess that waited for it')
  const honest = new FailureBudget(settings(0, 2, 60), clock, () => new Promise(resolve => answers.push(resolve)))
  const typo = honest.admit('p', true)
  const retry = honest.admit('p', false)
  answers[1]({ count: 1, resetInMs: 60_000 })
  t.equal(await typo, true)
  t.equal(await retry, true, 'a typo, then the right credential: admitted once the count is back')
})

t.test('failures spread over more than one window never spend the budget', async t => {
  const clock = new FakeClock(0)
  const budget = new FailureBudget(settings(0, 3, 10), clock)
  for (let i = 0; i < 10; i++) {
    t.equal(budget.admit('a', true), true)
    clock.advance(i % 2 === 1 ? 10_000 : 0)
  }
  const off = new FailureBudget(settings(0, 0), clock)
  for (let i = 0; i < 50; i++) off.admit('a', true)
  t.equal(off.admit('a', false), true, 'failures: 0 turns the budget off')
  t.equal(off.tracked, 0, 'and keeps nothing')
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

t.test('the caller tag key comes from the config: alike on every instance, never the credential', async t => {
  const principal = { kind: 'static', tenant: 'r' } as const
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
