import t from 'tap'
import { generateKeyPairSync } from 'node:crypto'
import { join } from 'node:path'
import { writeFileSync } from 'node:fs'
import { SignJWT, UnsecuredJWT } from 'jose'
import { FakeClock } from '../../helpers/fake-clock'
import { loadKeyRing } from '../../../gateway/auth/key-ring'
import { TokenIssuer } from '../../../gateway/auth/token-issuer'
import type { TokenCheck } from '../../../gateway/auth/token-verify'
import { CLIENT_A, KEY1, KEY2, START_MS, assertNoSecrets, tokenSettings, world } from './fixtures/setup'

t.test('an issued token opens exactly the hooks its scope names', async t => {
  const w = await world()
  const both = await w.token()
  for (const hook of ['audio', 'text'] as const) {
    const r = await w.verifier.verify(both, { route: 'demo', hook })
    t.ok(r.ok, `demo:${hook} accepted`)
    if (r.ok) t.match(r.claims, { sub: 'platform-a', iss: 'assist-gateway', issuerName: 'self' })
  }
  const textOnly = await w.token('demo:text')
  t.same(
    await w.verifier.verify(textOnly, { route: 'demo', hook: 'audio' }),
    { ok: false, reason: 'scope' },
    'wrong hook'
  )
  t.same(await w.verifier.verify(both, { route: 'other', hook: 'text' }), { ok: false, reason: 'scope' }, 'wrong route')
  t.same(
    await w.verifier.verify(both, { route: 'closed', hook: 'text' }),
    { ok: false, reason: 'wrong_issuer' },
    'a route that takes no tokens'
  )
  t.same(await w.verifier.verify(both, { route: 'nowhere', hook: 'text' }), { ok: false, reason: 'wrong_issuer' })
  for (const route of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
    t.same(
      await w.verifier.verify(both, { route, hook: 'text' }),
      { ok: false, reason: 'wrong_issuer' },
      `route ${route}`
    )
  }
})

t.test('exp and nbf hold within the configured clock skew, on the injected clock', async t => {
  const clock = new FakeClock(START_MS)
  const w = await world({ clock })
  const token = await w.token()
  const at = { route: 'demo', hook: 'audio' } as const
  clock.advance((300 + 29) * 1000)
  t.ok((await w.verifier.verify(token, at)).ok, 'past exp but within the 30 s skew')
  clock.advance(1000)
  t.same(await w.verifier.verify(token, at), { ok: false, reason: 'expired' })

  const ahead = new TokenIssuer(w.tokens, w.ring, () => START_MS + 31_000)
  const early = (await ahead.issue('platform-a', ['demo:audio'])).accessToken
  const w2 = await world({ clock: new FakeClock(START_MS) })
  t.same(await w2.verifier.verify(early, at), { ok: false, reason: 'not_yet_valid' }, 'nbf 31 s ahead')
  w2.clock.advance(1000)
  t.ok((await w2.verifier.verify(early, at)).ok, 'nbf 30 s ahead is within the skew')
})

t.test('key rotation: the first key signs, every listed key verifies, a removed kid is unknown', async t => {
  const clock = new FakeClock(START_MS)
  const before = await world({ clock })
  const old = await before.token()
  const rotated = await world({
    clock,
    tokens: tokenSettings({
      keys: [
        { kid: 'k2', secret: KEY2 },
        { kid: 'k1', secret: KEY1 }
      ]
    })
  })
  const fresh = await rotated.token()
  t.match(
    JSON.parse(Buffer.from(fresh.split('.')[0]!, 'base64url').toString()),
    { kid: 'k2' },
    'new tokens use the new key'
  )
  const at = { route: 'demo', hook: 'text' } as const
  t.ok((await rotated.verifier.verify(old, at)).ok, 'old token still verifies while k1 is listed')
  t.ok((await rotated.verifier.verify(fresh, at)).ok)
  const after = await world({ clock, tokens: tokenSettings({ keys: [{ kid: 'k2', secret: KEY2 }] }) })
  t.same(await after.verifier.verify(old, at), { ok: false, reason: 'unknown_kid' })
  t.ok((await after.verifier.verify(fresh, at)).ok)
})

