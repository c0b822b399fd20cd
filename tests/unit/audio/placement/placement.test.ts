import t from 'tap'
import { legKeyOf, Placement, sessionKeyOf } from '../../../../gateway/audio/placement/placement'
import { advertisedUrl } from '../../../../gateway/server/app'
import { LocalOwners } from '../../../../gateway/store/local-owners'
import { MemoryStore } from '../../../../gateway/store/memory'
import type { OwnerRecord } from '../../../../gateway/store/port'
import { FakeClock } from '../../../helpers/fake-clock'

// Session owner records (audio/placement/placement.ts): set-if-absent with a TTL, refreshed by their owner, taken
// over only from a owner found unreachable, released only by their owner; and where a leg is served.

const rec = (
  instance: string,
  caller = 'static:A',
  group = instance,
  url = `ws://${instance}:9466`,
  local = ''
): OwnerRecord => ({
  instance,
  group,
  url,
  local,
  caller
})
const A = rec('a')
const B = rec('b')
const C = rec('c')

t.test(
  'local records (the memory store, and Redis while away): claim, refresh, expiry, take-over, release',
  async t => {
    const j = new LocalOwners()
    t.same(j.claim('s', A, 10_000, 0), A, 'free: claimed')
    t.same(j.claim('s', B, 10_000, 1_000), A, 'owned by a live owner: that owner is answered')
    j.refresh(['s', 'other'], 'a', 10_000, 9_000)
    t.same(j.claim('s', B, 10_000, 15_000), A, 'still live after the refresh (9 s + 10 s)')
    j.refresh(['s'], 'b', 10_000, 18_000)
    t.same(j.claim('s', B, 10_000, 19_001), B, 'a refresh by another instance changed nothing: expired, taken')
    t.same(j.claim('s', C, 10_000, 19_002, 'a'), B, 'take-over names the unreachable owner: not this one')
    t.same(j.claim('s', C, 10_000, 19_003, 'b'), C, 'take-over from the owner found unreachable')
    j.release('s', 'b')
    t.same(j.claim('s', A, 10_000, 19_004), C, 'only the owner releases its record')
    j.release('s', 'c')
    t.same(j.claim('s', A, 10_000, 19_005), A, 'released: free again')
  }
)

t.test('the session key: a join route keys the call, any other the leg', async t => {
  const leg = { busNo: 4594, contactId: 9001, perspective: 'RX' }
  t.equal(sessionKeyOf({ name: 'r', config: {} }, leg, 'r'), 'r:4594:9001:RX')
  t.equal(sessionKeyOf({ name: 'r', config: { join: {} } }, leg, 'r'), 'r:4594:9001', 'TX and RX share one call')
})

t.test("issue 33: a call lives in its tenant's namespace; the route's own tenant keeps the route's keys", async t => {
  const leg = { busNo: 4594, contactId: 9001, perspective: 'TX' }
  const join = { name: 'r', config: { join: {} } }
  t.equal(sessionKeyOf(join, leg, 'acme'), 'acme@r:4594:9001')
  t.not(sessionKeyOf(join, leg, 'acme'), sessionKeyOf(join, leg, 'globex'), 'two tenants, two calls')
  t.not(sessionKeyOf(join, leg, 'acme'), sessionKeyOf(join, leg, 'r'), "nor the route's own tenant's")
  t.equal(legKeyOf('r', leg, 'globex'), 'globex@r:4594:9001:TX', 're-attach and affinity keys too')
  // The same contact of two tenants is placed apart: neither refuses the other.
  const clock = new FakeClock()
  const p = new Placement(new MemoryStore('x'), null, clock)
  p.own(sessionKeyOf(join, leg, 'acme'), 'caller-a', {})
  t.same(p.place(sessionKeyOf(join, leg, 'globex'), 'caller-b', null), { kind: 'here' })
  t.same(p.place(sessionKeyOf(join, leg, 'acme'), 'caller-b', null), { kind: 'refused' }, 'within a tenant: caller')
  p.close()
})

