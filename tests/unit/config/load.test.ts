import t from 'tap'
import { join } from 'node:path'
import { loadConfig } from '../../../gateway/config/load'
import { ConfigError } from '../../../gateway/errors'

const ROUTE =
  'routes:\n  demo:\n    mapping: mappings/json-events.yaml\n    auth: { audio: ["${TOK}"] }\n    upstreams: [{ name: a, audio: "ws://127.0.0.1:${VPORT:-9}/x" }]\n'

t.test('defaults come from the schema; the result is frozen; paths are resolved', async t => {
  const dir = t.testdir({ 'g.yaml': ROUTE })
  const c = loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token' })
  t.equal(c.listen.port, 8443)
  t.equal(c.metrics.port, 9464)
  t.equal(c.admin.port, 9465)
  t.equal(c.admin.host, '127.0.0.1')
  t.equal(c.fleet.port, 9466)
  t.equal(c.audio.holdBufferBytes, 64000)
  t.equal(c.audio.backpressurePolicy, 'drop-oldest')
  t.equal(c.uws.allowFallback, false)
  t.equal(c.listen.tls, null)
  t.equal(c.redis, null)
  t.match(c.routes.demo.mapping, /mappings\/json-events\.yaml$/)
  t.equal(c.routes.demo.upstreams[0].audio, 'ws://127.0.0.1:9/x', '${VAR:-default} falls back')
  t.same([...c.secrets], ['abcd-token'])
  t.ok(Object.isFrozen(c) && Object.isFrozen(c.routes.demo.upstreams[0]), 'deeply frozen')
})

