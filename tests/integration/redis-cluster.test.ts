import t from 'tap'
import { eventually, haveRedisServer, startRedisCluster, storeErrors, storeFromConfig } from '../helpers/redis-servers'

// A real 3-node Redis Cluster started by the test on free ports (see tests/helpers/redis-servers.ts).
const skip = haveRedisServer
  ? false
  : 'redis-server and redis-cli are not on PATH (Debian: apt-get install redis-server)'
const PASSWORD = 'cluster-pw-s3cr3t'
const FAST = { syncIntervalSeconds: 0.2, leaseSeconds: 2 }

t.test(
  'Redis Cluster with the default key prefix: one prober is elected, fleet counts, verdicts and affinity are shared',
  { skip },
  async t => {
    const cluster = await startRedisCluster(t, { password: PASSWORD })
    const section = { store: { clusterNodes: cluster.seeds, password: '${REDIS_PASSWORD}', ...FAST } }
    const env = { REDIS_PASSWORD: PASSWORD }
    const a = await storeFromConfig(t, section, env)
    const b = await storeFromConfig(t, section, env)
    t.equal(a.config.store.keyPrefix, '{assist-gateway}:', 'the default prefix carries a hash tag')
    t.ok(a.config.secrets.includes(PASSWORD), 'store.password is a secret')
    t.ok(await eventually(() => a.store.up() && b.store.up()), 'both stores are up')
    t.ok(
      await eventually(() => a.store.isLeader() !== b.store.isLeader()),
      'exactly one instance holds the prober lease'
    )
    const [leader, follower] = a.store.isLeader() ? [a, b] : [b, a]
    const held = await cluster.nodes[0].cli('-c', 'get', '{assist-gateway}:leader')
    t.equal(held, leader.store.instanceId, 'the lease key lives in the cluster under the default prefix')

    leader.store.reportStreams(new Map([['demo/a', 3]]))
    follower.store.reportStreams(new Map([['demo/a', 1]]))
    t.ok(
      await eventually(() => follower.store.otherStreams('demo/a') === 3 && leader.store.otherStreams('demo/a') === 1),
      "each instance sees the other's streams (and not its own)"
    )
    leader.store.writeHealth('demo/a', { state: 'down', reason: 'probe failed', since: Date.now(), by: 'leader' })
    t.ok(
      await eventually(() => follower.store.sharedHealth().get('demo/a')?.state === 'down'),
      'the follower reads the verdict it did not probe'
    )
    const affinity = { route: 'demo', replica: 'a', instance: leader.store.instanceId, legId: 'leg-1' }
    leader.store.setAffinity('4594:820001:RX', affinity, 30)
    let seen: unknown = null
    t.ok(
      await eventually(async () => {
        seen = await follower.store.getAffinity('4594:820001:RX')
        return seen !== null
      }),
      'affinity written by one instance is read by the other'
    )
    t.same(seen, affinity)

    for (const s of [a, b]) {
      const text = await s.scrape()
      t.match(text, 'assist_gateway_store_up 1')
      t.equal(storeErrors(text, 'sync'), 0, 'no sync failed')
      t.notOk(s.logs.raw.includes(PASSWORD), 'the password is in no log line')
    }

    await leader.store.close()
    t.ok(
      await eventually(() => follower.store.isLeader()),
      'the lease passes to the other instance when the leader stops'
    )
  }
)

t.test(
  'Redis Cluster with a wrong password: store_up 0, every failed attempt counted, one log line, probing stays local',
  { skip },
  async t => {
    const cluster = await startRedisCluster(t, { password: PASSWORD })
    const s = await storeFromConfig(
      t,
      { store: { clusterNodes: cluster.seeds, password: '${REDIS_PASSWORD}', keyPrefix: 'fleet-b:', ...FAST } },
      { REDIS_PASSWORD: 'not-the-password' }
    )
    t.ok(await eventually(async () => storeErrors(await s.scrape(), 'connect') >= 2), 'failed attempts are counted')
    t.equal(s.store.up(), false)
    t.match(await s.scrape(), 'assist_gateway_store_up 0')
    t.equal(s.store.isLeader(), true, 'with the store away, the instance probes for itself')
    t.equal(s.logs.lines.filter(l => l.event === 'store_down').length, 1, 'one store_down line')
    t.notOk(s.logs.raw.includes('not-the-password'), 'the password is in no log line')
  }
)
