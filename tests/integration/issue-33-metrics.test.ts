import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { Agent, request } from 'undici'
import { parse, stringify } from 'yaml'
import { initMessage } from '../../gateway/tools/simulate'
import { platformLeg, startGateway, startVendor, type TestGateway, until } from '../helpers/gateway'
import { TENANT_ENV, twoTenants } from '../helpers/tenants'
import { utterance } from '../helpers/tls'

// Issue 33 item 5 (metrics): per-tenant series from outside, on serve as it ships (2 workers): two tenants
// on one route; acme's legs, utterances and quota refusals are counted under tenant="acme", globex's series
// are there at 0 from the start, a wrong credential counts under tenant="unknown", a reload's new tenant has
// its series at 0, and a worker killed with SIGKILL takes no tenant counter down. The vendor is the bundled
// json-events emulator (vendor-formats.md, "json-events": audio stream and REST messages).

const ENV = { ...TENANT_ENV, INITECH_AUDIO: 'initech-audio-credential-8901' }

/** Every sample of the exposition text, by series text (`name{labels}`). */
async function scrape(gw: TestGateway): Promise<Map<string, number>> {
  const text = await (await fetch(gw.adminUrl('/metrics'))).text()
  const out = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*(?:\{[^}]*\})?) (\S+)$/.exec(line)
    if (m !== null) out.set(m[1], Number(m[2]))
  }
  return out
}

/** The sum of the samples of `metric` whose labels include every `label="value"` of `having`. */
function sum(samples: Map<string, number>, metric: string, having: Record<string, string>): number {
  let n = 0
  for (const [series, v] of samples) {
    if (!series.startsWith(`assist_gateway_${metric}{`)) continue
    if (Object.entries(having).every(([k, x]) => series.includes(`${k}="${x}"`))) n += v
  }
  return n
}

const workers = async (gw: TestGateway): Promise<{ up: boolean; pid: number }[]> =>
  ((await (await fetch(gw.adminUrl('/admin/workers'))).json()) as { workers: { up: boolean; pid: number }[] }).workers

