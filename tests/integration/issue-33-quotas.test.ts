import t from 'tap'
import { randomUUID } from 'node:crypto'
import { Agent, request } from 'undici'
import { initMessage } from '../../gateway/tools/simulate'
import { platformLeg, startGateway, startVendor, type PlatformLegClient } from '../helpers/gateway'
import { needRedis } from '../helpers/redis'
import { TENANT_ENV, twoTenants } from '../helpers/tenants'
import { utterance } from '../helpers/tls'

// Issue 33 items 3-4 "must show", from outside, on serve as it ships (2 workers: the main process counts the
// quotas for both): two tenants on one route, `legs: 5` for acme: acme's 6th live leg is refused with
// ERROR QUOTA_EXCEEDED and 1013 while globex's 20 legs all connect; `utterancesPerSecond: 10` for acme: a
// burst of 50 gets 429s with Retry-After for acme only, globex's burst all answered 200. The vendor is the
// bundled json-events emulator (vendor-formats.md, "json-events": audio stream and REST messages).

const ENV = TENANT_ENV

t.test('two tenants on one route: acme over its quotas is refused, globex never', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, twoTenants(vendor, { legs: 5, utterancesPerSecond: 10 }), ENV)
  const leg = (token: string, contactId: number): PlatformLegClient =>
    platformLeg(t, gw.url('/audio/assist'), initMessage({ token, contactId, busNo: 4594, perspective: 'TX' }))

  const acme = Array.from({ length: 5 }, (_, i) => leg(ENV.ACME_AUDIO, 33_100 + i))
  for (const l of acme) t.equal((await l.answer).command, 'CONNECTED', 'acme leg within its quota')
  const sixth = leg(ENV.ACME_AUDIO, 33_105)
  t.match(
    await sixth.answer,
    { command: 'ERROR', messageType: 'QUOTA_EXCEEDED', parameters: { limit: 'tenant_legs', retryAfterSeconds: 1 } },
    "acme's 6th live leg is refused with its code"
  )
  t.equal((await sixth.closed).code, 1013, 'and its close code')
  const globex = Array.from({ length: 20 }, (_, i) => leg(ENV.GLOBEX_AUDIO, 33_200 + i))
  const answers = await Promise.all(globex.map(async l => (await l.answer).command))
  t.same(answers, Array(20).fill('CONNECTED'), "globex's 20 legs all connect while acme is at its quota")
  acme[0]!.ws.close(1000)
  await acme[0]!.closed
  // The place comes back when the main process hears of the release: poll until a new acme leg connects.
  let again: Record<string, unknown> = {}
  for (let i = 0; i < 50 && again.command !== 'CONNECTED'; i++) {
    again = await leg(ENV.ACME_AUDIO, 33_106).answer
    if (again.command !== 'CONNECTED') await new Promise(r => setTimeout(r, 100))
  }
  t.equal(again.command, 'CONNECTED', 'a leg that ended gives its place back')

  const agent = new Agent({ connections: 50 })
  t.teardown(async () => await agent.close())
  const burst = async (token: string) => {
    const start = performance.now()
    const res = await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const r = await request(gw.url('/text/assist'), {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json', authorization: token },
          body: JSON.stringify(utterance({ contactId: 33_300 + i }))
        })
        const body = (await r.body.json()) as Record<string, unknown>
        return { status: r.statusCode, retryAfter: r.headers['retry-after'], body }
      })
    )
    return { res, ms: performance.now() - start }
  }
  const a = await burst(ENV.ACME_TEXT)
  const ok = a.res.filter(r => r.status === 200).length
  const refused = a.res.filter(r => r.status === 429)
  t.equal(ok + refused.length, 50, 'every acme utterance is answered 200 or 429')
  // Fixed one-second windows: a burst spanning n windows admits at most 10 per window.
  t.ok(ok >= 10 && ok <= 10 * (Math.ceil(a.ms / 1000) + 1), `10 per second admitted (${ok} in ${a.ms} ms)`)
  t.ok(refused.length >= 30, 'the rest of the burst is refused')
  t.ok(
    refused.every(r => r.retryAfter === '1' && r.body.code === 'QUOTA_EXCEEDED'),
    'each refusal is 429 QUOTA_EXCEEDED with Retry-After'
  )
  const g = await burst(ENV.GLOBEX_TEXT)
  t.same(
    g.res.map(r => r.status),
    Array(50).fill(200),
    "globex's burst is all answered: another tenant is never affected"
  )
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(metrics, /assist_gateway_limit_refusals_total\{[^}]*limit="tenant_legs"[^}]*\} [1-9]/)
  t.match(metrics, /assist_gateway_limit_refusals_total\{[^}]*limit="tenant_utterances_per_second"[^}]*\} [1-9]/)
  for (const l of [...acme, ...globex]) l.ws.close(1000)
})