t.test('forged, tampered and foreign tokens are refused with a stable reason that never echoes them', async t => {
  const w = await world()
  const at = { route: 'demo', hook: 'audio' } as const
  const good = await w.token()
  const [h, p, s] = good.split('.') as [string, string, string]
  const results: Array<[string, string, TokenCheck]> = []
  const check = async (name: string, token: string) => {
    const r = await w.verifier.verify(token, at)
    results.push([name, token, r])
    return r
  }
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString())
  const widened = Buffer.from(JSON.stringify({ ...claims, sub: 'platform-b' })).toString('base64url')
  t.same(await check('tampered payload', `${h}.${widened}.${s}`), { ok: false, reason: 'bad_signature' })
  const sign = (key: string, iss = 'assist-gateway', aud = 'assist-gateway', header: Record<string, unknown> = {}) =>
    new SignJWT({ scope: 'demo:audio' })
      .setProtectedHeader({ alg: 'HS256', kid: 'k1', typ: 'at+jwt', ...header })
      .setIssuer(iss)
      .setSubject('platform-a')
      .setAudience(aud)
      .setIssuedAt(START_MS / 1000)
      .setExpirationTime(START_MS / 1000 + 60)
      .setJti('j1')
      .sign(new TextEncoder().encode(key))
  t.same(await check('another secret, same kid', await sign(KEY2)), { ok: false, reason: 'bad_signature' })
  t.same(await check('unknown kid', await sign(KEY1, undefined, undefined, { kid: 'k9' })), {
    ok: false,
    reason: 'unknown_kid'
  })
  t.same(await check('foreign issuer', await sign(KEY1, 'someone-else')), { ok: false, reason: 'wrong_issuer' })
  t.same(await check('foreign audience', await sign(KEY1, undefined, 'another-api')), {
    ok: false,
    reason: 'wrong_audience'
  })
  t.same(await check('not an access token (typ)', await sign(KEY1, undefined, undefined, { typ: 'JWT' })), {
    ok: false,
    reason: 'malformed'
  })
  t.ok((await check('our own key and claims', await sign(KEY1))).ok, 'control: the same forger with our key passes')
  const none = new UnsecuredJWT({
    scope: 'demo:audio',
    iss: 'assist-gateway',
    aud: 'assist-gateway',
    sub: 'x'
  }).encode()
  t.same(await check('alg none', none), { ok: false, reason: 'malformed' }, 'no signature segment')
  const noneHeader = Buffer.from(JSON.stringify({ alg: 'none', kid: 'k1', typ: 'at+jwt' })).toString('base64url')
  t.same(await check('alg none with a signature', `${noneHeader}.${p}.${s}`), { ok: false, reason: 'bad_signature' })
  for (const junk of ['', 'Bearer', 'a.b.c', 'abc', `${h}.${p}`, 'x'.repeat(10_000), `${h}.${p}.${s}.x`]) {
    t.same(await check('junk', junk), { ok: false, reason: 'malformed' }, `junk of ${junk.length} chars`)
  }
  assertNoSecrets(
    t,
    results.map(([, , r]) => JSON.stringify(r)),
    [...results.map(([, token]) => token).filter(x => x.length > 8), KEY1, KEY2, CLIENT_A]
  )
})

t.test('ES256 and RS256 keys from PEM files; no alg confusion with the public key as an HMAC secret', async t => {
  const dir = t.testdir({})
  const ec = generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 })
  writeFileSync(join(dir, 'ec.pem'), ec.privateKey.export({ type: 'pkcs8', format: 'pem' }))
  writeFileSync(join(dir, 'rsa.pem'), rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }))
  const at = { route: 'demo', hook: 'audio' } as const
  for (const [kid, file, alg] of [
    ['e1', 'ec.pem', 'ES256'],
    ['r1', 'rsa.pem', 'RS256']
  ] as const) {
    const w = await world({ tokens: tokenSettings({ keys: [{ kid, privateKeyFile: join(dir, file) }] }) })
    t.equal(w.ring.signer?.alg, alg)
    const token = await w.token()
    t.match(JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()), { alg, kid })
    t.ok((await w.verifier.verify(token, at)).ok, `${alg} round trip`)
    const pub = (alg === 'ES256' ? ec : rsa).publicKey.export({ type: 'spki', format: 'pem' }) as string
    const forged = await new SignJWT({ scope: 'demo:audio' })
      .setProtectedHeader({ alg: 'HS256', kid, typ: 'at+jwt' })
      .setIssuer('assist-gateway')
      .setSubject('platform-a')
      .setAudience('assist-gateway')
      .setExpirationTime(START_MS / 1000 + 60)
      .setJti('j')
      .sign(new TextEncoder().encode(pub))
    t.same(
      await w.verifier.verify(forged, at),
      { ok: false, reason: 'bad_signature' },
      `HS256 forged with the ${alg} public key`
    )
  }
})

t.test('unusable keys are refused at load with the kid, never the secret', async t => {
  const dir = t.testdir({ 'bad.pem': 'not a key', 'small.pem': '' })
  const short = 'only-twenty-bytes-xx'
  const errors: string[] = []
  const attempts: Array<[string, Parameters<typeof loadKeyRing>[0], RegExp]> = [
    ['short HS256 secret', [{ kid: 'weak', secret: short }], /key weak is 20 bytes; HS256 needs at least 32/],
    [
      'duplicate kid',
      [
        { kid: 'k1', secret: KEY1 },
        { kid: 'k1', secret: KEY2 }
      ],
      /duplicate kid k1/
    ],
    ['not a PEM', [{ kid: 'p1', privateKeyFile: join(dir, 'bad.pem') }], /key p1 is not a PEM private key/],
    [
      'missing file',
      [{ kid: 'p2', privateKeyFile: join(dir, 'nope.pem') }],
      /cannot read the private key file of key p2/
    ]
  ]
  for (const [name, keys, message] of attempts) {
    const err = await loadKeyRing(keys).then(
      () => null,
      (e: Error) => e
    )
    t.type(err, TypeError, name)
    t.match(err?.message, message, name)
    errors.push(String(err?.message))
  }
  const ed = generateKeyPairSync('ed25519')
  const edFile = join(dir, 'ed.pem')
  writeFileSync(edFile, ed.privateKey.export({ type: 'pkcs8', format: 'pem' }))
  await t.rejects(loadKeyRing([{ kid: 'x', privateKeyFile: edFile }]), /EC P-256 key \(ES256\) or an RSA key/)
  assertNoSecrets(t, errors, [short, KEY1, KEY2])
})
