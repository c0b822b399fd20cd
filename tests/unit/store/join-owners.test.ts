import t from 'tap'
import { JoinDirectory } from '../../../gateway/audio/join-relay'
import { advertisedUrl } from '../../../gateway/server/app'
import { LocalJoins } from '../../../gateway/store/local-joins'
import { MemoryStore } from '../../../gateway/store/memory'
import type { JoinOwner, Store } from '../../../gateway/store/port'
import { redisStorePair } from '../../helpers/redis'

// Joined calls' owner records (route `join` across processes): set-if-absent with a TTL, refreshed by
// their owner, taken over only from an owner found unreachable, released only by their owner.

const owner = (instance: string, group = instance, url = `ws://${instance}:8443`, local = ''): JoinOwner => ({
  instance,
  group,
  url,
  local
})
const A = owner('a')
const B = owner('b')
const C = owner('c')

t.test(
  'local records (the memory store, and Redis while away): claim, refresh, expiry, take-over, release',
  async t => {
    const j = new LocalJoins()
    t.same(j.claim('call', A, 10_000, 0), A, 'free: claimed')
    t.same(j.claim('call', B, 10_000, 1_000), A, 'held by a live owner: that owner is answered')
    t.same(j.claim('call', A, 10_000, 9_000), A, 'the owner refreshes its record')
    t.same(j.claim('call', B, 10_000, 15_000), A, 'still live after the refresh (9 s + 10 s)')
    t.same(j.claim('call', B, 10_000, 19_001), B, 'expired: the next claim takes it')
    t.same(j.claim('call', C, 10_000, 19_002, 'a'), B, 'take-over names the unreachable owner: not this one')
    t.same(j.claim('call', C, 10_000, 19_003, 'b'), C, 'take-over from the owner found unreachable')
    j.release('call', 'b')
    t.same(j.claim('call', A, 10_000, 19_004), C, 'only the owner releases its record')
    j.release('call', 'c')
    t.same(j.claim('call', A, 10_000, 19_005), A, 'released: free again')
  }
)

t.test('Redis: one owner per call for the fleet; take-over and release as locally', async t => {
  const [a, b] = await redisStorePair(t)
  const both = await Promise.all([a.claimJoin('call', A, 10_000), b.claimJoin('call', B, 10_000)])
  t.same(both[0], both[1], 'two instances claiming at once agree on one owner')
  const first = both[0].instance === 'a' ? a : b
  const [held, other, otherRec] = first === a ? [A, b, B] : [B, a, A]
  t.same(await other.claimJoin('call', otherRec, 10_000), held, 'the other instance is told the owner')
  t.same(await first.claimJoin('call', held, 10_000), held, 'the owner refreshes')
  t.same(
    await other.claimJoin('call', otherRec, 10_000, held.instance),
    otherRec,
    'take-over from an unreachable owner'
  )
  first.releaseJoin('call', held.instance)
  t.same(await first.claimJoin('call', held, 10_000), otherRec, 'a release by a former owner changes nothing')
  other.releaseJoin('call', otherRec.instance)
  t.same(await first.claimJoin('call', held, 100), held, 'released by its owner: free again')
  // The TTL is Redis's: polled, not slept for a fixed time.
  const end = Date.now() + 10_000
  while ((await other.claimJoin('call', otherRec, 100)).instance !== otherRec.instance && Date.now() < end)
    await new Promise(r => setTimeout(r, 50))
  t.same(await other.claimJoin('call', otherRec, 10_000), otherRec, 'an owner that stops refreshing expires')
})

t.test('placement: here, relayed to a worker of the group, relayed to an instance, or split', async t => {
  const store: Store = new MemoryStore('x')
  const me = owner('g1/w0', 'g1', 'ws://10.0.0.1:8443', 'ws://127.0.0.1:40001')
  const dir = new JoinDirectory(store, me)
  t.same(await dir.place('c1', null), { kind: 'here' }, 'nobody holds the call: it is joined here')
  const sibling = owner('g1/w1', 'g1', 'ws://10.0.0.1:8443', 'ws://127.0.0.1:40002')
  await store.claimJoin('c2', sibling, 10_000)
  t.match(
    await dir.place('c2', null),
    { kind: 'relay', url: 'ws://127.0.0.1:40002', hop: 'worker' },
    'another worker: loopback'
  )
  t.match(
    await dir.place('c2', 'instance'),
    { kind: 'relay', hop: 'worker' },
    'relayed in by an instance: one more hop, to the worker'
  )
  t.match(await dir.place('c2', 'worker'), { kind: 'here', unreachable: 'relayed twice' }, 'never a third hop')
  const remote = owner('g2/w0', 'g2', 'ws://10.0.0.2:8443', 'ws://127.0.0.1:40001')
  await store.claimJoin('c3', remote, 10_000)
  t.match(
    await dir.place('c3', null),
    { kind: 'relay', url: 'ws://10.0.0.2:8443', hop: 'instance' },
    'another instance: its advertised URL'
  )
  t.match(
    await dir.place('c3', 'instance'),
    { kind: 'here', unreachable: 'relayed twice' },
    'never bounced between instances'
  )
  await store.claimJoin('c4', owner('g3', 'g3', ''), 10_000)
  t.match(
    await dir.place('c4', null),
    { kind: 'here', unreachable: /advertiseUrl/ },
    'an owner without advertiseUrl: split'
  )
  t.match(await dir.takeOver('c3', remote, null), { kind: 'here' }, 'taken over from an unreachable owner')
  t.same(await store.claimJoin('c3', remote, 10_000), me, 'the call is now held here')
})

t.test('the advertised URL: the listener port filled in when the URL names none', async t => {
  t.equal(advertisedUrl('ws://10.0.0.1', 8443), 'ws://10.0.0.1:8443')
  t.equal(advertisedUrl('wss://gw-0.gw.ns.svc/', 8443), 'wss://gw-0.gw.ns.svc:8443')
  t.equal(advertisedUrl('ws://10.0.0.1:9000', 8443), 'ws://10.0.0.1:9000', 'its own port kept')
  t.equal(advertisedUrl('ws://[fd00::1]', 8443), 'ws://[fd00::1]:8443')
  t.equal(advertisedUrl(undefined, 8443), '', 'not set: not reachable for relays')
})
