import t from 'tap'
import { seriesAt } from '../helpers/metrics'
import { randomUUID } from 'node:crypto'
import { FleetKey } from '../../gateway/auth/fleet-key'
import { RelayTokens } from '../../gateway/auth/relay-token'
import { initMessage } from '../../gateway/tools/simulate'
import {
  AUDIO_TOKEN,
  platformLeg,
  routeTo,
  startGateway,
  startVendor,
  until,
  upgradeStatus,
  type PlatformLegClient
} from '../helpers/gateway'
import { spawnGateway } from '../helpers/process'
import { needRedis } from '../helpers/redis'

// Issue 18 items 2-5, black-box through real sockets; the attacker holds a valid credential of its own.

const DRY_RUN = '/agent_assist_audio_websocket_hooks/custom-assist-endpoint/initialize-audio-message-example'
const OTHER = 'another-customer-token-0123'
const FLEET_SECRET = 'fleet-secret-of-the-test-0123456789'

const series = seriesAt

t.test('the handshake dry-run is guarded as the hook: failure delay, budget (429) and counted', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, {
    auth: { failureDelayMs: 150, failureBudget: { failures: 20, windowSeconds: 60 } },
    routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
  })
  const post = async (token: string): Promise<{ status: number; ms: number; body: Record<string, any> }> => {
    const started = performance.now()
    const r = await fetch(gw.url(`${DRY_RUN}?route=demo`), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(initMessage({ token, contactId: 1, busNo: 2, perspective: 'TX' }))
    })
    return { status: r.status, ms: performance.now() - started, body: (await r.json()) as Record<string, any> }
  }
  const answers = []
  for (let i = 0; i < 25; i++) answers.push(await post(`wrong-guess-${i}-0123456789`))
  for (const a of answers) {
    if (a.status === 429) continue
    t.match(a.body.response, { command: 'ERROR', messageType: 'AUTH_INVALID' })
    t.ok(a.ms >= 140, `a wrong credential is answered no sooner than the failure delay (${a.ms.toFixed(0)} ms)`)
  }
  t.equal(answers.filter(a => a.status === 429).length, 5, 'past the budget of 20: 429')
  const right = await post(AUDIO_TOKEN)
  t.equal(right.status, 429, 'the right credential then: 429 too (the endpoint is no oracle)')
  const metrics = gw.adminUrl('/metrics')
  t.equal(await series(metrics, 'assist_gateway_auth_failures_total{hook="dry_run",reason="invalid"}'), 20, 'counted')
  t.equal(await series(metrics, 'assist_gateway_limit_refusals_total{limit="failure_budget",hook="dry_run"}'), 6)
})

