import fc from 'fast-check'
import t from 'tap'
import {
  CONNECTED,
  COUNTS_CONNECT_ERRORS,
  type LinkEvent,
  type LinkState,
  NEXT,
  RedisLink,
  SHARING,
  step,
  SYNCS
} from '../../../gateway/store/redis-link'
import type { StoreOp } from '../../../gateway/store/redis-options'
import { createLogger } from '../../../gateway/telemetry/log'
import { LogCapture } from '../../helpers/gateway'

// The Redis store's connection state machine (gateway/store/redis-link.ts), driven by events as ioredis and
// the store raise them. It has no time of its own (the sync interval is the store's), so no clock is needed.

const STATES = Object.keys(NEXT) as LinkState[]
const EVENTS: LinkEvent[] = ['ready', 'lost', 'failed', 'synced', 'close']

function setup(): { link: RedisLink; cap: LogCapture; ups: boolean[]; errors: StoreOp[] } {
  const cap = new LogCapture()
  const ups: boolean[] = []
  const errors: StoreOp[] = []
  const log = createLogger({ level: 'info', secrets: [], destination: cap.stream })
  const link = new RedisLink({ log, onUp: up => ups.push(up), onError: op => errors.push(op) })
  return { link, cap, ups, errors }
}

const downs = (cap: LogCapture): Record<string, unknown>[] => cap.lines.filter(l => l.event === 'store_down')

t.test('a ready connection is not up until a sync over it succeeds; then sharing comes up, said once', async t => {
  const { link, cap, ups } = setup()
  t.equal(link.state, 'OFFLINE')
  t.ok(link.ready(), 'a new connection starts a sync')
  t.equal(link.state, 'UNPROVEN')
  t.notOk(link.up(), 'not up before a sync succeeds')
  t.ok(link.connected(), 'commands go out to prove it')
  t.notOk(link.ready(), 'a second ready on the same connection starts no second sync')
  link.synced(true)
  t.equal(link.state, 'UP')
  t.ok(link.up())
  t.ok(link.leader(), 'the lease the sync took')
  link.synced(false)
  t.notOk(link.leader(), 'a later sync that lost the lease says so')
  t.same(ups, [true], 'told once')
  t.equal(cap.lines.filter(l => l.event === 'store_up').length, 1, 'one store_up line')
})

t.test('an outage is said once, with its reason: commands failing, or Redis unreachable', async t => {
  const { link, cap, ups, errors } = setup()
  link.ready()
  link.synced(true)
  link.failed('quota', new Error('OOM command not allowed'))
  link.failed('sync', new Error('OOM command not allowed'))
  link.failed('claim_owner', new Error('OOM command not allowed'))
  t.equal(link.state, 'UNPROVEN')
  t.notOk(link.leader(), 'no lease while sharing is down')
  t.same(errors, ['quota', 'sync', 'claim_owner'], 'every failure counted')
  t.same(ups, [true, false], 'down told once')
  t.equal(downs(cap).length, 1, 'one store_down line for the outage')
  t.match(downs(cap)[0], { op: 'quota', reason: 'OOM command not allowed', msg: /commands failing/ })
  link.synced(false)
  link.lost()
  t.equal(link.state, 'OFFLINE')
  t.match(downs(cap)[1], { reason: 'connection lost', msg: /unreachable/ }, 'a lost connection: unreachable')
  t.same(ups, [true, false, true, false])
})

t.test(
  'close: its own quit is no outage, connection errors of the quit are not counted, nothing reconnects',
  async t => {
    const { link, cap, ups, errors } = setup()
    link.ready()
    link.synced(true)
    t.equal(link.close(), 'UP', 'close says the state it was called in')
    t.equal(link.state, 'CLOSING_UP')
    t.ok(link.up(), 'sharing answers as before until the connection goes')
    t.ok(link.leader(), 'the lease is still known (close releases it)')
    t.notOk(link.syncs(), 'no sync after close')
    link.connectError(new Error('Connection is closed.'))
    t.same(errors, [], 'an error of the quit is not counted')
    link.failed('close', new Error('Connection is closed.'))
    t.same(errors, ['close'], 'a failed cleanup command is counted')
    link.lost()
    t.equal(link.state, 'CLOSED')
    t.notOk(link.ready(), 'a closed store never reconnects')
    t.equal(link.state, 'CLOSED')
    t.same(ups, [true], 'nothing said of the quit')
    t.equal(downs(cap).length, 0)
  }
)

t.test('the tables: every state has a row in each, and the rows agree with each other', async t => {
  for (const s of STATES) {
    t.same(Object.keys(NEXT[s]).sort(), [...EVENTS].sort(), `${s}: a step for every event`)
    t.ok(!SHARING[s] || CONNECTED[s], `${s}: sharing needs a ready connection`)
    t.ok(!SYNCS[s] || CONNECTED[s], `${s}: a sync needs a ready connection`)
    t.equal(NEXT[s].close[0] === 'CLOSED' || NEXT[s].close[0].startsWith('CLOSING'), true, `${s}: close closes`)
    t.ok(!COUNTS_CONNECT_ERRORS[s] || NEXT[s].close[0] !== s, `${s}: a closing state does not count its quit`)
  }
})

const events = fc.array(
  fc.oneof(
    fc.constantFrom<LinkEvent>('ready', 'lost', 'failed', 'close'),
    fc.boolean().map(leader => ({ synced: leader })),
    fc.constant('connect-error' as const)
  ),
  { maxLength: 60 }
)

t.test('property: over any events, no undefined step, an outage said once, a closed store never back', async t => {
  fc.assert(
    fc.property(events, seq => {
      const { link, cap, ups, errors } = setup()
      let closed = false
      let counted = 0
      for (const e of seq) {
        const before = link.state
        if (e === 'connect-error') {
          if (COUNTS_CONNECT_ERRORS[before]) counted++
          link.connectError(new Error('ECONNREFUSED'))
        } else if (typeof e === 'object') link.synced(e.synced)
        else if (e === 'ready') link.ready()
        else if (e === 'lost') link.lost()
        else if (e === 'failed') {
          counted++
          link.failed('sync', new Error('READONLY'))
        } else {
          closed = true
          link.close()
        }
        const s = link.state
        if (!STATES.includes(s)) return false // no undefined transition
        if (link.leader() && !link.up()) return false // the lease is known only while sharing
        if (closed && SYNCS[s]) return false // no sync after close
        if (before === 'CLOSED' && s !== 'CLOSED') return false // a closed store never comes back
        if (!closed && link.up() !== (ups.at(-1) === true)) return false // what was said is what is
      }
      // Up and down alternate, starting with up: each outage is said once, and so is its end.
      for (let i = 0; i < ups.length; i++) if (ups[i] !== (i % 2 === 0)) return false
      const lines = cap.lines.filter(l => l.event === 'store_up' || l.event === 'store_down')
      if (lines.length !== ups.length) return false
      return errors.length === counted
    }),
    { numRuns: 200 }
  )
  t.pass('held for 200 sequences')
})

t.test('step carries the lease only into the states that share', async t => {
  t.same(step({ state: 'UNPROVEN' }, 'synced', true), { link: { state: 'UP', leader: true }, news: 'up' })
  t.same(step({ state: 'UP', leader: true }, 'close'), { link: { state: 'CLOSING_UP', leader: true }, news: null })
  t.same(step({ state: 'UP', leader: true }, 'failed'), { link: { state: 'UNPROVEN' }, news: 'down' })
  t.same(step({ state: 'OFFLINE' }, 'synced', true), { link: { state: 'OFFLINE' }, news: null })
})
