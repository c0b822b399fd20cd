import t from 'tap'
import { initMessage } from '../../gateway/tools/simulate'
import { uniqueFrame } from '../helpers/audio'
import {
  AUDIO_TOKEN,
  logged,
  platformLeg,
  roundTrip,
  routeTo,
  startGateway,
  startVendor,
  until
} from '../helpers/gateway'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'
const init = (contactId: number, token = AUDIO_TOKEN): Record<string, unknown> =>
  initMessage({ token, contactId, busNo: 4594, perspective: 'TX' })

const summaries = (gw: { logs: { lines: Record<string, unknown>[] } }): Record<string, unknown>[] =>
  gw.logs.lines.filter(l => l.event === 'leg_summary')

t.test('one leg_summary line at the end of a leg: every field, through a failover', async t => {
  const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 10 })
  const b = await startVendor(t, { kind: 'json-events', resultEveryFrames: 10 })
  const gw = await startGateway(t, {
    audio: { replaySeconds: 1 },
    routes: { demo: routeTo([a, b], 'mappings/json-events.yaml') }
  })
  const leg = platformLeg(t, gw.url('/audio/demo'), init(7001), {
    headers: { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` }
  })
  t.equal((await leg.answer).command, 'CONNECTED')
  const [first, second] = a.sessions().length === 1 ? [a, b] : [b, a]
  for (let i = 0; i < 40; i++) leg.send(uniqueFrame(0, i))
  await until(() => first.sessions()[0]?.bytes === 40 * 160)
  await first.close()
  t.ok(await until(() => logged(gw, 'failover_done')), 'the session failed over to the other replica')
  for (let i = 40; i < 100; i++) leg.send(uniqueFrame(0, i))
  await until(() => second.sessions().some(s => s.bytes >= 60 * 160))
  await until(() => leg.messages.length >= 1)
  await roundTrip(leg.ws)
  const results = leg.messages.length
  t.equal(summaries(gw).length, 0, 'no summary while the leg lives')
  leg.ws.close(1000)
  await leg.closed
  t.ok(await until(() => summaries(gw).length === 1))
  const s = summaries(gw)[0]
  const firstName = first === a ? 'r0' : 'r1'
  const secondName = second === a ? 'r0' : 'r1'
  t.match(s, {
    level: 'info',
    route: 'demo',
    legId: String,
    clientAddress: /127\.0\.0\.1$/,
    busNo: 4594,
    contactId: 7001,
    perspective: 'TX',
    durationMs: Number,
    framesFromPlatform: 100,
    bytesFromPlatform: 100 * 160,
    replica: secondName,
    failovers: 1,
    gapMs: Number,
    resultsSent: results,
    outcome: 'normal',
    closeCode: 1000,
    session: 'closed',
    traceId: TRACE
  })
  t.same(s.replicas, [firstName, secondName], 'every replica that carried its audio, in order, by config name')
  t.ok((s.gapMs as number) >= 0 && (s.durationMs as number) >= (s.gapMs as number))
  t.ok(results > 0, 'results were sent')
  t.notMatch(JSON.stringify(s), /ws:\/\/|AUDIO_TOKEN|audio-token/, 'no URL, no credential')
})

t.test('a refused leg has its summary too, with the address and the error code; its refusal line too', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const leg = platformLeg(t, gw.url('/audio/demo'), init(7002, 'wrong-token'))
  t.equal((await leg.answer).messageType, 'AUTH_INVALID')
  await leg.closed
  t.ok(await until(() => summaries(gw).length === 1))
  t.match(summaries(gw)[0], {
    clientAddress: /127\.0\.0\.1$/,
    outcome: 'AUTH_INVALID',
    closeCode: 1008,
    framesFromPlatform: 0,
    replicas: [],
    failovers: 0,
    session: 'none'
  })
  t.notOk('contactId' in summaries(gw)[0], 'an unauthenticated leg’s claims are not written as its identity')
  t.match(
    gw.logs.lines.find(l => l.event === 'leg_failed'),
    { code: 'AUTH_INVALID', clientAddress: /127\.0\.0\.1$/ },
    'the refusal is logged with the address'
  )
})

t.test('a leg parked for a re-attach: its line at its end says so; the re-attached leg has its own', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, {
    audio: { reattachGraceSeconds: 30 },
    routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
  })
  const one = platformLeg(t, gw.url('/audio/demo'), init(7003))
  t.equal((await one.answer).command, 'CONNECTED')
  one.ws.close(1000)
  await one.closed
  t.ok(await until(() => summaries(gw).length === 1))
  t.match(summaries(gw)[0], { contactId: 7003, outcome: 'normal', session: 'parked', replica: 'r0' })
  const two = platformLeg(t, gw.url('/audio/demo'), init(7003))
  t.equal((await two.answer).command, 'CONNECTED')
  // Logged by the process that holds the parked session (with workers, the leg may land on the other one,
  // which relays it there and writes a line of its own for the relaying leg).
  t.ok(await until(() => logged(gw, 'reattached')))
  two.ws.close(1000)
  await two.closed
  const first = summaries(gw)[0].legId
  t.ok(await until(() => summaries(gw).some(s => s.legId !== first && s.session === 'parked')))
  t.match(
    summaries(gw).find(s => s.legId !== first && s.session === 'parked'),
    { contactId: 7003, session: 'parked' },
    'one line per leg: the re-attached leg parks its session again at its end'
  )
})

t.test('404s, refused upgrades and admin 401s are logged with the address, rate-limited per code', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(
    t,
    {
      admin: { host: '0.0.0.0', token: '${ADMIN_TOKEN}' },
      routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
    },
    { ADMIN_TOKEN: 'admin-token-0123456789' }
  )
  for (let i = 0; i < 25; i++) await (await fetch(gw.url(`/nowhere/${i}?secret=x`))).arrayBuffer()
  const notFound = gw.logs.lines.filter(l => l.event === 'not_found')
  // Each process caps its own lines: 20 per code per window, per worker.
  t.ok(
    notFound.length >= 1 && notFound.length <= 20 * gw.workers,
    `at most 20 lines per code per window and process (${notFound.length})`
  )
  t.match(notFound[0], { listener: 'public', address: /127\.0\.0\.1$/, method: 'GET', path: '/nowhere/0', query: true })
  t.notMatch(JSON.stringify(notFound), /secret=x/, 'the query string is not written')
  const r = await fetch(gw.adminUrl('/admin/calls?contactId=1'))
  t.equal(r.status, 401)
  t.ok(await until(() => gw.logs.lines.some(l => l.event === 'admin_refused')), 'the refusal is logged')
  t.match(
    gw.logs.lines.find(l => l.event === 'admin_refused'),
    {
      code: 'ADMIN_UNAUTHORIZED',
      address: /127\.0\.0\.1$/,
      reason: 'missing'
    }
  )
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(metrics, /assist_gateway_auth_failures_total\{hook="admin",reason="missing"\} 1/)
  await (await fetch(gw.url('/audio/nope').replace('ws:', 'http:'))).arrayBuffer()
  t.ok(await until(() => logged(gw, 'upgrade_refused', { code: 'UPGRADE_INVALID' })), 'a refused upgrade is logged')
})
