import t from 'tap'
import { decodeJwt } from 'jose'
import { FakeClock } from '../../helpers/fake-clock'
import { MemoryRevocationStore, StoreRevocations } from '../../../gateway/auth/revocation'
import { MemoryStore } from '../../../gateway/store/memory'
import { revokeEndpoint } from '../../../gateway/auth/revoke-endpoint'
import { TokenIssuer } from '../../../gateway/auth/token-issuer'
import { CLIENT_A, KEY1, START_MS, assertNoSecrets, world, type World } from './fixtures/setup'

const at = { route: 'demo', hook: 'audio' } as const
const revoke = (w: World, body: unknown) =>
  revokeEndpoint(typeof body === 'string' ? body : JSON.stringify(body), {
    verifier: w.verifier,
    revocations: w.revocations,
    ttlSeconds: 300,
    nowMs: w.clock.now
  })

t.test('the memory store holds a jti until its time, and only extends', async t => {
  const clock = new FakeClock(START_MS)
  const store = new MemoryRevocationStore(clock.now)
  await store.revoke('a', START_MS + 1000)
  await store.revoke('a', START_MS + 500)
  await store.revoke('past', START_MS - 1)
  t.ok(store.isRevoked('a'))
  t.notOk(store.isRevoked('past'), 'an entry already over is not kept')
  t.notOk(store.isRevoked('b'))
  clock.advance(999)
  t.ok(store.isRevoked('a'), 'the later time wins')
  clock.advance(1)
  t.notOk(store.isRevoked('a'))
  t.equal(store.size, 0, 'expired entries are dropped')
})

t.test('revoking by token takes effect on the next verification and lasts until exp plus skew', async t => {
  const w = await world()
  const token = await w.token()
  const other = await w.token()
  t.ok((await w.verifier.verify(token, at)).ok)
  const a = await revoke(w, { token })
  const jti = decodeJwt(token).jti
  t.same(a, { status: 200, json: { jti, revoked: true, untilEpochSeconds: START_MS / 1000 + 300 + 30 } })
  t.same(await w.verifier.verify(token, at), { ok: false, reason: 'revoked' })
  t.ok((await w.verifier.verify(other, at)).ok, 'other tokens of the same client still work')
  t.equal(w.revocations.size, 1)
  w.clock.advance(330_000)
  t.notOk(w.revocations.isRevoked(jti!), 'the entry ends when the token could no longer pass anyway')
  t.same(await w.verifier.verify(token, at), { ok: false, reason: 'expired' })
})

t.test('revoking by jti lasts for the token lifetime, or until a given exp', async t => {
  const w = await world()
  const token = await w.token()
  const jti = decodeJwt(token).jti as string
  t.same(await revoke(w, { jti }), {
    status: 200,
    json: { jti, revoked: true, untilEpochSeconds: START_MS / 1000 + 330 }
  })
  t.same(await w.verifier.verify(token, at), { ok: false, reason: 'revoked' })
  const exp = START_MS / 1000 + 3600
  t.equal((await revoke(w, { jti: 'external-1', exp })).json.untilEpochSeconds, exp + 30)
  t.equal((await revoke(w, { jti: 'external-2', exp: START_MS / 1000 + 30 * 24 * 3600 })).status, 400, 'exp too far')
})

t.test('the revoke endpoint refuses bad requests and never echoes a token', async t => {
  const w = await world()
  const good = await w.token()
  const stranger = await new TokenIssuer({ issuer: 'elsewhere', keys: [] }, w.ring, w.clock.now).issue('x', [
    'demo:audio'
  ])
  const answers = [
    await revoke(w, 'not json'),
    await revoke(w, '[]'),
    await revoke(w, {}),
    await revoke(w, { token: good, jti: 'x' }),
    await revoke(w, { jti: '' }),
    await revoke(w, { jti: 7 }),
    await revoke(w, { token: 42 }),
    await revoke(w, { token: `${good.slice(0, -4)}AAAA` }),
    await revoke(w, { token: stranger.accessToken }),
    await revoke(w, 'x'.repeat(20_000))
  ]
  for (const a of answers) t.equal(a.status, 400)
  t.same(answers[7]!.json, { error: 'invalid_token', reason: 'bad_signature' })
  t.same(answers[8]!.json, { error: 'invalid_token', reason: 'wrong_issuer' })
  t.equal(w.revocations.size, 0, 'nothing was revoked')
  t.ok((await w.verifier.verify(good, at)).ok)
  w.clock.advance(400_000)
  const late = await revoke(w, { token: good })
  t.same(late.json, { jti: decodeJwt(good).jti, revoked: false, reason: 'expired' }, 'an expired token needs no entry')
  assertNoSecrets(
    t,
    [...answers, late].map(a => JSON.stringify(a)),
    [good, stranger.accessToken, KEY1, CLIENT_A]
  )
})

t.test('a shared store that does not take a revocation is a 503 (it holds on this instance only)', async t => {
  const w = await world()
  const token = await w.token()
  const local = new MemoryStore('i')
  let redisUp = false
  const store = new StoreRevocations(
    {
      revokeToken: async (jti, until, now) => {
        await local.revokeToken(jti, until, now)
        if (!redisUp) throw new Error('Redis is not reachable')
      },
      isTokenRevoked: (jti, now) => local.isTokenRevoked(jti, now)
    },
    w.clock.now
  )
  const down = await revokeEndpoint(JSON.stringify({ token }), {
    verifier: w.verifier,
    revocations: store,
    ttlSeconds: 300,
    nowMs: w.clock.now
  })
  t.equal(down.status, 503)
  t.match(down.json, { error: 'temporarily_unavailable', jti: decodeJwt(token).jti })
  t.ok(await store.isRevoked(decodeJwt(token).jti as string), 'this instance holds it meanwhile')
  t.notOk(JSON.stringify(down.json).includes(token), 'never the token')
  redisUp = true
  const up = await revokeEndpoint(JSON.stringify({ token }), {
    verifier: w.verifier,
    revocations: store,
    ttlSeconds: 300,
    nowMs: w.clock.now
  })
  t.equal(up.status, 200, 'a retry once the store is back')
})