t.test('placement: here, relayed to a worker of the group, relayed to an instance, refused, or split', async t => {
  const clock = new FakeClock()
  const store = new MemoryStore('x')
  const me = { instance: 'g1/w0', group: 'g1', url: 'ws://10.0.0.1:9466', local: 'ws://127.0.0.1:40001' }
  const p = new Placement(store, me, clock)
  t.same(await p.place('c1', 'static:A', null), { kind: 'here' }, 'nobody holds the session: served here (claimed)')
  t.equal((await store.claimOwner('c1', rec('other'), 10_000)).instance, 'g1/w0', 'the claim is in the store')
  const sibling = rec('g1/w1', 'static:A', 'g1', 'ws://10.0.0.1:9466', 'ws://127.0.0.1:40002')
  await store.claimOwner('c2', sibling, 10_000)
  t.match(
    await p.place('c2', 'static:A', null),
    { kind: 'relay', url: 'ws://127.0.0.1:40002', hop: 'worker' },
    'another worker: loopback'
  )
  t.same(await p.place('c2', 'static:B', null), { kind: 'refused' }, "another caller's session: refused, not relayed")
  t.match(
    await p.place('c2', 'static:A', 'instance'),
    { kind: 'relay', hop: 'worker' },
    'relayed in by an instance: one more hop'
  )
  t.match(
    await p.place('c2', 'static:A', 'worker'),
    { kind: 'here', unreachable: 'relayed twice' },
    'never a third hop'
  )
  const remote = rec('g2/w0', 'static:A', 'g2', 'ws://10.0.0.2:9466', 'ws://127.0.0.1:40001')
  await store.claimOwner('c3', remote, 10_000)
  t.match(
    await p.place('c3', 'static:A', null),
    { kind: 'relay', url: 'ws://10.0.0.2:9466', hop: 'instance' },
    'another instance'
  )
  t.match(await p.place('c3', 'static:A', 'instance'), { kind: 'here', unreachable: 'relayed twice' }, 'never bounced')
  await store.claimOwner('c4', rec('g3', 'static:A', 'g3', ''), 10_000)
  t.match(
    await p.place('c4', 'static:A', null),
    { kind: 'here', unreachable: /advertiseUrl/ },
    'a owner without advertiseUrl'
  )
  t.match(await p.takeOver('c3', 'static:A', remote, null), { kind: 'here' }, 'taken over from an unreachable owner')
  t.equal((await store.claimOwner('c3', rec('other'), 10_000)).instance, 'g1/w0', 'the session is now held here')
})

t.test(
  'a session held here: placed at once (another caller refused), refreshed while held, released when let go',
  async t => {
    const clock = new FakeClock()
    const store = new MemoryStore('x')
    const p = new Placement(store, { instance: 'i1', group: 'i1', url: '', local: '' }, clock)
    const session = {}
    p.own('s', 'static:A', session)
    t.same(p.place('s', 'static:A', null), { kind: 'here' }, 'synchronous: no store round trip')
    t.same(p.place('s', 'static:B', null), { kind: 'refused' })
    t.equal(clock.pending, 1, 'one refresh timer for every session held')
    p.letGo('s', {})
    t.equal(p.callerOf('s'), 'static:A', 'only its owner lets it go')
    p.letGo('s', session)
    t.equal(p.callerOf('s'), undefined)
    t.equal(clock.pending, 0, 'nothing held: no timer')
    const lone = new Placement(store, null, clock)
    t.same(lone.place('t', 'static:A', null), { kind: 'here' }, 'a lone process: here, without the store')
  }
)

t.test('the advertised URL: the fleet port filled in when the URL names none', async t => {
  t.equal(advertisedUrl('ws://10.0.0.1', 9466), 'ws://10.0.0.1:9466')
  t.equal(advertisedUrl('wss://gw-0.gw.ns.svc/', 9466), 'wss://gw-0.gw.ns.svc:9466')
  t.equal(advertisedUrl('ws://10.0.0.1:9000', 9466), 'ws://10.0.0.1:9000', 'its own port kept')
  t.equal(advertisedUrl('ws://[fd00::1]', 9466), 'ws://[fd00::1]:9466')
  t.equal(advertisedUrl(undefined, 9466), '', 'not set: not reachable for relays')
})
