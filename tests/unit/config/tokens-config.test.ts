import t from 'tap'
import { join } from 'node:path'
import { validateAll } from '../../../gateway/check'
import { loadConfig } from '../../../gateway/config/load'
import type { ConfigError } from '../../../gateway/errors'

const KEY = 'k'.repeat(40)
const CLIENT = 'client-secret-0123456789'
const route = (tokens: string): string =>
  'routes:\n  demo:\n    mapping: mappings/json-events.yaml\n' +
  `    auth: { tokens: ${tokens} }\n` +
  '    upstreams: [{ name: a, audio: "ws://127.0.0.1:9/x" }]\n'
const TOKENS =
  'tokens:\n  issuer: assist-gateway\n  keys: [{ kid: k1, secret: "${KEY}" }]\n' +
  '  clients: [{ id: platform-a, secret: "${CLIENT}", scope: "demo:audio demo:text" }]\n'

t.test('a tokens section loads; key and client secrets are secrets', async t => {
  const dir = t.testdir({ 'g.yaml': TOKENS + route('true') })
  const c = loadConfig(join(dir, 'g.yaml'), { KEY, CLIENT })
  t.equal(c.tokens?.ttlSeconds, 300, 'defaults from the schema')
  t.equal(c.routes.demo.auth.tokens, true)
  t.ok(c.secrets.includes(KEY) && c.secrets.includes(CLIENT))
})

t.test('token secrets written inline are refused', async t => {
  const inline = TOKENS.replace('${KEY}', KEY).replace('${CLIENT}', CLIENT)
  const dir = t.testdir({ 'g.yaml': inline + route('true') })
  const err = t.throws(() => loadConfig(join(dir, 'g.yaml'), {})) as ConfigError
  t.same(err.problems.map(p => p.pointer).sort(), ['/tokens/clients/0/secret', '/tokens/keys/0/secret'])
  t.notMatch(JSON.stringify(err.problems), KEY)
})

t.test('check reports a bad tokens section with pointers, never the secret', async t => {
  const bad =
    'tokens:\n  issuer: assist-gateway\n  keys: [{ kid: k1, secret: "${KEY}" }, { kid: k1, secret: "${KEY}" }]\n' +
    '  clients: [{ id: a, secret: "${CLIENT}", scope: "demo:audio" }, { id: a, secret: "${CLIENT}", scope: "demo:text" }]\n'
  const dir = t.testdir({ 'g.yaml': bad + route('{ issuers: [self, nowhere] }') })
  const v = await validateAll(join(dir, 'g.yaml'), { KEY, CLIENT })
  t.equal(v.ok, false)
  const pointers = v.ok ? [] : v.problems.map(p => p.pointer).sort()
  t.same(pointers, ['/routes/demo/auth/tokens', '/tokens/clients/1/id', '/tokens/keys/1/kid'])
  t.notMatch(JSON.stringify(v), KEY)
  t.notMatch(JSON.stringify(v.ok ? {} : v.problems), CLIENT)
})

t.test('an HS256 key shorter than 32 bytes and a missing key file are config problems', async t => {
  const short =
    'tokens:\n  issuer: gw\n  keys: [{ kid: k1, secret: "${KEY}" }, { kid: k2, privateKeyFile: nope.pem }]\n'
  const dir = t.testdir({ 'g.yaml': short + route('true') })
  const err = t.throws(() => loadConfig(join(dir, 'g.yaml'), { KEY: 'short' })) as ConfigError
  t.ok(err.problems.some(p => p.pointer === '/tokens/keys/0/secret'))
  const dir2 = t.testdir({ 'g.yaml': short + route('true') })
  const err2 = t.throws(() => loadConfig(join(dir2, 'g.yaml'), { KEY })) as ConfigError
  t.same(
    err2.problems.map(p => p.pointer),
    ['/tokens/keys/1/privateKeyFile']
  )
})

t.test('a route that trusts tokens with no tokens section is refused', async t => {
  const dir = t.testdir({ 'g.yaml': route('true') })
  const err = t.throws(() => loadConfig(join(dir, 'g.yaml'), {})) as ConfigError
  t.same(
    err.problems.map(p => p.pointer),
    ['/routes/demo/auth/tokens']
  )
})