t.test(
  'relay tokens: a replay is refused at the fleet listener and charges nobody; the public listener reads none',
  async t => {
    const vendor = await startVendor(t, { kind: 'json-events' })
    const gw = await startGateway(
      t,
      {
        redis: await needRedis(),
        store: { keyPrefix: `test:${randomUUID()}:`, syncIntervalSeconds: 0.2, leaseSeconds: 10 },
        fleet: { advertiseUrl: 'ws://127.0.0.1', secret: '${FLEET_SECRET}' },
        auth: { failureDelayMs: 0, failureBudget: { failures: 1, windowSeconds: 60 } },
        audio: { reattachGraceSeconds: 2 },
        routes: {
          demo: { ...routeTo([vendor], 'mappings/json-events.yaml'), auth: { audio: ['${AUDIO_TOKEN}', '${OTHER}'] } }
        }
      },
      { OTHER, FLEET_SECRET }
    )
    // Tokens as another instance of the fleet signs them: with the fleet's key (from fleet.secret).
    const signer = new RelayTokens(FleetKey.fromConfig({ fleet: { secret: FLEET_SECRET }, secrets: [] })!)
    const fleetUrl = `ws://127.0.0.1:${gw.fleetPort}`
    const victim = '127.0.0.9'
    const token = (contactId: number): string =>
      signer.sign({
        hop: 'instance',
        to: gw.instance,
        key: `demo:4594:${contactId}:TX`,
        address: victim,
        from: 'another-instance'
      })
    const init = (tok: string, contactId: number) =>
      initMessage({ token: tok, contactId, busNo: 4594, perspective: 'TX' })
    // A relay as the fleet makes it: its token is taken once.
    const captured = token(9100)
    const relayed = platformLeg(t, `${fleetUrl}/relay/audio/demo`, init(AUDIO_TOKEN, 9100), {
      headers: { 'x-assist-gateway-relay': captured }
    })
    t.equal((await relayed.answer).command, 'CONNECTED', 'a relayed leg with a fresh token is served')
    // The same token replayed 30 times from another address, with a wrong credential each time.
    const refused: number[] = []
    for (let i = 0; i < 30; i++)
      refused.push(await upgradeStatus(`${fleetUrl}/relay/audio/demo`, { 'x-assist-gateway-relay': captured }))
    t.same([...new Set(refused)], [403], 'every replay is refused before the upgrade (RELAY_INVALID)')
    t.equal(await upgradeStatus(`${fleetUrl}/relay/audio/demo`, {}), 403, 'no token at all: refused')
    const metrics = gw.adminUrl('/metrics')
    t.equal(await series(metrics, 'assist_gateway_auth_failures_total{hook="relay",reason="replayed"}'), 30)
    // Wrong contact for a fresh token: the leg is refused after its handshake, as another session.
    const mismatch = platformLeg(t, `${fleetUrl}/relay/audio/demo`, init(AUDIO_TOKEN, 9101), {
      headers: { 'x-assist-gateway-relay': token(9199) }
    })
    t.match(await mismatch.answer, { command: 'ERROR', messageType: 'RELAY_INVALID' }, 'a token for another session')

    // The public listener: a valid token in the header changes nothing; the socket's own address is charged.
    const viaPublic = platformLeg(t, gw.url('/audio/demo'), init('a-wrong-credential-0123', 9102), {
      localAddress: '127.0.0.7',
      headers: { 'x-assist-gateway-relay': token(9102) }
    })
    t.match(await viaPublic.answer, { command: 'ERROR', messageType: 'AUTH_INVALID' })
    const again = platformLeg(t, gw.url('/audio/demo'), init(OTHER, 9103), { localAddress: '127.0.0.7' })
    t.match(
      await again.answer,
      { command: 'ERROR', messageType: 'TOO_MANY_FAILURES' },
      'the sender spent its own budget'
    )
    const ok = platformLeg(t, gw.url('/audio/demo'), init(AUDIO_TOKEN, 9104), { localAddress: victim })
    t.equal((await ok.answer).command, 'CONNECTED', 'the address the tokens asserted was charged nothing')
    for (const l of [relayed, ok]) l.ws.close(1000)
  }
)

t.test('serve --workers 2: leg limits and the failure budget hold for the gateway, not per worker', async t => {
  const vendor = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const gw = await spawnGateway(
    t,
    {
      limits: { legsPerClient: 4, legsPerRoute: 6 },
      auth: { failureDelayMs: 0, failureBudget: { failures: 20, windowSeconds: 60 } },
      routes: {
        demo: { ...routeTo([vendor], 'mappings/json-events.yaml'), auth: { audio: ['${AUDIO_TOKEN}', '${OTHER}'] } }
      }
    },
    { OTHER, GATEWAY_WORKERS: '2' }
  )
  const open = (token: string, contactId: number, localAddress = '127.0.0.1'): PlatformLegClient =>
    platformLeg(t, gw.url('/audio/demo'), initMessage({ token, contactId, busNo: 4594, perspective: 'TX' }), {
      localAddress
    })
  const count = (answers: Record<string, unknown>[], what: string): number =>
    answers.filter(a => (a.command === 'CONNECTED' ? 'CONNECTED' : a.messageType) === what).length
  const a = Array.from({ length: 8 }, (_v, i) => open(AUDIO_TOKEN, 9500 + i))
  const aAnswers = await Promise.all(a.map(l => l.answer))
  t.equal(count(aAnswers, 'CONNECTED'), 4, 'legsPerClient 4: four of one client’s eight legs')
  t.equal(count(aAnswers, 'LEG_LIMIT'), 4)
  const b = Array.from({ length: 4 }, (_v, i) => open(OTHER, 9600 + i))
  const bAnswers = await Promise.all(b.map(l => l.answer))
  t.equal(count(bAnswers, 'CONNECTED'), 2, 'legsPerRoute 6: two more, whatever worker each lands on')
  t.equal(count(bAnswers, 'LEG_LIMIT'), 2)
  // 60 wrong credentials at once from one address: exactly the budget hears AUTH_INVALID, the rest are refused.
  const wrong = Array.from({ length: 60 }, (_v, i) => open(`wrong-credential-${i}-0123`, 9700 + i, '127.0.0.5'))
  const wAnswers = await Promise.all(wrong.map(l => l.answer))
  t.equal(count(wAnswers, 'AUTH_INVALID'), 20, 'failures: 20 answered as such, however the kernel spread the legs')
  t.equal(count(wAnswers, 'TOO_MANY_FAILURES'), 40)
  for (const l of [...a, ...b]) l.ws.close(1000)
})

