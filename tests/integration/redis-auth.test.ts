import t from 'tap'
import { redisStorePair } from '../helpers/redis'

t.test('Redis: a revocation on one instance is seen by another at once, and only extends', async t => {
  const [a, b] = await redisStorePair(t)
  const now = Date.now()
  t.notOk(await b.isTokenRevoked('jti-1', now))
  await a.revokeToken('jti-1', now + 60_000, now)
  t.ok(await b.isTokenRevoked('jti-1', now), 'the other instance asks Redis: no sync to wait for')
  await b.revokeToken('jti-1', now + 1, now)
  t.ok(await a.isTokenRevoked('jti-1', now + 1000), 'a shorter revocation does not cut a longer one short')
  await a.revokeToken('jti-2', now + 150, now)
  t.ok(await b.isTokenRevoked('jti-2', now))
  // Redis ends the key with the token: polled, not slept for a fixed time.
  const end = Date.now() + 10_000
  while ((await b.isTokenRevoked('jti-2', Date.now())) && Date.now() < end) await new Promise(r => setTimeout(r, 50))
  t.notOk(await b.isTokenRevoked('jti-2', Date.now()), 'the entry ends when the token would have')
})

t.test('Redis: failures of one address are counted for the whole fleet, in one window', async t => {
  const [a, b] = await redisStorePair(t)
  t.match(await a.countFailure('10.0.0.9', 60_000, 0), { count: 1 })
  t.match(await b.countFailure('10.0.0.9', 60_000, 0), { count: 2 })
  const third = await a.countFailure('10.0.0.9', 60_000, 0)
  t.equal(third.count, 3, 'both instances add to one count')
  t.ok(third.resetInMs > 0 && third.resetInMs <= 60_000, 'the window opened by the first failure')
  t.match(await b.countFailure('10.0.0.8', 60_000, 0), { count: 1 }, 'per address')
})
