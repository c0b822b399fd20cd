import t from 'tap'
import { randomUUID } from 'node:crypto'
import type { OwnerRecord } from '../../gateway/store/port'
import { RedisStore } from '../../gateway/store/redis'
import { createLogger } from '../../gateway/telemetry/log'
import { until } from '../helpers/gateway'
import { needRedis, redisStorePair } from '../helpers/redis'

// Session owner records on real Redis (store/redis.ts, the CLAIM_OWNER, REFRESH_OWNERS and RELEASE_OWNER
// scripts): one owner per session for the fleet; take-over, refresh and release as locally.

const rec = (instance: string): OwnerRecord => ({
  instance,
  group: instance,
  url: `ws://${instance}:9466`,
  local: '',
  caller: 'c'
})
const A = rec('a')
const B = rec('b')

t.test('Redis: one owner per session for the fleet; refresh, take-over, release and expiry', async t => {
  const [a, b] = await redisStorePair(t)
  const both = await Promise.all([a.claimOwner('s', A, 10_000), b.claimOwner('s', B, 10_000)])
  t.same(both[0], both[1], 'two instances claiming at once agree on one owner')
  const first = both[0].instance === 'a' ? a : b
  const [held, other, otherRec] = first === a ? [A, b, B] : [B, a, A]
  t.same(await other.claimOwner('s', otherRec, 10_000), held, 'the other instance is told the owner')
  t.same(await first.claimOwner('s', held, 10_000), held, 'the owner claims again: still its')
  t.same(await other.claimOwner('s', otherRec, 10_000, held.instance), otherRec, 'take-over from an unreachable owner')
  first.releaseOwner('s', held.instance)
  t.same(await first.claimOwner('s', held, 10_000), otherRec, 'a release by a former owner changes nothing')
  other.releaseOwner('s', otherRec.instance)
  // The release goes out on the other instance's connection, unawaited (as the gateway sends it): polled.
  await until(async () => (await first.claimOwner('s', held, 1000)).instance === held.instance)
  t.same(await first.claimOwner('s', held, 1000), held, 'released by its owner: free again')
  // A refresh keeps it past its TTL; another instance's refresh does not. The TTL is Redis's: polled, not slept.
  other.refreshOwners(['s'], otherRec.instance, 60_000)
  first.refreshOwners(['s', 'none'], held.instance, 60_000)
  await new Promise(r => setTimeout(r, 1500))
  t.same(await other.claimOwner('s', otherRec, 10_000), held, 'refreshed by its owner: still held past its 1 s')
  first.refreshOwners(['s'], held.instance, 100)
  const end = Date.now() + 10_000
  while ((await other.claimOwner('s', otherRec, 10_000)).instance !== otherRec.instance && Date.now() < end)
    await new Promise(r => setTimeout(r, 50))
  t.same(await other.claimOwner('s', otherRec, 10_000), otherRec, 'a owner that stops refreshing expires')
})

t.test('Redis: a store that never probes never takes the prober lease, even alone', async t => {
  const url = await needRedis()
  const keyPrefix = `test:${randomUUID()}:`
  const log = createLogger({ level: 'silent', secrets: [] })
  const make = (id: string, prober: boolean): RedisStore =>
    new RedisStore(id, { url, keyPrefix, syncIntervalMs: 60_000, leaseMs: 120_000, log, prober, onUp: () => {} })
  // The main process of `serve --workers N` has a connection of its own, and its workers probe.
  const main = make('main', false)
  await main.start()
  t.teardown(() => main.close())
  await main.sync()
  t.equal(main.up(), true)
  t.equal(main.isLeader(), false, 'alone in the fleet, it still does not lead')
  const worker = make('worker', true)
  await worker.start()
  t.teardown(() => worker.close())
  await worker.sync()
  await main.sync()
  t.equal(worker.isLeader(), true, 'a process that probes takes the lease')
  t.equal(main.isLeader(), false)
})
