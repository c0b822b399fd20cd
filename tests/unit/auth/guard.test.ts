import t from 'tap'
import { AuthGuard } from '../../../gateway/auth/guard'
import { callerTag, useCallerKey } from '../../../gateway/auth/hook-auth'
import { LegLimits } from '../../../gateway/auth/leg-limits'
import type { AuthSettings } from '../../../gateway/config/types'
import { LocalAuthState } from '../../../gateway/store/local-auth'
import { MemoryStore } from '../../../gateway/store/memory'
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
    const guard = new AuthGuard(settings(500, 0), new MemoryStore('i'), clock)
    const order: string[] = []
    guard.failed('10.0.0.1', () => order.push('first'))
    clock.advance(200)
    guard.failed('10.0.0.1', () => order.push('second'))
    order.push('other work')
    clock.advance(299)
    t.same(order, ['other work'], 'nothing before its 500 ms')
    clock.advance(1)
    t.same(order, ['other work', 'first'])
    clock.advance(200)
    t.same(order, ['other work', 'first', 'second'], 'each counted from its own failure')
    const atOnce = new AuthGuard(settings(0, 0), new MemoryStore('i'), clock)
    let answered = false
    atOnce.failed('10.0.0.1', () => (answered = true))
    t.ok(answered, 'a delay of 0 answers at once, synchronously')
    t.equal(clock.pending, 0)
  }
)

t.test('the per-address budget engages after N failures in a window and releases when the window ends', async t => {
  const clock = new FakeClock(0)
  const guard = new AuthGuard(settings(0, 3, 60), new MemoryStore('i'), clock)
  const fail = async (address: string): Promise<void> => {
    guard.failed(address, () => {})
    await clock.tick()
  }
  await fail('a')
  await fail('a')
  t.equal(guard.retryAfterSeconds('a'), 0, 'two of three: still admitted')
  clock.advance(10_000)
  await fail('a')
  t.equal(guard.retryAfterSeconds('a'), 50, 'the third spends the budget: refused until the window (opened at 0) ends')
  t.equal(guard.retryAfterSeconds('b'), 0, 'another address is not affected')
  clock.advance(49_500)
  t.equal(guard.retryAfterSeconds('a'), 1, 'a part of a second left reads as 1')
  clock.advance(500)
  t.equal(guard.retryAfterSeconds('a'), 0, 'released at the end of the window')
  await fail('a')
  t.equal(guard.retryAfterSeconds('a'), 0, 'a new window counts from 0')
})

t.test('failures spread over more than one window never spend the budget', async t => {
  const clock = new FakeClock(0)
  const guard = new AuthGuard(settings(0, 3, 10), new MemoryStore('i'), clock)
  for (let i = 0; i < 10; i++) {
    guard.failed('a', () => {})
    await clock.tick(i % 2 === 1 ? 10_000 : 0)
    t.equal(guard.retryAfterSeconds('a'), 0)
  }
  const off = new AuthGuard(settings(0, 0), new MemoryStore('i'), clock)
  for (let i = 0; i < 50; i++) off.failed('a', () => {})
  await clock.tick()
  t.equal(off.retryAfterSeconds('a'), 0, 'failures: 0 turns the budget off')
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

t.test('the caller tag key comes from the config secrets: alike on every instance, never the credential', async t => {
  const principal = { kind: 'static' } as const
  useCallerKey(['secret-one-0123', 'secret-two-4567'])
  const a = callerTag(principal, 'secret-one-0123')
  t.equal(callerTag(principal, 'Bearer secret-one-0123'), a, 'raw and Bearer alike')
  t.not(callerTag(principal, 'secret-two-4567'), a, 'another credential, another tag')
  t.notOk(a.includes('secret-one'), 'never the credential')
  useCallerKey(['secret-two-4567', 'secret-one-0123'])
  t.equal(callerTag(principal, 'secret-one-0123'), a, 'the same secrets in any order: the same key')
  useCallerKey(['secret-one-0123', 'secret-three-89'])
  t.not(callerTag(principal, 'secret-one-0123'), a, 'other config secrets: another key')
})