t.test('per-tenant series: counts for acme, 0 for globex from the start, unknown for a wrong credential', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, twoTenants(vendor, { legs: 2, utterancesPerSecond: 3 }), ENV)
  t.ok(await until(async () => (await workers(gw)).every(w => w.up)), 'both workers are up')
  const start = await scrape(gw)
  for (const tenant of ['acme', 'globex', 'unknown']) {
    t.equal(start.get(`assist_gateway_tenant_legs_active{tenant="${tenant}"}`), 0, `${tenant}: live legs at 0`)
    t.equal(start.get(`assist_gateway_tenant_legs_total{tenant="${tenant}",outcome="ok"}`), 0)
    t.equal(start.get(`assist_gateway_tenant_legs_total{tenant="${tenant}",outcome="quota_exceeded"}`), 0)
    t.equal(start.get(`assist_gateway_tenant_utterances_total{tenant="${tenant}",code="200"}`), 0)
    t.equal(start.get(`assist_gateway_tenant_utterances_total{tenant="${tenant}",code="429"}`), 0)
    t.equal(start.get(`assist_gateway_tenant_refusals_total{tenant="${tenant}",limit="tenant_legs"}`), 0)
    t.equal(
      start.get(`assist_gateway_tenant_refusals_total{tenant="${tenant}",limit="tenant_utterances_per_second"}`),
      0
    )
  }
  t.notOk(
    [...start.keys()].some(s => /tenant="assist"/.test(s)),
    'a route that admits only tenants is no tenant'
  )
  t.notOk(
    [...start.keys()].some(s =>
      /^assist_gateway_(audio_sessions|text_requests|limit_refusals)\w*\{[^}]*tenant=/.test(s)
    ),
    'the route series keep their label sets'
  )

  // acme: 2 live legs (its quota), a 3rd refused; a leg with a wrong credential is unknown's.
  const leg = (token: string, contactId: number) =>
    platformLeg(t, gw.url('/audio/assist'), initMessage({ token, contactId, busNo: 4594, perspective: 'TX' }))
  const acme = [leg(ENV.ACME_AUDIO, 33_500), leg(ENV.ACME_AUDIO, 33_501)]
  for (const l of acme) t.equal((await l.answer).command, 'CONNECTED')
  t.ok(
    await until(async () => (await scrape(gw)).get('assist_gateway_tenant_legs_active{tenant="acme"}') === 2),
    'acme: 2 live legs, on whichever workers'
  )
  const third = leg(ENV.ACME_AUDIO, 33_502)
  t.match(await third.answer, { command: 'ERROR', messageType: 'QUOTA_EXCEEDED', parameters: { limit: 'tenant_legs' } })
  await third.closed
  const wrong = leg('not-a-credential', 33_503)
  t.equal((await wrong.answer).command, 'ERROR', 'a wrong credential is refused')
  await wrong.closed
  for (const l of acme) l.ws.close(1000)
  for (const l of acme) await l.closed

  // acme: a burst over utterancesPerSecond; a wrong credential's utterance is unknown's.
  const agent = new Agent({ connections: 20 })
  t.teardown(async () => await agent.close())
  const post = async (authorization: string, contactId: number): Promise<number> => {
    const r = await request(gw.url('/text/assist'), {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', authorization },
      body: JSON.stringify(utterance({ contactId }))
    })
    await r.body.dump()
    return r.statusCode
  }
  const statuses = await Promise.all(Array.from({ length: 10 }, async (_, i) => await post(ENV.ACME_TEXT, 33_600 + i)))
  const refused = statuses.filter(s => s === 429).length
  t.ok(refused > 0, `acme's burst of 10 over 3/s: ${refused} refused`)
  t.equal(statuses.filter(s => s === 200).length + refused, 10, 'the others answered')
  t.equal(await post('not-a-credential', 33_700), 401)

  const want = async (): Promise<Record<string, number>> => {
    const s = await scrape(gw)
    return {
      acmeActive: s.get('assist_gateway_tenant_legs_active{tenant="acme"}') ?? -1,
      acmeLegs: sum(s, 'tenant_legs_total', { tenant: 'acme' }),
      acmeOk: s.get('assist_gateway_tenant_legs_total{tenant="acme",outcome="ok"}') ?? -1,
      acmeQuota: s.get('assist_gateway_tenant_legs_total{tenant="acme",outcome="quota_exceeded"}') ?? -1,
      acme200: s.get('assist_gateway_tenant_utterances_total{tenant="acme",code="200"}') ?? -1,
      acme429: s.get('assist_gateway_tenant_utterances_total{tenant="acme",code="429"}') ?? -1,
      acmeLegRefusals: s.get('assist_gateway_tenant_refusals_total{tenant="acme",limit="tenant_legs"}') ?? -1,
      acmeTextRefusals:
        s.get('assist_gateway_tenant_refusals_total{tenant="acme",limit="tenant_utterances_per_second"}') ?? -1,
      unknownLegs: sum(s, 'tenant_legs_total', { tenant: 'unknown' }),
      unknown401: s.get('assist_gateway_tenant_utterances_total{tenant="unknown",code="401"}') ?? -1,
      globex:
        sum(s, 'tenant_legs_total', { tenant: 'globex' }) +
        sum(s, 'tenant_utterances_total', { tenant: 'globex' }) +
        sum(s, 'tenant_refusals_total', { tenant: 'globex' }) +
        (s.get('assist_gateway_tenant_legs_active{tenant="globex"}') ?? -1)
    }
  }
  const expected = {
    acmeActive: 0,
    acmeLegs: 3,
    acmeOk: 2,
    acmeQuota: 1,
    acme200: 10 - refused,
    acme429: refused,
    acmeLegRefusals: 1,
    acmeTextRefusals: refused,
    unknownLegs: 1,
    unknown401: 1,
    globex: 0
  }
  let seen: Record<string, number> = {}
  await until(async () => {
    seen = await want()
    return JSON.stringify(seen) === JSON.stringify(expected)
  })
  t.same(seen, expected, "acme's counts, unknown's refused credentials, globex's series at 0")

  // A reload's new tenant has its series at 0 at once.
  const config = parse(readFileSync(gw.file, 'utf8')) as Record<string, any>
  config.tenants.initech = { credentials: { audio: ['${INITECH_AUDIO}'] } }
  config.routes.assist.tenants.push('initech')
  writeFileSync(gw.file, stringify(config))
  t.match(await gw.reload(), { ok: true })
  t.ok(
    await until(async () => {
      const s = await scrape(gw)
      return (
        s.get('assist_gateway_tenant_legs_active{tenant="initech"}') === 0 &&
        s.get('assist_gateway_tenant_refusals_total{tenant="initech",limit="tenant_legs"}') === 0 &&
        s.get('assist_gateway_tenant_utterances_total{tenant="initech",code="200"}') === 0
      )
    }),
    'initech: its series at 0 after the reload, on every worker'
  )

  // SIGKILL of a worker: the main process keeps every tenant counter (instance-counters.ts).
  const before = await scrape(gw)
  const victim = (await workers(gw))[0]!
  process.kill(victim.pid, 'SIGKILL')
  t.ok(
    await until(async () => {
      const now = await workers(gw)
      return now.every(w => w.up) && now[0]!.pid !== victim.pid
    }),
    'the killed worker is restarted'
  )
  const after = await scrape(gw)
  const lower = [...before]
    .filter(([k]) => /^assist_gateway_tenant_\w+_total\{/.test(k))
    .filter(([k, x]) => (after.get(k) ?? -1) < x)
    .map(([k, x]) => `${k}: ${x} → ${after.get(k)}`)
  t.same(lower, [], 'no tenant counter is lower or missing after a worker died')
  t.equal(sum(after, 'tenant_legs_total', { tenant: 'acme' }), 3, "acme's legs still counted")
})
