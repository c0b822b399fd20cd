import t from 'tap'
import { join } from 'node:path'
import { loadConfig } from '../../../gateway/config/load'
import type { Config } from '../../../gateway/config/types'
import { ConfigError } from '../../../gateway/errors'

const ROUTE =
  'routes:\n  demo:\n    mapping: mappings/json-events.yaml\n    auth: { audio: ["${TOK}"] }\n    upstreams: [{ name: a, audio: "ws://127.0.0.1:9/x" }]\n'

type T = { testdir: (fixture?: Record<string, string>) => string }

let lastDir = ''
const load = (t: T, yaml: string, env: Record<string, string> = {}): Config => {
  const dir = t.testdir({ 'g.yaml': yaml + ROUTE, 'ca.pem': 'a CA file' })
  lastDir = dir
  return loadConfig(join(dir, 'g.yaml'), { TOK: 'abcd-token', ...env })
}

t.test(
  'store credentials: passwords are ${VAR} secrets; TLS is true or { ca, servername, rejectUnauthorized }',
  async t => {
    const c = load(
      t,
      'store:\n  clusterNodes: [{ host: 127.0.0.1, port: 7000 }]\n  username: gw\n  password: ${RP}\n' +
        '  sentinelPassword: ${SP}\n  tls: { ca: ca.pem, servername: redis.internal }\n  sentinelTls: true\n',
      { RP: 'redis-pw-1', SP: 'sentinel-pw-1' }
    )
    t.equal(c.store.keyPrefix, '{assist-gateway}:', 'the default prefix is hash-tagged')
    t.equal(c.store.username, 'gw')
    t.same(
      c.store.tls,
      { ca: join(lastDir, 'ca.pem'), servername: 'redis.internal' },
      'the CA is found beside the config'
    )
    t.equal(c.store.sentinelTls, true)
    t.ok(c.secrets.includes('redis-pw-1'), 'store.password is redacted from logs')
    t.ok(c.secrets.includes('sentinel-pw-1'), 'store.sentinelPassword is redacted from logs')

    for (const key of ['password', 'sentinelPassword']) {
      const err = t.throws(() => load(t, `store:\n  ${key}: hunter22-inline\n`)) as ConfigError
      t.type(err, ConfigError)
      t.match(err.problems, [{ pointer: `/store/${key}`, message: /\$\{VAR\}/ }], `an inline ${key} is refused`)
    }
    const bad = t.throws(() => load(t, 'store:\n  tls: { cafile: x.pem }\n')) as ConfigError
    t.type(bad, ConfigError, 'an unknown TLS key is refused')
  }
)
