import t from 'tap'
import fc from 'fast-check'
import { adminAuthorized } from '../../../gateway/server/admin'
import { mergeRecent, STATUS_CSP } from '../../../gateway/server/status-page'
import { STATUS_SCRIPT } from '../../../gateway/server/status-script'
import { LocalCalls } from '../../../gateway/store/local-calls'
import type { CallRecord } from '../../../gateway/store/port'
import { RECENT_KEPT, RecentEvents } from '../../../gateway/telemetry/recent'

const TOKEN = 'admin-token-0123456789'
const basic = (userPass: string): string => `Basic ${Buffer.from(userPass).toString('base64')}`

t.test('the admin token: as a bearer, or as the password of Basic with any user name; nothing else', async t => {
  t.ok(adminAuthorized(TOKEN, `Bearer ${TOKEN}`))
  t.ok(adminAuthorized(TOKEN, basic(`operator:${TOKEN}`)))
  t.ok(adminAuthorized(TOKEN, basic(`:${TOKEN}`)), 'an empty user name')
  t.ok(adminAuthorized(TOKEN, `basic   ${Buffer.from(`x:${TOKEN}`).toString('base64')}`), 'the scheme in any case')
  t.notOk(adminAuthorized(TOKEN, basic(`${TOKEN}:wrong`)), 'the token as the user name is not the password')
  t.notOk(adminAuthorized(TOKEN, basic(TOKEN)), 'no colon: no password')
  t.notOk(adminAuthorized(TOKEN, 'Basic !!!not-base64'))
  t.notOk(adminAuthorized(TOKEN, TOKEN), 'no scheme')
  t.notOk(adminAuthorized(TOKEN, ''))
  t.ok(adminAuthorized('', ''), 'a tokenless (loopback) admin')
  fc.assert(
    fc.property(fc.string(), fc.string(), (user, password) => {
      const header = basic(`${user.replace(/:/g, '')}:${password}`)
      return adminAuthorized(TOKEN, header) === (password === TOKEN)
    })
  )
})

t.test('recent events: failovers and refusals kept apart, newest first, each list bounded', async t => {
  const r = new RecentEvents()
  r.add({ kind: 'failover', route: 'demo', upstream: 'r1', from: 'r0' })
  for (let i = 0; i < RECENT_KEPT * 3; i++) r.add({ kind: 'refusal', route: 'demo', code: `C${i}`, hook: 'text' })
  const v = r.view()
  t.equal(v.changes.length, 1, 'a flood of refusals never pushes a failover out')
  t.equal(v.refusals.length, RECENT_KEPT)
  t.equal(v.refusals[0].code, `C${RECENT_KEPT * 3 - 1}`, 'newest first')
  t.match(v.changes[0].at, /^\d{4}-\d\d-\d\dT/)
  const merged = mergeRecent(
    [
      { worker: 0, view: { changes: [{ at: '2026-01-01T00:00:02Z', kind: 'down', route: 'a' }], refusals: [] } },
      { worker: 1, view: { changes: [{ at: '2026-01-01T00:00:03Z', kind: 'up', route: 'a' }], refusals: [] } }
    ],
    RECENT_KEPT
  )
  t.same(
    merged.changes.map(e => [e.kind, e.worker]),
    [
      ['up', 1],
      ['down', 0]
    ],
    'workers merged, newest first, each entry naming its worker'
  )
})

const record = (contactId: string, legId: string): CallRecord => ({
  contactId,
  busNo: '1',
  legId,
  instance: 'i',
  process: 'i',
  worker: null,
  route: 'demo',
  perspective: 'TX',
  state: 'STREAMING',
  replica: 'r0',
  replicas: ['r0'],
  startedAt: '2026-01-01T00:00:00Z',
  framesFromPlatform: 0,
  bytesFromPlatform: 0,
  lastFrameAgeMs: null,
  failovers: 0,
  gapMs: 0,
  at: 0
})

t.test('the list of every call: the first N contacts with live records, `more` when others are left out', async t => {
  const calls = new LocalCalls()
  calls.publish([record('1', 'a'), record('1', 'b'), record('2', 'c'), record('3', 'd')], 1000, 0)
  t.same(
    calls.list(10, 500).calls.map(c => c.legId),
    ['a', 'b', 'c', 'd']
  )
  t.same(calls.list(2, 500), { calls: calls.list(2, 500).calls, more: true })
  t.same(
    calls.list(2, 500).calls.map(c => c.legId),
    ['a', 'b', 'c'],
    'two contacts, all their legs'
  )
  calls.publish([record('3', 'd')], 5000, 900)
  t.same(calls.list(10, 2000), { calls: calls.list(10, 2000).calls, more: false })
  t.same(
    calls.list(10, 2000).calls.map(c => c.legId),
    ['d'],
    'expired records are not listed, and do not count'
  )
})

t.test('the page allows nothing inline and nothing from elsewhere; its script writes no HTML', async t => {
  t.notMatch(STATUS_CSP, /unsafe|\*|https?:/)
  t.match(STATUS_CSP, /frame-ancestors 'none'/)
  t.notMatch(STATUS_SCRIPT, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/)
  t.notMatch(STATUS_SCRIPT, /https?:\/\//, 'it reads this origin only')
})
