import t from 'tap'
import Ajv from 'ajv'
import fragment from '../../../schemas/fragments/tokens.schema.json'
import { checkTokenSettings, trustedIssuers, type TokenSettings } from '../../../gateway/config/tokens'
import { CLIENT_A, KEY1 } from '../auth/fixtures/setup'

// The project's Ajv options (gateway/validate/compile.ts), so the fragment merges without surprises.
const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: true, strictRequired: false, allowUnionTypes: true })
const validate = ajv.compile(fragment)

const issueExample: TokenSettings = {
  issuer: 'assist-gateway',
  ttlSeconds: 300,
  keys: [{ kid: 'k1', secret: KEY1 }],
  clients: [{ id: 'platform-a', secret: CLIENT_A, scope: 'demo:audio demo:text' }]
}

t.test('the schema fragment accepts the issue example and its extensions', async t => {
  t.ok(validate({ tokens: issueExample, routeTokens: true }), JSON.stringify(validate.errors))
  const full: TokenSettings = {
    ...issueExample,
    audience: 'assist-gateway-api',
    clockSkewSeconds: 10,
    keys: [{ kid: 'k2', privateKeyFile: 'keys/k2.pem' }, ...issueExample.keys!],
    jwks: [{ name: 'corp', url: 'https://idp.example/jwks.json', issuer: 'https://idp.example/', audience: 'gw' }]
  }
  const doc = { tokens: full, routeTokens: { issuers: ['self', 'corp'] } }
  t.ok(validate(doc), JSON.stringify(validate.errors))
  t.match(
    doc.tokens.jwks![0],
    { algorithms: ['RS256', 'ES256'], minRefreshIntervalSeconds: 30, maxAgeSeconds: 600 },
    'defaults'
  )
})

t.test('the schema fragment refuses what cannot work', async t => {
  const bad: Array<[string, unknown]> = [
    ['a short HS256 secret', { ...issueExample, keys: [{ kid: 'k1', secret: 'short' }] }],
    ['a key with secret and file', { ...issueExample, keys: [{ kid: 'k1', secret: KEY1, privateKeyFile: 'x.pem' }] }],
    ['no issuer', { keys: issueExample.keys }],
    ['a scope that is not route:hook', { ...issueExample, clients: [{ id: 'a', secret: CLIENT_A, scope: 'admin' }] }],
    [
      'a JWKS issuer named self',
      { issuer: 'x', jwks: [{ name: 'self', url: 'https://i/', issuer: 'i', audience: 'a' }] }
    ],
    ['an unknown key', { ...issueExample, algorithm: 'none' }],
    ['a skew over five minutes', { ...issueExample, clockSkewSeconds: 3600 }]
  ]
  for (const [name, tokens] of bad) t.notOk(validate({ tokens }), name)
  t.notOk(validate({ routeTokens: { issuers: [] } }), 'a route with an empty issuer list')
  t.notOk(validate({ routeTokens: 'yes' }))
})

t.test('cross-field checks name the pointer and never quote a secret', async t => {
  const multibyte = 'é'.repeat(15) // 15 characters, 30 bytes
  const problems = checkTokenSettings(
    {
      issuer: 'gw',
      keys: [
        { kid: 'k1', secret: multibyte },
        { kid: 'k1', secret: KEY1 }
      ],
      clients: [
        { id: 'a', secret: CLIENT_A, scope: 'demo:text' },
        { id: 'a', secret: CLIENT_A, scope: 'demo:text' }
      ]
    },
    { demo: { auth: { tokens: { issuers: ['self', 'corp'] } } }, plain: { auth: {} } }
  )
  t.same(problems, [
    '/tokens/keys/0/secret: an HS256 secret must be at least 32 bytes (key k1)',
    '/tokens/keys/1/kid: duplicate kid k1',
    '/tokens/clients/1/id: duplicate client id',
    '/routes/demo/auth/tokens: no tokens.jwks entry is named corp'
  ])
  t.same(checkTokenSettings(undefined, { demo: { auth: { tokens: true } } }), [
    "/routes/demo/auth/tokens: the route trusts the gateway's own tokens but tokens.keys is empty"
  ])
  t.same(checkTokenSettings(issueExample, { demo: { auth: { tokens: true } } }), [])
  const jwks = (issuer: string) => ({ name: issuer.replace(/\W/g, ''), url: 'https://i/', issuer, audience: 'a' })
  t.same(checkTokenSettings({ ...issueExample, jwks: [jwks('https://idp/'), jwks('assist-gateway')] }, {}), [
    '/tokens/jwks/1/issuer: another issuer already has this iss'
  ])
  t.notOk(
    problems.join('\n').includes(KEY1) || problems.join('\n').includes(multibyte) || problems.join().includes(CLIENT_A)
  )
})

t.test('a route trusts its own tokens with true, named issuers with a list, none otherwise', async t => {
  t.same(trustedIssuers(true), ['self'])
  t.same(trustedIssuers({ issuers: ['corp'] }), ['corp'])
  t.same(trustedIssuers(false), [])
  t.same(trustedIssuers(undefined), [])
})
