import t from 'tap'
import { join } from 'node:path'
import { loadConfig } from '../../../gateway/config/load'
import { redactConfig } from '../../../gateway/config/redact'

// GET /admin/config shows a config with every secret redacted (config/redact.ts): what is known to be a
// secret by where it is, and every secret value wherever else it appears, URL credentials included.

const ENV = {
  TOK: 'audio-token-value-1',
  TEXT: 'text-token-value-2',
  VKEY: 'vendor-key-value-3',
  HDR: 'header-value-4',
  QKEY: 'query-key-value-5',
  ADMIN: 'admin-token-value-6',
  FLEET: 'fleet-secret-value-0123456789',
  STOREPW: 'store-password-7',
  HSKEY: 'hs256-key-value-0123456789abcdefghij',
  CLIENT: 'client-secret-value-8',
  REDIS_URL: 'redis://user:pw@127.0.0.1:6379/0'
}

const CONFIG = `admin: { host: 127.0.0.1, token: "\${ADMIN}" }
fleet: { secret: "\${FLEET}" }
redis: \${REDIS_URL}
store: { password: "\${STOREPW}" }
tokens:
  issuer: gw
  keys: [{ kid: k1, secret: "\${HSKEY}" }]
  clients: [{ id: platform, secret: "\${CLIENT}", scope: "demo:text" }]
routes:
  demo:
    mapping: mappings/json-events.yaml
    auth: { audio: ["\${TOK}"], text: ["\${TEXT}"] }
    params: { note: "the vendor key is \${VKEY}" }
    upstreams:
      - name: a
        audio: "ws://127.0.0.1:9/x?key=\${QKEY}"
        credential: "\${VKEY}"
        headers: { x-api-key: "\${HDR}" }
`

t.test('every secret of a config is redacted, wherever it is; the rest is as loaded', async t => {
  const dir = t.testdir({ 'g.yaml': CONFIG })
  const config = loadConfig(join(dir, 'g.yaml'), ENV)
  const view = redactConfig(config, config.secrets) as Record<string, any>
  const text = JSON.stringify(view)
  for (const [name, value] of Object.entries(ENV)) if (name !== 'REDIS_URL') t.notOk(text.includes(value), name)
  t.notOk(text.includes(':pw@'), 'a password of two characters in a URL too')
  t.equal(view.redis, 'redis://[REDACTED]@127.0.0.1:6379/0')
  t.equal(view.admin.token, '[REDACTED]')
  t.equal(view.fleet.secret, '[REDACTED]')
  t.equal(view.store.password, '[REDACTED]')
  t.same(view.tokens.keys, [{ kid: 'k1', secret: '[REDACTED]' }])
  t.match(view.tokens.clients, [{ id: 'platform', secret: '[REDACTED]', scope: 'demo:text' }])
  t.match(view.routes.demo, {
    auth: { audio: ['[REDACTED]'], text: ['[REDACTED]'] },
    params: { note: 'the vendor key is [REDACTED]' },
    upstreams: [
      { audio: 'ws://127.0.0.1:9/x?key=[REDACTED]', credential: '[REDACTED]', headers: { 'x-api-key': '[REDACTED]' } }
    ]
  })
  t.notOk('secrets' in view || 'secrets' in view.routes.demo, 'the loader’s lists of secrets are left out')
  t.equal(view.admin.host, '127.0.0.1', 'everything else as loaded')
  t.equal(view.routes.demo.upstreams[0].name, 'a')
})
