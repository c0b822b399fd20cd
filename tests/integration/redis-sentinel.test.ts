import t from 'tap'
import { eventually, haveRedisServer, startSentinelSet, storeFromConfig } from '../helpers/redis-servers'

// A real master, replica and three Sentinels started by the test on free ports (see tests/helpers/redis-servers.ts).
const skip = haveRedisServer
  ? false
  : 'redis-server and redis-cli are not on PATH (Debian: apt-get install redis-server)'
const PASSWORD = 'data-pw-s3cr3t'
const SENTINEL_PASSWORD = 'sentinel-pw-s3cr3t'

t.test('Sentinel failover of the master: the fleet keeps sharing counts and the prober lease', { skip }, async t => {
  const set = await startSentinelSet(t, { password: PASSWORD, sentinelPassword: SENTINEL_PASSWORD })
  const section = {
    store: {
      sentinels: set.addresses,
      sentinelName: set.name,
      password: '${REDIS_PASSWORD}',
      sentinelPassword: '${SENTINEL_PASSWORD}',
      syncIntervalSeconds: 0.2,
      leaseSeconds: 2
    }
  }
  const env = { REDIS_PASSWORD: PASSWORD, SENTINEL_PASSWORD }
  const a = await storeFromConfig(t, section, env)
  const b = await storeFromConfig(t, section, env)
  t.ok(a.config.secrets.includes(SENTINEL_PASSWORD), 'store.sentinelPassword is a secret')
  t.ok(await eventually(() => a.store.up() && b.store.up()), 'both stores are up through the Sentinels')
  t.ok(await eventually(() => a.store.isLeader() !== b.store.isLeader()), 'exactly one prober')
  a.store.reportStreams(new Map([['demo/a', 2]]))
  t.ok(await eventually(() => b.store.otherStreams('demo/a') === 2), "b sees a's streams before the failover")

  const before = set.master.port
  t.ok(
    await eventually(async () => (await set.sentinels[0].cli('sentinel', 'failover', set.name)) === 'OK', 20_000, 500),
    'a Sentinel accepts SENTINEL FAILOVER'
  )
  t.ok(await eventually(async () => (await set.masterPort()) === set.replica.port, 30_000), 'the replica is promoted')
  t.not(await set.masterPort(), before)

  // Counts written after the switch can only reach b through the new master.
  a.store.reportStreams(new Map([['demo/a', 5]]))
  b.store.reportStreams(new Map([['demo/a', 1]]))
  t.ok(
    await eventually(
      () =>
        a.store.up() && b.store.up() && b.store.otherStreams('demo/a') === 5 && a.store.otherStreams('demo/a') === 1,
      30_000
    ),
    'after the failover both stores are up and share counts again'
  )
  t.ok(await eventually(() => a.store.isLeader() !== b.store.isLeader(), 30_000), 'still exactly one prober')
  const leader = a.store.isLeader() ? a : b
  t.equal(
    await set.replica.cli('get', '{assist-gateway}:leader'),
    leader.store.instanceId,
    'the lease lives on the new master'
  )
  for (const s of [a, b]) {
    t.notOk(s.logs.raw.includes(PASSWORD), 'the data password is in no log line')
    t.notOk(s.logs.raw.includes(SENTINEL_PASSWORD), 'the Sentinel password is in no log line')
  }
})
