import t from 'tap'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  eventually,
  freeRedisPort,
  haveRedisServer,
  startRedis,
  storeErrors,
  storeFromConfig
} from '../helpers/redis-servers'

// Private redis-servers started by the tests on free ports (see tests/helpers/redis-servers.ts).
const skip = haveRedisServer
  ? false
  : 'redis-server and redis-cli are not on PATH (Debian: apt-get install redis-server)'
const FAST = { syncIntervalSeconds: 0.2, leaseSeconds: 2 }

t.test(
  'a store whose commands fail is not up: each failure counted, one store_down line with the reason, recovery logged',
  { skip },
  async t => {
    const redis = await startRedis(t)
    const s = await storeFromConfig(t, {
      redis: `redis://127.0.0.1:${redis.port}`,
      store: { keyPrefix: 'fleet-e:', ...FAST }
    })
    t.ok(await eventually(() => s.store.up()), 'up')
    // A foreign value of the wrong type under the health hash makes every sync's HGETALL fail.
    t.equal(await redis.cli('set', '{fleet-e:}health', 'not-a-hash'), 'OK')
    t.ok(await eventually(() => !s.store.up()), 'the store says it is not up')
    t.ok(await eventually(async () => storeErrors(await s.scrape(), 'sync') >= 2), 'each failed sync is counted')
    t.match(await s.scrape(), 'assist_gateway_store_up 0')
    t.equal(s.store.isLeader(), true, 'a failing store probes for itself')
    const down = s.logs.lines.filter(l => l.event === 'store_down')
    t.equal(down.length, 1, 'one store_down line')
    t.match(down[0], { level: 'error', op: 'sync', reason: /WRONGTYPE/ })
    await redis.cli('del', '{fleet-e:}health')
    t.ok(await eventually(() => s.store.up()), 'up again once commands succeed')
    t.match(await s.scrape(), 'assist_gateway_store_up 1')
    t.equal(s.logs.lines.filter(l => l.event === 'store_up').length, 2, 'store_up logged at start and on recovery')
  }
)

t.test(
  'TLS and an ACL user: rediss:// with store.username, store.password and store.tls.ca beside the config',
  { skip },
  async t => {
    const dir = t.testdir()
    const [cert, key] = [join(dir, 'cert.pem'), join(dir, 'key.pem')]
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1'].concat([
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1'
      ]),
      { stdio: 'ignore' }
    )
    const tlsPort = await freeRedisPort()
    const redis = await startRedis(t, {
      password: 'default-user-pw',
      extra: ['--tls-port', String(tlsPort), '--tls-cert-file', cert, '--tls-key-file', key]
        .concat(['--tls-ca-cert-file', cert, '--tls-auth-clients', 'no'])
        .concat(['--user', 'gateway', 'on', '>gateway-user-pw', '~*', '&*', '+@all'])
    })
    const sections = {
      redis: `rediss://127.0.0.1:${tlsPort}`,
      store: {
        keyPrefix: 'fleet-t:',
        username: 'gateway',
        password: '${REDIS_PASSWORD}',
        tls: { ca: 'ca.pem' },
        ...FAST
      }
    }
    const env = { REDIS_PASSWORD: 'gateway-user-pw' }
    const ok = await storeFromConfig(t, sections, env, { 'ca.pem': readFileSync(cert, 'utf8') })
    t.ok(await eventually(() => ok.store.up()), 'up over TLS as the ACL user')
    t.ok(
      await eventually(async () => (await redis.cli('get', '{fleet-t:}leader')) === ok.store.instanceId),
      'it writes'
    )
    t.notOk(ok.logs.raw.includes('gateway-user-pw'), 'the password is in no log line')

    const untrusted = await storeFromConfig(t, { ...sections, store: { ...sections.store, tls: true } }, env)
    t.ok(
      await eventually(async () => storeErrors(await untrusted.scrape(), 'connect') >= 1),
      'without the CA the self-signed certificate is refused, and counted'
    )
    t.equal(untrusted.store.up(), false)
  }
)
