import t from 'tap'
import { decodeJwt, decodeProtectedHeader } from 'jose'
import { CLIENT_A, CLIENT_B, KEY1, assertNoSecrets, basic, world } from './fixtures/setup'

t.test('a client with Basic credentials gets a Bearer token of its full scope, not to be cached', async t => {
  const w = await world()
  const a = await w.post({ authorization: basic('platform-a', CLIENT_A) }, 'grant_type=client_credentials')
  t.equal(a.status, 200)
  t.equal(a.headers['cache-control'], 'no-store')
  t.equal(a.headers.pragma, 'no-cache')
  t.match(a.headers['content-type'], /^application\/json/)
  t.same(Object.keys(a.json).sort(), ['access_token', 'expires_in', 'scope', 'token_type'])
  t.equal(a.json.token_type, 'Bearer')
  t.equal(a.json.expires_in, 300)
  t.equal(a.json.scope, 'demo:audio demo:text')
  const jwt = a.json.access_token as string
  t.same(decodeProtectedHeader(jwt), { alg: 'HS256', kid: 'k1', typ: 'at+jwt' })
  const claims = decodeJwt(jwt)
  const now = w.clock.now() / 1000
  t.match(claims, { iss: 'assist-gateway', sub: 'platform-a', aud: 'assist-gateway', scope: 'demo:audio demo:text' })
  t.equal(claims.iat, now)
  t.equal(claims.nbf, now)
  t.equal(claims.exp, now + 300)
  t.match(claims.jti, /^[A-Za-z0-9_-]{22}$/)
  t.not(decodeJwt(await w.token()).jti, claims.jti, 'every token has its own jti')
})

t.test('body credentials work too, and a narrower scope is granted as asked', async t => {
  const w = await world()
  const body = new URLSearchParams({
    grant_type: 'client_credentials',
    client_id: 'platform-a',
    client_secret: CLIENT_A,
    scope: 'demo:text'
  }).toString()
  const a = await w.post({}, body)
  t.equal(a.status, 200)
  t.equal(a.json.scope, 'demo:text')
  t.equal(decodeJwt(a.json.access_token as string).scope, 'demo:text')
})

t.test('RFC 6749 5.2 errors', async t => {
  const w = await world()
  const okBasic = { authorization: basic('platform-a', CLIENT_A) }
  const cases: Array<[string, Record<string, string>, string, number, string, boolean]> = [
    [
      'Basic and body credentials at once',
      okBasic,
      `grant_type=client_credentials&client_id=platform-a&client_secret=${encodeURIComponent(CLIENT_A)}`,
      400,
      'invalid_request',
      false
    ],
    [
      'a wrong secret (Basic)',
      { authorization: basic('platform-a', CLIENT_B) },
      'grant_type=client_credentials',
      401,
      'invalid_client',
      true
    ],
    [
      'an unknown client (Basic)',
      { authorization: basic('nobody', CLIENT_A) },
      'grant_type=client_credentials',
      401,
      'invalid_client',
      true
    ],
    [
      'a wrong secret (body)',
      {},
      `grant_type=client_credentials&client_id=platform-a&client_secret=${CLIENT_B}`,
      401,
      'invalid_client',
      false
    ],
    [
      'a body id without secret',
      {},
      'grant_type=client_credentials&client_id=platform-a',
      401,
      'invalid_client',
      false
    ],
    ['no client authentication', {}, 'grant_type=client_credentials', 401, 'invalid_client', true],
    [
      'a Bearer header instead of Basic',
      { authorization: 'Bearer abc.def.ghi' },
      'grant_type=client_credentials',
      401,
      'invalid_client',
      true
    ],
    [
      'Basic that is not base64 id:secret',
      { authorization: 'Basic !!!' },
      'grant_type=client_credentials',
      401,
      'invalid_client',
      true
    ],
    ['grant_type password', okBasic, 'grant_type=password&username=u&password=p', 400, 'unsupported_grant_type', false],
    ['grant_type missing', okBasic, 'scope=demo:audio', 400, 'invalid_request', false],
    [
      'grant_type repeated',
      okBasic,
      'grant_type=client_credentials&grant_type=client_credentials',
      400,
      'invalid_request',
      false
    ],
    [
      'a scope beyond the client',
      okBasic,
      'grant_type=client_credentials&scope=demo:audio%20other:text',
      400,
      'invalid_scope',
      false
    ],
    ['an empty scope', okBasic, 'grant_type=client_credentials&scope=', 400, 'invalid_scope', false],
    [
      'a malformed scope',
      okBasic,
      'grant_type=client_credentials&scope=demo:audio%20%20demo:text',
      400,
      'invalid_scope',
      false
    ]
  ]
  for (const [name, headers, body, status, error, challenge] of cases) {
    const a = await w.post(headers, body)
    t.equal(a.status, status, `${name}: status`)
    t.equal(a.json.error, error, `${name}: error`)
    t.type(a.json.error_description, 'string')
    t.notOk('access_token' in a.json, `${name}: no token`)
    t.equal(a.headers['cache-control'], 'no-store')
    t.equal(a.headers['www-authenticate'], challenge ? 'Basic realm="assist-gateway"' : undefined, `${name}: challenge`)
  }
  const notForm = await w.post({ 'content-type': 'application/json' }, '{"grant_type":"client_credentials"}')
  t.equal(notForm.json.error, 'invalid_request', 'a JSON body is refused')
  const huge = await w.post(
    { authorization: basic('platform-a', CLIENT_A) },
    `grant_type=client_credentials&x=${'a'.repeat(5000)}`
  )
  t.equal(huge.json.error, 'invalid_request', 'an oversized body is refused')
  assertNoSecrets(
    t,
    w.answers.map(a => JSON.stringify(a)),
    [KEY1, CLIENT_A, CLIENT_B]
  )
})

t.test('Basic credentials are form-urlencoded before base64 (RFC 6749 2.3.1)', async t => {
  const w = await world({
    tokens: {
      issuer: 'assist-gateway',
      keys: [{ kid: 'k1', secret: KEY1 }],
      clients: [{ id: 'id with space', secret: 'p%s:s w+rd&more-0123', scope: 'demo:text' }]
    }
  })
  const a = await w.post(
    { authorization: basic('id with space', 'p%s:s w+rd&more-0123') },
    'grant_type=client_credentials'
  )
  t.equal(a.status, 200)
  t.equal(a.json.scope, 'demo:text')
})

t.test('a token answer never carries a secret, and errors never echo the client id', async t => {
  const w = await world()
  const ok = await w.post({ authorization: basic('platform-a', CLIENT_A) }, 'grant_type=client_credentials')
  assertNoSecrets(t, [JSON.stringify(ok)], [KEY1, CLIENT_A, CLIENT_B])
  const bad = await w.post({ authorization: basic('platform-zz-unknown', 'x') }, 'grant_type=client_credentials')
  t.notMatch(JSON.stringify(bad), /platform-zz-unknown/)
})