t.test('two instances on Redis: the quotas hold for the fleet, not per instance', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const redis = await needRedis()
  const prefix = `test:${randomUUID()}:`
  const member = async () =>
    await startGateway(
      t,
      twoTenants(
        vendor,
        { legs: 5, utterancesPerSecond: 10 },
        { redis, store: { keyPrefix: prefix, syncIntervalSeconds: 0.2, leaseSeconds: 10 } }
      ),
      ENV
    )
  const [one, two] = [await member(), await member()]
  const leg = (gw: typeof one, token: string, contactId: number): PlatformLegClient =>
    platformLeg(t, gw.url('/audio/assist'), initMessage({ token, contactId, busNo: 4594, perspective: 'TX' }))
  // 3 acme legs on one instance, 2 on the other: 5 in the fleet.
  const acme = [0, 1, 2, 3, 4].map(i => leg(i < 3 ? one : two, ENV.ACME_AUDIO, 33_400 + i))
  for (const l of acme) t.equal((await l.answer).command, 'CONNECTED', 'acme leg within its fleet quota')
  for (const [name, gw] of [
    ['one', one],
    ['two', two]
  ] as const)
    t.match(
      await leg(gw, ENV.ACME_AUDIO, 33_410).answer,
      { command: 'ERROR', messageType: 'QUOTA_EXCEEDED', parameters: { limit: 'tenant_legs' } },
      `a 6th acme leg on instance ${name} is refused: the quota is the fleet's`
    )
  const globex = Array.from({ length: 20 }, (_, i) => leg(i % 2 === 0 ? one : two, ENV.GLOBEX_AUDIO, 33_500 + i))
  t.same(
    await Promise.all(globex.map(async l => (await l.answer).command)),
    Array(20).fill('CONNECTED'),
    "globex's 20 legs connect on both instances"
  )
  const agent = new Agent({ connections: 50 })
  t.teardown(async () => await agent.close())
  const start = performance.now()
  const res = await Promise.all(
    Array.from({ length: 50 }, async (_, i) => {
      const r = await request((i % 2 === 0 ? one : two).url('/text/assist'), {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', authorization: ENV.ACME_TEXT },
        body: JSON.stringify(utterance({ contactId: 33_600 + i }))
      })
      await r.body.dump()
      return { status: r.statusCode, retryAfter: r.headers['retry-after'] }
    })
  )
  const ms = performance.now() - start
  const ok = res.filter(r => r.status === 200).length
  // The fleet's window (rate-limiter-flexible in Redis) opens at the burst's first utterance: a burst shorter
  // than a second is one window, 10 admitted across both instances (20 if each counted its own).
  if (ms < 1000) t.equal(ok, 10, `10 admitted across the fleet (in ${ms} ms)`)
  else t.ok(ok >= 10 && ok <= 10 * (Math.ceil(ms / 1000) + 1), `10 per second across the fleet (${ok} in ${ms} ms)`)
  t.ok(
    res.filter(r => r.status !== 200).every(r => r.status === 429 && r.retryAfter !== undefined),
    'the rest: 429 with Retry-After, on both instances'
  )
  t.ok(res.filter(r => r.status === 429).length >= 30, 'not 10 per instance: the fleet counts once')
  for (const l of [...acme, ...globex]) l.ws.close(1000)
})