t.test('PORT, ADMIN_PORT, REDIS_URL and LOG_LEVEL override the file', async t => {
  const dir = t.testdir({ 'g.yaml': ROUTE })
  const c = loadConfig(join(dir, 'g.yaml'), {
    TOK: 'abcd-token',
    PORT: '8081',
    ADMIN_PORT: '9999',
    REDIS_URL: 'redis://:pw-secret-1@127.0.0.1:6379/3',
    LOG_LEVEL: 'debug'
  })
  t.equal(c.listen.port, 8081)
  t.equal(c.admin.port, 9999)
  t.equal(c.redis, 'redis://:pw-secret-1@127.0.0.1:6379/3')
  t.equal(c.log.level, 'debug')
  t.ok(c.secrets.includes('pw-secret-1'), 'the Redis password is treated as a secret')
  t.throws(() => loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token', PORT: 'eighty' }), ConfigError)
})

t.test('problems are listed all at once, each with file and pointer', async t => {
  const dir = t.testdir({
    'g.yaml':
      'listen: { port: -1, bogus: 1 }\naudio: { backpressurePolicy: maybe }\nroutes:\n  "bad name!": { mapping: x.yaml, upstreams: [] }\n'
  })
  const file = join(dir, 'g.yaml')
  try {
    loadConfig(file, {})
    t.fail('should throw')
  } catch (err) {
    t.type(err, ConfigError)
    const pointers = (err as ConfigError).problems.map(p => p.pointer)
    for (const p of ['/listen/port', '/listen/bogus', '/audio/backpressurePolicy'])
      t.ok(pointers.includes(p), `${p} reported`)
    t.ok((err as ConfigError).problems.every(p => p.file === file))
  }
})

t.test('two default routes, duplicate replica names and a missing mapping are refused', async t => {
  const dir = t.testdir({
    'g.yaml':
      'routes:\n  a: { default: true, mapping: mappings/passthrough.yaml, upstreams: [{ name: x, audio: "ws://h/1" }, { name: x, audio: "ws://h/2" }] }\n  b: { default: true, mapping: nowhere.yaml, upstreams: [{ name: y, audio: "ws://h/3" }] }\n'
  })
  const err = t.throws(() => loadConfig(join(dir, 'g.yaml'), {})) as unknown as ConfigError
  const msgs = err.problems.map(p => `${p.pointer}: ${p.message}`)
  t.ok(msgs.some(m => m.startsWith('/routes: at most one route')))
  t.ok(msgs.some(m => m.startsWith('/routes/a/upstreams/1/name:')))
  t.ok(msgs.some(m => m.startsWith('/routes/b/mapping: mapping file nowhere.yaml not found')))
})

t.test('${VAR} fills numbers and booleans, validated after substitution', async t => {
  const dir = t.testdir({
    'g.yaml': `listen:\n  port: \${GW_PORT:-20080}\nuws:\n  allowFallback: \${ALLOW:-false}\n${ROUTE}`
  })
  const c = loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token' })
  t.equal(c.listen.port, 20080, 'the default fills an integer')
  t.equal(c.uws.allowFallback, false, 'and a boolean')
  const d = loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token', GW_PORT: '8123', ALLOW: 'true' })
  t.equal(d.listen.port, 8123)
  t.equal(d.uws.allowFallback, true)
  const bad = t.throws(() => loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token', GW_PORT: 'eighty' })) as ConfigError
  t.match(bad.problems, [{ pointer: '/listen/port', message: /integer/ }], 'text that is no number is still refused')
  const mixed = t.testdir({ 'g.yaml': `listen:\n  port: 8\${GW_PORT:-0}\n${ROUTE}` })
  t.throws(
    () => loadConfig(join(mixed, 'g.yaml'), { TOK: 'abcd-token' }),
    ConfigError,
    'only a whole ${VAR} is read as a number'
  )
})

t.test('a ${VAR} in an upstream URL is a secret, except one that fills exactly its port', async t => {
  const urls =
    '    upstreams:\n' +
    '      - { name: a, audio: "ws://127.0.0.1:${VPORT:-9101}/stream", text: "http://127.0.0.1:${VPORT:-9101}" }\n' +
    '      - { name: b, audio: "wss://v.example/x?key=${QKEY}", text: "http://u:${UPASS}@v.example/a:${NOTPORT}x" }\n'
  const dir = t.testdir({
    'g.yaml': `routes:\n  demo:\n    mapping: mappings/json-events.yaml\n${urls}`
  })
  const c = loadConfig(join(dir, 'g.yaml'), { QKEY: 'query-key-1', UPASS: 'user-pass-1', NOTPORT: '8443' })
  t.equal(c.routes.demo.upstreams[0].audio, 'ws://127.0.0.1:9101/stream')
  t.notOk(
    c.secrets.includes('9101'),
    'a port is not scrubbed from logs and answers (ops/gateway.yaml, DEMO_VENDOR_PORT)'
  )
  t.ok(c.secrets.includes('query-key-1'), 'a key in a query is a secret')
  t.ok(c.secrets.includes('user-pass-1'), 'so is a password in the URL')
  t.ok(c.secrets.includes('8443'), 'digits that are not the whole port are a secret too')
})

t.test('redis: ${REDIS_URL} with the variable unset is an error; ${REDIS_URL:-} runs without Redis', async t => {
  const dir = t.testdir({
    'strict.yaml': `redis: \${REDIS_URL}\n${ROUTE}`,
    'optional.yaml': `redis: \${REDIS_URL:-}\n${ROUTE}`
  })
  const err = t.throws(() => loadConfig(join(dir, 'strict.yaml'), { TOK: 'abcd-token' })) as ConfigError
  t.match(err.problems, [{ pointer: '/redis', message: /REDIS_URL is not set/ }])
  t.equal(loadConfig(join(dir, 'optional.yaml'), { TOK: 'abcd-token' }).redis, null)
  t.equal(
    loadConfig(join(dir, 'strict.yaml'), { TOK: 'abcd-token', REDIS_URL: 'redis://127.0.0.1:6379' }).redis,
    'redis://127.0.0.1:6379'
  )
})

t.test('YAML syntax errors name the line and column', async t => {
  const dir = t.testdir({ 'g.yaml': 'listen:\n  port: 1\n  host: [unclosed\nroutes: {}\n' })
  const err = t.throws(() => loadConfig(join(dir, 'g.yaml'), {})) as ConfigError
  t.match(err.problems[0], { pointer: '/', message: /^YAML \w+: /, line: 4, col: 1 })
  t.notMatch(err.problems[0].message, /\?/)
  t.match(err.message, /g\.yaml:4:1: \/: YAML \w+: /, 'printed as file:line:col: /pointer: message')
  t.ok(err.problems.length <= 3, 'the first errors, not one per token after them')
})

t.test('a store CA file that does not exist is a config problem', async t => {
  const dir = t.testdir({
    'g.yaml': `store:\n  tls: { ca: missing-ca.pem }\n${ROUTE}`,
    'ok.yaml': `store:\n  tls: { ca: ca.pem }\n${ROUTE}`,
    'ca.pem': 'x'
  })
  const err = t.throws(() => loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token' })) as ConfigError
  t.match(err.problems, [{ pointer: '/store/tls/ca', message: /missing-ca\.pem not found/ }])
  const c = loadConfig(join(dir, 'ok.yaml'), { TOK: 'abcd-token' })
  t.equal((c.store.tls as { ca: string }).ca, join(dir, 'ca.pem'), 'resolved beside the config file')
})

t.test('schema problems name line and column, suggest the nearest key, and state what a union allows', async t => {
  const dir = t.testdir({
    'g.yaml': `listen:\n  porrt: 8080\nuws:\n  idleTimeoutSeconds: 5\n${ROUTE}`
  })
  const err = t.throws(() => loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token' })) as ConfigError
  const byPointer = Object.fromEntries(err.problems.map(p => [p.pointer, p]))
  t.match(byPointer['/listen/porrt'], {
    message: /is not an allowed property; did you mean "port"\?$/,
    line: 2,
    col: 3
  })
  t.match(byPointer['/uws/idleTimeoutSeconds'], { message: /must be 0, or an integer from 8 to 960$/, line: 4, col: 3 })
  t.match(err.message, /g\.yaml:2:3: \/listen\/porrt: is not an allowed property/)
})

t.test('audio.coalesceMs: 100 ms by default, 0 to 200, a clear problem otherwise', async t => {
  const dir = t.testdir({
    'g.yaml': ROUTE,
    'off.yaml': `audio: { coalesceMs: 0 }\n${ROUTE}`,
    'bad.yaml': `audio: { coalesceMs: 250 }\n${ROUTE}`
  })
  t.equal(loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token' }).audio.coalesceMs, 100)
  t.equal(loadConfig(join(dir, 'off.yaml'), { TOK: 'abcd-token' }).audio.coalesceMs, 0)
  const err = t.throws(() => loadConfig(join(dir, 'bad.yaml'), { TOK: 'abcd-token' })) as unknown as ConfigError
  t.match(err.problems, [{ pointer: '/audio/coalesceMs', message: /200/ }])
})

t.test('fleet.advertiseUrl: ws(s)://host[:port] only; a fleet with a join route and none gets a warning', async t => {
  const join_ =
    'routes:\n  st:\n    mapping: mappings/deepgram-stereo.yaml\n    join: { channels: [TX, RX] }\n' +
    '    upstreams: [{ name: a, audio: "ws://127.0.0.1:9/x" }]\n'
  const dir = t.testdir({
    'fleet.yaml': `redis: redis://127.0.0.1:6379\n${join_}`,
    'advertised.yaml': `redis: redis://127.0.0.1:6379\nfleet: { advertiseUrl: "ws://\${POD_IP}", secret: "\${FS}" }\n${join_}`,
    'nosecret.yaml': `redis: redis://127.0.0.1:6379\nfleet: { advertiseUrl: "ws://10.0.0.1" }\n${join_}`,
    'path.yaml': `fleet: { advertiseUrl: "ws://10.0.0.1:9466/audio" }\n${ROUTE}`,
    'scheme.yaml': `fleet: { advertiseUrl: "http://10.0.0.1" }\n${ROUTE}`,
    'moved.yaml': `listen: { advertiseUrl: "ws://10.0.0.1" }\n${ROUTE}`,
    'short.yaml': `fleet: { secret: "\${FS}" }\n${ROUTE}`
  })
  const fleet = loadConfig(join(dir, 'fleet.yaml'), {})
  t.match(fleet.warnings.join('\n'), /\/fleet\/advertiseUrl: not set[\s\S]*route st[\s\S]*split/)
  const advertised = loadConfig(join(dir, 'advertised.yaml'), { POD_IP: '10.1.2.3', FS: 'fleet-secret-0123456789' })
  t.equal(advertised.fleet.advertiseUrl, 'ws://10.1.2.3', 'a ${VAR} reference, as everywhere')
  t.same(advertised.warnings, [])
  t.ok(advertised.secrets.includes('fleet-secret-0123456789'), 'the fleet secret is a secret (never logged)')
  t.match(loadConfig(join(dir, 'nosecret.yaml'), {}).warnings.join('\n'), /\/fleet\/secret: not set/)
  for (const bad of ['path.yaml', 'scheme.yaml'])
    t.throws(() => loadConfig(join(dir, bad), { TOK: 'abcd-token' }), ConfigError, `${bad} is refused`)
  const moved = t.throws(() => loadConfig(join(dir, 'moved.yaml'), { TOK: 'abcd-token' })) as unknown as ConfigError
  t.match(moved.problems, [{ pointer: '/listen/advertiseUrl', message: /moved to fleet\.advertiseUrl/ }])
  const short = t.throws(() =>
    loadConfig(join(dir, 'short.yaml'), { TOK: 'abcd-token', FS: 'short' })
  ) as unknown as ConfigError
  t.match(short.problems, [{ pointer: '/fleet/secret', message: /16 characters/ }])
})

t.test('a ${ that starts no complete reference is a problem, whatever the environment holds', async t => {
  const dir = t.testdir({
    'g.yaml': `redis: \${REDIS_URL\nlog: { level: "\${1LEVEL}" }\n${ROUTE}`,
    'ok.yaml': `redis: "\${REDIS_URL:-}"\n${ROUTE}`
  })
  const err = t.throws(() =>
    loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token', REDIS_URL: 'redis://127.0.0.1:6379' })
  ) as ConfigError
  t.match(err.problems, [
    { pointer: '/log/level', line: 2 },
    { pointer: '/redis', message: /a `\$\{` that is not a complete reference/, line: 1, col: 1 }
  ])
  t.equal(loadConfig(join(dir, 'ok.yaml'), { TOK: 'abcd-token' }).redis, null, 'a complete reference still works')
})

t.test(
  'the admin API off loopback needs a token; an older admin.port on the metrics port is told where /metrics went',
  async t => {
    const dir = t.testdir({
      'open.yaml': `admin: { host: 0.0.0.0 }\n${ROUTE}`,
      'token.yaml': `admin: { host: 0.0.0.0, token: "\${ADMIN_TOKEN}" }\n${ROUTE}`,
      'old.yaml': `admin: { host: 127.0.0.1, port: 9464 }\n${ROUTE}`,
      'inline.yaml': `admin: { token: "literal-admin-token" }\n${ROUTE}`
    })
    const open = t.throws(() => loadConfig(join(dir, 'open.yaml'), { TOK: 'abcd-token' })) as unknown as ConfigError
    t.match(open.problems, [{ pointer: '/admin/token', message: /not a loopback address[\s\S]*admin\.token/ }])
    const c = loadConfig(join(dir, 'token.yaml'), { TOK: 'abcd-token', ADMIN_TOKEN: 'admin-token-0123' })
    t.equal(c.admin.token, 'admin-token-0123')
    t.ok(c.secrets.includes('admin-token-0123'), 'the admin token is a secret')
    const old = t.throws(() => loadConfig(join(dir, 'old.yaml'), { TOK: 'abcd-token' })) as unknown as ConfigError
    t.match(old.problems, [{ pointer: '/admin/port', message: /moved to the metrics listener/ }])
    t.equal(
      loadConfig(join(dir, 'old.yaml'), { TOK: 'abcd-token', METRICS_PORT: '9470' }).metrics.port,
      9470,
      'METRICS_PORT overrides'
    )
    const inline = t.throws(() => loadConfig(join(dir, 'inline.yaml'), { TOK: 'abcd-token' })) as unknown as ConfigError
    t.match(
      inline.problems,
      [{ pointer: '/admin/token', message: /\$\{VAR\}/ }],
      'the token is a secret: a ${VAR} only'
    )
  }
)

t.test(
  'two listeners on one port are a problem at the second, unless their hosts differ (wildcards overlap all)',
  async t => {
    const dir = t.testdir({
      'metrics.yaml': `listen: { port: 9000 }\nmetrics: { port: 9000 }\n${ROUTE}`,
      'fleet.yaml': `listen: { port: 9000 }\nfleet: { port: 9000, advertiseUrl: ws://10.0.0.5 }\n${ROUTE}`,
      'apart.yaml': `listen: { host: 10.0.0.5, port: 9000 }\nadmin: { host: 127.0.0.1, port: 9000 }\n${ROUTE}`,
      'unopened.yaml': `listen: { port: 9000 }\nfleet: { port: 9000 }\n${ROUTE}`,
      'ephemeral.yaml': `listen: { port: 0 }\nmetrics: { port: 0 }\nadmin: { port: 0 }\n${ROUTE}`
    })
    const env = { TOK: 'abcd-token' }
    const metrics = t.throws(() => loadConfig(join(dir, 'metrics.yaml'), env)) as unknown as ConfigError
    t.match(metrics.problems, [
      {
        pointer: '/metrics/port',
        message: 'metrics.port 9000 is also listen.port: each listener needs a port of its own',
        line: 2
      }
    ])
    const fleet = t.throws(() => loadConfig(join(dir, 'fleet.yaml'), env)) as unknown as ConfigError
    t.match(
      fleet.problems,
      [{ pointer: '/fleet/port', message: /is also listen\.port/ }],
      'an advertised fleet listener counts'
    )
    const viaEnv = t.throws(() =>
      loadConfig(join(dir, 'apart.yaml'), { ...env, PORT: '9464' })
    ) as unknown as ConfigError
    t.match(
      viaEnv.problems,
      [{ pointer: '/metrics/port', message: /is also listen\.port/ }],
      'after PORT overrides the file'
    )
    t.equal(loadConfig(join(dir, 'apart.yaml'), env).admin.port, 9000, 'different addresses may share a port number')
    t.equal(loadConfig(join(dir, 'unopened.yaml'), env).fleet.port, 9000, 'a fleet listener never opened takes no port')
    t.equal(loadConfig(join(dir, 'ephemeral.yaml'), env).listen.port, 0, 'port 0 is a new port each time')
  }
)

t.test('a secret with an inline default is refused (file:line:col), unless the config is a demo', async t => {
  const route = (credential: string): string =>
    'routes:\n  demo:\n    mapping: mappings/json-events.yaml\n' +
    `    auth: { audio: ["\${TOK:-demo-audio-token}"], text: ["\${TEXT:-}"] }\n` +
    `    upstreams: [{ name: a, audio: "ws://127.0.0.1:9/x", credential: "${credential}" }]\n`
  const dir = t.testdir({
    'g.yaml': route('${VKEY:-inline-secret}'),
    'demo.yaml': `demo: true\n${route('${VKEY:-inline-secret}')}`,
    'ok.yaml': route('${VKEY}').replace('${TOK:-demo-audio-token}', '${TOK}')
  })
  const err = t.throws(() =>
    loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token', TEXT: 'text-token' })
  ) as unknown as ConfigError
  t.match(
    err.problems.map(p => `${p.line}:${p.col}: ${p.pointer}: ${p.message}`),
    [
      /^4:\d+: \/routes\/demo\/auth\/audio\/0: a secret must not have an inline default/,
      /^5:\d+: \/routes\/demo\/upstreams\/0\/credential: a secret must not have an inline default/
    ],
    'each, where it is; set or not, the variable changes nothing; ${VAR:-} is fine'
  )
  t.throws(() => loadConfig(join(dir, 'g.yaml'), {}), 'with the variables unset too')
  const demo = loadConfig(join(dir, 'demo.yaml'), { TEXT: 'text-token' })
  t.equal(demo.routes.demo.upstreams[0].credential, 'inline-secret', 'demo: true takes public demo values')
  t.equal(demo.demo, true)
  t.equal(loadConfig(join(dir, 'ok.yaml'), { TOK: 'abcd-token', TEXT: 'text-token', VKEY: 'vendor-key' }).demo, false)
})