t.test('nothing of one tenant is visible to another: readiness, URL keys, other tenants’ secrets', async t => {
  const vendor = await startVendor(t, { kind: 'json-events', echo: true, earlyResults: 1, readyDelayMs: 50 })
  const KEY = 'url-query-key-0123456789'
  const TENANT_B = 'tenant-b-audio-credential-42'
  const gw = await startGateway(
    t,
    {
      routes: {
        tenanta: {
          mapping: 'mappings/json-events.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [{ name: 'r0', audio: `${vendor.url}?api_key=\${KEY}` }]
        },
        tenantb: { ...routeTo([vendor], 'mappings/json-events.yaml'), auth: { audio: ['${TENANT_B}'] } }
      }
    },
    { KEY, TENANT_B }
  )
  for (const url of [
    gw.url('/readyz'),
    gw.url('/readyz?verbose'),
    gw.adminUrl('/readyz'),
    gw.adminUrl('/readyz?verbose')
  ]) {
    const text = await (await fetch(url)).text()
    t.same(Object.keys(JSON.parse(text)).sort(), ['ready', 'reasons'], `${url}: ready or not, nothing more`)
    t.notMatch(text, /tenant[ab]|r0|127\.0\.0\.1/, 'no route, replica or address')
  }
  const detail = (await (await fetch(gw.adminUrl('/admin/readiness'))).json()) as { routes: { route: string }[] }
  t.same(detail.routes.map(r => r.route).sort(), ['tenanta', 'tenantb'], 'the details are on the admin API')
  // Tenant A's echoing vendor reflects its upgrade URL (the key in its query) and A's own init message, in
  // which A put tenant B's credential as a guess: the key is scrubbed, the guess comes back as sent.
  const init = {
    ...initMessage({ token: AUDIO_TOKEN, contactId: 1, busNo: 2, perspective: 'TX' }),
    appParams: { guess: TENANT_B }
  }
  const leg = platformLeg(t, gw.url('/audio/tenanta'), init)
  const raw: string[] = []
  leg.ws.on('message', (d, binary) => {
    if (!binary) raw.push(d.toString())
  })
  t.equal((await leg.answer).command, 'CONNECTED')
  t.ok(await until(() => raw.some(f => f.includes('upgrade'))), 'the echo arrived')
  const all = raw.join('\n')
  t.notOk(all.includes(KEY) || all.includes(encodeURIComponent(KEY)), 'the URL key never reaches the platform')
  t.match(all, /api_key=\[REDACTED\]/, 'it is scrubbed where the vendor reflected it')
  t.ok(all.includes(TENANT_B), "another tenant's secret sent as a guess comes back as sent")
  t.notMatch(all, /guess[^,}]*REDACTED/, 'never as a [REDACTED] confirmation')
  leg.ws.close(1000)
})
