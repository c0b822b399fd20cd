import t from 'tap'
import { SignJWT, generateKeyPair } from 'jose'
import type { ExternalIssuer } from '../../../gateway/auth/token-verify'
import { START_MS, world } from './fixtures/setup'

// Issue 18 item 5: an external issuer's token lives no longer than its maxLifetimeSeconds (a token without
// jti cannot be revoked, so its lifetime is what bounds it). The issuer's keys are in memory here: the
// JWKS fetch has its own tests.

const ISS = 'https://idp.example/'
const AUD = 'assist-gateway-api'

t.test(
  'external tokens longer-lived than maxLifetimeSeconds are refused; own tokens are not bounded by it',
  async t => {
    const pair = await generateKeyPair('ES256', { extractable: true })
    const idp: ExternalIssuer = {
      settings: { name: 'idp', issuer: ISS, audience: AUD, maxLifetimeSeconds: 3600 },
      key: async kid => (kid === 'a1' ? { alg: 'ES256', key: pair.publicKey } : undefined)
    }
    const w = await world({ jwks: [idp], routes: { ext: { issuers: ['idp'] }, demo: true } })
    const now = START_MS / 1000
    const sign = async (claims: Record<string, unknown>): Promise<string> =>
      await new SignJWT({ scope: 'ext:audio', ...claims })
        .setProtectedHeader({ alg: 'ES256', kid: 'a1' })
        .setIssuer(ISS)
        .setAudience(AUD)
        .setSubject('idp-client')
        .sign(pair.privateKey)
    const verify = async (token: string) => await w.verifier.verify(token, { route: 'ext', hook: 'audio' })
    t.ok((await verify(await sign({ iat: now, exp: now + 3600 }))).ok, 'exactly the maximum: taken')
    t.same(
      await verify(await sign({ iat: now, exp: now + 3601 })),
      { ok: false, reason: 'lifetime' },
      'longer: refused'
    )
    t.same(
      await verify(await sign({ exp: now + 30 * 86400 })),
      { ok: false, reason: 'lifetime' },
      'no iat and a month to live (no jti: it could never be revoked): refused'
    )
    t.ok((await verify(await sign({ exp: now + 600 }))).ok, 'no iat, ten minutes left: taken')
    t.same(await verify(await sign({ iat: 'yesterday', exp: now + 60 })), { ok: false, reason: 'malformed' })
    t.ok(
      (await w.verifier.verify(await w.token(), { route: 'demo', hook: 'audio' })).ok,
      'own tokens: tokens.ttlSeconds bounds them'
    )
  }
)
