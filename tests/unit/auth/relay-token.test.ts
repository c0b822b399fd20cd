import t from 'tap'
import { FleetKey } from '../../../gateway/auth/fleet-key'
import {
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
    const b = new RelayTokens(key, () => now)
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
    t.ok(b.remembered >= 1, 'nonces are kept until their tokens expire')
  }
)
