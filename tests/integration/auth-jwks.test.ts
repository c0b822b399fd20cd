import t, { type Test } from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { SignJWT, exportJWK, generateKeyPair, type JWK } from 'jose'
import { FakeClock } from '../helpers/fake-clock'
import { RemoteJwks, readJwks } from '../../gateway/auth/jwks'
import { fetchJwks } from '../../gateway/upstream/jwks-fetch'
import type { JwksIssuerSettings } from '../../gateway/config/tokens'
import { START_MS, world } from '../unit/auth/fixtures/setup'

const ISS = 'https://idp.example/'
const AUD = 'assist-gateway-api'

interface Idp {
  url: string
  hits: number
  /** What the next request answers. */
  doc: unknown
  status: number
  body?: string
  sign(kid: string, claims?: Record<string, unknown>): Promise<string>
  addKey(kid: string, alg?: 'ES256' | 'RS256'): Promise<void>
}

/** A real JWKS endpoint on 127.0.0.1, port 0, whose keys the test rotates. */
async function startIdp(t: Test): Promise<Idp> {
  const privates = new Map<string, { key: Awaited<ReturnType<typeof generateKeyPair>>['privateKey']; alg: string }>()
  const jwks: JWK[] = []
  const idp: Idp = {
    url: '',
    hits: 0,
    doc: { keys: jwks },
    status: 200,
    async addKey(kid, alg = 'ES256') {
      const pair = await generateKeyPair(alg, { extractable: true })
      privates.set(kid, { key: pair.privateKey, alg })
      jwks.push({ ...(await exportJWK(pair.publicKey)), kid, alg, use: 'sig' })
    },
    async sign(kid, claims = {}) {
      const k = privates.get(kid)!
      const payload = { scope: 'ext:audio', iss: ISS, aud: AUD, sub: 'idp-client', iat: START_MS / 1000 }
      return new SignJWT({ ...payload, exp: START_MS / 1000 + 3600, ...claims })
        .setProtectedHeader({ alg: k.alg, kid })
        .sign(k.key)
    }
  }
  const server = createServer((_req, res) => {
    idp.hits++
    res.writeHead(idp.status, { 'content-type': 'application/json' })
    res.end(idp.body ?? JSON.stringify(idp.doc))
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  idp.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`
  t.teardown(
    () =>
      new Promise<void>(resolve => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  )
  return idp
}

async function setup(t: Test, over: Partial<JwksIssuerSettings> = {}) {
  const idp = await startIdp(t)
  await idp.addKey('a1')
  const clock = new FakeClock(START_MS)
  const remote = new RemoteJwks(
    { name: 'idp', url: idp.url, issuer: ISS, audience: AUD, ...over },
    { nowMs: clock.now }
  )
  const w = await world({
    clock,
    jwks: [remote],
    routes: { ext: { issuers: ['idp'] }, both: { issuers: ['self', 'idp'] }, demo: true }
  })
  return { idp, clock, remote, w }
}

t.test('a route trusting an external issuer accepts its tokens; other routes do not', async t => {
  const { idp, w } = await setup(t)
  const token = await idp.sign('a1', { scope: 'ext:audio both:audio demo:audio' })
  const ok = await w.verifier.verify(token, { route: 'ext', hook: 'audio' })
  t.ok(ok.ok)
  if (ok.ok) t.match(ok.claims, { sub: 'idp-client', iss: ISS, issuerName: 'idp' })
  t.ok((await w.verifier.verify(token, { route: 'both', hook: 'audio' })).ok, 'self and idp')
  t.ok(
    (await w.verifier.verify(await w.token(), { route: 'both', hook: 'audio' })).ok === false,
    'own token lacks both:audio'
  )
  t.same(await w.verifier.verify(token, { route: 'demo', hook: 'audio' }), { ok: false, reason: 'wrong_issuer' })
  t.same(await w.verifier.verify(await idp.sign('a1', { aud: 'someone-else' }), { route: 'ext', hook: 'audio' }), {
    ok: false,
    reason: 'wrong_audience'
  })
  t.equal(idp.hits, 1, 'one fetch served every verification')
})

t.test('a key rotation at the issuer is picked up, no sooner than the refresh interval', async t => {
  const { idp, clock, remote, w } = await setup(t)
  const at = { route: 'ext', hook: 'audio' } as const
  t.ok((await w.verifier.verify(await idp.sign('a1'), at)).ok)
  t.equal(idp.hits, 1)
  await idp.addKey('a2', 'RS256')
  const rotated = await idp.sign('a2')
  clock.advance(10_000)
  t.same(await w.verifier.verify(rotated, at), { ok: false, reason: 'unknown_kid' }, 'within 30 s of the last fetch')
  t.equal(idp.hits, 1, 'no fetch inside the interval')
  clock.advance(20_000)
  t.ok((await w.verifier.verify(rotated, at)).ok, 'the new kid is fetched once the interval has passed')
  t.equal(idp.hits, 2)
  t.equal(remote.fetches, 2)
})

t.test('a storm of unknown kids makes at most one fetch per interval, shared by concurrent misses', async t => {
  const { idp, clock, w } = await setup(t)
  const at = { route: 'ext', hook: 'audio' } as const
  const good = await idp.sign('a1')
  const header = (kid: string) => Buffer.from(JSON.stringify({ alg: 'ES256', kid })).toString('base64url')
  const [, p, s] = good.split('.')
  const storm = (n: number, tag: string) =>
    Promise.all(Array.from({ length: n }, (_, i) => w.verifier.verify(`${header(`${tag}-${i}`)}.${p}.${s}`, at)))
  const first = await storm(200, 'a')
  t.ok(first.every(r => !r.ok && r.reason === 'unknown_kid'))
  t.equal(idp.hits, 1, '200 concurrent misses, one fetch')
  clock.advance(29_999)
  await storm(200, 'b')
  t.equal(idp.hits, 1, 'none more inside the interval')
  t.ok((await w.verifier.verify(good, at)).ok, 'known kids keep working during the storm')
  clock.advance(1)
  await storm(200, 'c')
  t.equal(idp.hits, 2, 'one more once the interval has passed')
})

t.test('a failing JWKS keeps the keys already held; old caches are refetched at maxAge', async t => {
  const { idp, clock, remote, w } = await setup(t, { maxAgeSeconds: 60 })
  const at = { route: 'ext', hook: 'audio' } as const
  const token = await idp.sign('a1')
  t.ok((await w.verifier.verify(token, at)).ok)
  idp.status = 500
  clock.advance(60_000)
  t.ok((await w.verifier.verify(token, at)).ok, 'stale but kept while the issuer fails')
  t.equal(idp.hits, 2, 'maxAge triggered a refetch')
  t.equal(remote.lastError, 'JWKS answered HTTP 500')
  idp.status = 200
  idp.doc = { keys: [] }
  clock.advance(30_000)
  t.same(await w.verifier.verify(token, at), { ok: false, reason: 'unknown_kid' }, 'a key removed at the issuer goes')
})

t.test('a JWKS never yields HMAC keys, private keys, or keys for another use', async t => {
  const ec = await generateKeyPair('ES256', { extractable: true })
  const pub = await exportJWK(ec.publicKey)
  const priv = await exportJWK(ec.privateKey)
  const keys = await readJwks(
    {
      keys: [
        { kty: 'oct', k: Buffer.from('x'.repeat(32)).toString('base64url'), kid: 'sym', alg: 'HS256' },
        { ...priv, kid: 'private' },
        { ...pub, kid: 'enc', use: 'enc' },
        { ...pub, kid: 'lying-alg', alg: 'RS256' },
        { ...pub },
        { ...pub, kid: 'good' },
        { ...pub, kid: 'good', crv: 'P-384' }
      ]
    },
    ['RS256', 'ES256']
  )
  t.same([...keys.keys()], ['good'])
  t.equal(keys.get('good')?.alg, 'ES256')
  t.same([...(await readJwks({ keys: [{ ...pub, kid: 'e' }] }, ['RS256'])).keys()], [], 'alg not allowed')
  await t.rejects(readJwks({ nokeys: true }, ['ES256']), /no keys array/)
})

t.test('fetchJwks refuses non-200, oversized and non-JSON answers without naming the URL', async t => {
  const idp = await startIdp(t)
  const url = `${idp.url}?access_key=Sekr3tInQuery`
  const errors: string[] = []
  const attempt = async (status: number, body: string, message: RegExp) => {
    idp.status = status
    idp.body = body
    const err = await fetchJwks(url, 5000).then(
      () => null,
      (e: Error) => e
    )
    t.match(err?.message, message)
    errors.push(String(err?.message))
  }
  await attempt(404, '{}', /HTTP 404/)
  await attempt(200, 'x'.repeat(300 * 1024), /over 262144 bytes/)
  await attempt(200, '<html>', /not JSON/)
  idp.body = '{"keys":[]}'
  t.same(await fetchJwks(url, 5000), { keys: [] })
  t.notOk(errors.some(e => e.includes('Sekr3t') || e.includes('127.0.0.1')))
})
