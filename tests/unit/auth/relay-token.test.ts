import t from 'tap'
import fc from 'fast-check'
import { FleetKey } from '../../../gateway/auth/fleet-key'
import {
  NonceRecord,
  type NonceTaken,
  type RelayClaims,
  RelayTokens,
  RELAY_TOKEN_TTL_MS,
  RELAY_CLOCK_SKEW_MS
} from '../../../gateway/auth/relay-token'

// What a relaying process asserts about a leg (auth/relay-token.ts): signed with the fleet key, with an
// expiry and a nonce, taken once, only by the process it is meant for.

const claims: RelayClaims = { hop: 'instance', to: 'gw-b', key: 'r:4594:9001', address: '10.1.2.3', from: 'gw-a' }
const forB = (c: RelayClaims): boolean => c.hop === 'instance' && c.to === 'gw-b'

t.test(
  'a token reads back once, for the process it names; a replay, a forgery or another fleet is refused',
  async t => {
    let now = 1_000_000
    const key = FleetKey.random()
    const a = new RelayTokens(key, () => now)
    const record = new NonceRecord(() => now)
    const b = new RelayTokens(key, () => now, record)
    const token = a.sign(claims)
    t.same(b.verify(token, forB), { ok: true, claims }, 'the claims come back as signed')
    t.same(b.verify(token, forB), { ok: false, reason: 'replayed' }, 'the same token again: refused')
    t.same(
      b.verify(a.sign(claims), c => c.to === 'gw-c'),
      { ok: false, reason: 'not_for_me' },
      'meant for another process'
    )
    const other = new RelayTokens(FleetKey.random(), () => now)
    t.same(other.verify(a.sign(claims), forB), { ok: false, reason: 'signature' }, 'another fleet key')
    const [v, body, sig] = a.sign(claims).split('.')
    const altered = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), address: '10.6.6.6' })
    )
    t.same(
      b.verify(`${v}.${altered.toString('base64url')}.${sig}`, forB),
      { ok: false, reason: 'signature' },
      'an altered claim'
    )
    t.same(b.verify('', forB), { ok: false, reason: 'missing' })
    t.same(b.verify('v1.x', forB), { ok: false, reason: 'malformed' })
    t.same(b.verify('10.1.2.3;c2lnbmF0dXJl', forB), { ok: false, reason: 'malformed' }, 'the old signed-address header')
    const late = a.sign(claims)
    now += RELAY_TOKEN_TTL_MS + RELAY_CLOCK_SKEW_MS
    t.same(b.verify(late, forB), { ok: false, reason: 'expired' }, 'past its expiry (and the skew)')
    const early = new RelayTokens(key, () => now + 5 * 60_000).sign(claims)
    t.same(b.verify(early, forB), { ok: false, reason: 'expired' }, 'dated too far ahead')
    t.ok(record.size >= 1, 'nonces are kept until their tokens expire')
  }
)

t.test('one record per instance: a token taken by one worker is refused by every other', async t => {
  const now = 1_000_000
  const key = FleetKey.random()
  const signer = new RelayTokens(key, () => now)
  // The main process's record, reached as a worker reaches it: an answer that comes later.
  const instance = new NonceRecord(() => now)
  const later = { take: async (nonce: string, until: number): Promise<NonceTaken> => instance.take(nonce, until) }
  const [w0, w1] = [new RelayTokens(key, () => now, later), new RelayTokens(key, () => now, later)]
  const token = signer.sign(claims)
  t.same(await w1.verify(token, forB), { ok: true, claims }, 'the first worker it reaches takes it')
  t.same(await w0.verify(token, forB), { ok: false, reason: 'replayed' }, 'a worker that has not seen it: refused')
  t.same(await w1.verify(token, forB), { ok: false, reason: 'replayed' }, 'and the one that took it')
  const alone = [new RelayTokens(key, () => now), new RelayTokens(key, () => now)]
  const other = signer.sign(claims)
  const verdicts = await Promise.all(alone.map(async r => await r.verify(other, forB)))
  t.same(
    verdicts.map(v => v.ok),
    [true, true],
    'what a record per worker let through'
  )
})

t.test('a nonce record takes each nonce once while it keeps it, and never keeps more than its bound', async t => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.array(
        fc.record({ nonce: fc.integer({ min: 0, max: 12 }), ttl: fc.integer({ min: 1, max: 50 }), dt: fc.nat(20) })
      ),
      (max, takes) => {
        let now = 0
        const record = new NonceRecord(() => now, max)
        const keptUntil = new Map<number, number>()
        for (const { nonce, ttl, dt } of takes) {
          now += dt
          const taken = record.take(String(nonce), now + ttl)
          const known = keptUntil.has(nonce)
          // Taken again only once its token has expired (verify refuses an expired token before its nonce).
          if (known && taken === 'taken' && (keptUntil.get(nonce) ?? 0) > now) return false
          if (taken === 'taken') keptUntil.set(nonce, now + ttl)
          if (!known && taken === 'replayed') return false
          if (record.size > max) return false
          // Busy only when every kept nonce is still unexpired.
          if (taken === 'busy' && [...keptUntil.values()].filter(u => u > now).length < max) return false
        }
        return true
      }
    )
  )
  t.pass('held for every sequence tried')
})
