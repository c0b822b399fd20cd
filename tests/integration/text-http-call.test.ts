import t, { type Test } from 'tap'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { TextSettings } from '../../gateway/config/types'
import { systemClock, type Clock } from '../../gateway/clock'
import { Metrics } from '../../gateway/telemetry/metrics'
import {
  retryAfter,
  TextUpstream,
  type Built,
  type OutgoingRequest,
  type RequestBuilder
} from '../../gateway/upstream/http-call'
import type { Replica, UpstreamPool } from '../../gateway/upstream/pool'
import { FakeClock, flush } from '../helpers/fake-clock'

const SETTINGS: TextSettings = {
  maxBodyBytes: 65536,
  timeoutSeconds: 2,
  connectTimeoutSeconds: 1,
  headersTimeoutSeconds: 2,
  bodyTimeoutSeconds: 2,
  connectionsPerReplica: 4,
  maxResponseBytes: 4096,
  asyncQueueSize: 10,
  asyncConcurrency: 2,
  retries: 2,
  retryBudgetPercent: 20,
  balancing: 'round-robin'
}

interface Seen {
  url: string
  headers: Record<string, unknown>
  body: string
}

/** A plain node:http vendor whose answer each test chooses. */
async function vendor(
  t: Test,
  answer: (req: Seen) => { status?: number; type?: string; body: string; headers?: Record<string, string> }
): Promise<{ url: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', c => {
      body += String(c)
    })
    req.on('end', () => {
      const s = { url: req.url ?? '', headers: req.headers, body }
      seen.push(s)
      const a = answer(s)
      res.writeHead(a.status ?? 200, { 'content-type': a.type ?? 'application/json', ...a.headers })
      res.end(a.body)
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server }
}

function replica(
  name: string,
  text: string | undefined,
  headers: Record<string, string> = {},
  healthy = true
): Replica {
  return {
    name,
    healthy,
    inFlight: 0,
    config: { name, text, headers, weight: 1, maxInFlight: 10000 }
  } as unknown as Replica
}

const req = (over: Partial<OutgoingRequest> = {}): OutgoingRequest => ({
  method: 'POST',
  path: '/x',
  headers: { 'content-type': 'application/json' },
  body: '{}',
  ...over
})

/** A builder that answers synchronously (the text mapping's fast path). */
function by<F extends { ok: false } = never>(fn: (r: Replica) => Built<F>): RequestBuilder<null, F> {
  return { now: r => fn(r), later: async r => fn(r) }
}

/** What a builder gives when the request could be built. */
const built = (over: Partial<OutgoingRequest> = {}): { ok: true; value: OutgoingRequest } => ({
  ok: true,
  value: req(over)
})

function upstream(
  t: Test,
  replicas: Replica[],
  settings: Partial<TextSettings> = {},
  clock: Clock = systemClock
): TextUpstream {
  // A pool that only lists the replicas; passive health is covered by the integration tests.
  const pool = { replicas, recordSuccess: () => {}, recordFailure: () => false } as unknown as UpstreamPool
  const u = new TextUpstream('r', pool, { ...SETTINGS, ...settings }, new Metrics(), clock)
  t.teardown(async () => await u.close())
  return u
}

t.test(
  'round-robin over healthy text replicas; the replica URL path and query are kept; replica headers win',
  async t => {
    const a = await vendor(t, () => ({ body: '{"from":"a"}' }))
    const b = await vendor(t, () => ({ body: '{"from":"b"}' }))
    const u = upstream(t, [
      replica('a', `${a.url}/base/?k=1`, { 'x-api-key': 'from-config' }),
      replica('audio-only', undefined),
      replica('down', b.url, {}, false),
      replica('b', b.url)
    ])
    const froms: unknown[] = []
    for (let i = 0; i < 4; i++) {
      const out = await u.call(
        by(() => built({ headers: { 'x-api-key': 'from-mapping', 'x-other': '1' } })),
        null
      )
      froms.push(out.ok && (out.answer.body as { from: string }).from)
    }
    t.same(froms, ['a', 'b', 'a', 'b'])
    t.equal(a.seen[0].url, '/base/x?k=1', 'base path + mapped path + base query')
    t.equal(a.seen[0].headers['x-api-key'], 'from-config')
    t.equal(a.seen[0].headers['x-other'], '1')
    t.equal(b.seen.length, 2, 'the unhealthy replica and the one without a text URL are skipped')
    const q = await u.call(
      by(() => built({ path: '/y?z=2' })),
      null
    )
    t.ok(q.ok)
    t.equal(a.seen[2].url, '/base/y?z=2', 'a mapped query replaces the base one')
    await u.call(
      by(() => built({ path: null })),
      null
    )
    t.equal(b.seen[2].url, '/', 'no path: the replica URL as it is')
  }
)

t.test(
  'answers: JSON parsed (raw text kept), other types as text, empty as null; bad JSON and oversize are 502',
  async t => {
    let next = { body: '{"a":1}', type: 'application/json; charset=utf-8' }
    const v = await vendor(t, () => next)
    const u = upstream(t, [replica('v', v.url)])
    const json = await u.call(
      by(() => built()),
      null
    )
    t.same(json.ok && json.answer, {
      status: 200,
      headers: json.ok ? json.answer.headers : {},
      body: { a: 1 },
      json: '{"a":1}'
    })
    next = { body: 'plain words', type: 'text/plain' }
    const text = await u.call(
      by(() => built()),
      null
    )
    t.equal(text.ok && text.answer.body, 'plain words')
    t.equal(text.ok && text.answer.json, null)
    next = { body: '', type: 'application/json' }
    t.equal(
      (
        (await u.call(
          by(() => built()),
          null
        )) as { answer: { body: unknown } }
      ).answer.body,
      null
    )
    next = { body: '{"a":', type: 'application/json' }
    const broken = await u.call(
      by(() => built()),
      null
    )
    t.match(broken, { ok: false, result: 'bad_answer', error: { code: 'UPSTREAM_BAD_ANSWER' } })
    next = { body: JSON.stringify({ big: 'x'.repeat(5000) }), type: 'application/json' }
    const big = await u.call(
      by(() => built()),
      null
    )
    t.match(big, {
      ok: false,
      result: 'bad_answer',
      error: { code: 'UPSTREAM_BAD_ANSWER', detail: /maxResponseBytes/ }
    })
  }
)

t.test('non-2xx answers are 502 with the vendor status; a build failure sends nothing', async t => {
  const v = await vendor(t, s => ({ status: s.body === 'a' ? 404 : 503, body: '{"error":"echo of the request"}' }))
  const u = upstream(t, [replica('v', v.url)])
  t.match(
    await u.call(
      by(() => built({ body: 'a' })),
      null
    ),
    {
      ok: false,
      result: 'status_4xx',
      vendorStatus: 404,
      error: { code: 'UPSTREAM_BAD_ANSWER' }
    }
  )
  const e503 = await u.call(
    by(() => built({ body: 'b' })),
    null
  )
  t.match(e503, { ok: false, result: 'status_5xx', vendorStatus: 503 })
  t.notMatch(JSON.stringify(e503), 'echo of the request', 'the vendor error body is not kept')
  const unbuilt = await u.call(
    by(() => ({ ok: false as const, pointer: '/text/request/body', error: 'x' })),
    null
  )
  t.match(unbuilt, { ok: false, result: null, error: { code: 'MAPPING_FAILED' } })
  t.equal(v.seen.length, 2)
  const later = await u.call({ now: () => null, later: async () => built({ body: 'a' }) }, null)
  t.match(later, { ok: false, vendorStatus: 404 }, 'a builder that cannot answer now answers later')
})

t.test(
  'connect failure: retried on replicas not yet tried, at most text.retries; no replica at all is NO_HEALTHY_UPSTREAM',
  async t => {
    const good = await vendor(t, () => ({ body: '{}' }))
    const dead = 'http://127.0.0.1:1'
    const tried: string[] = []
    const u = upstream(t, [replica('d1', dead), replica('d2', dead), replica('g', good.url)])
    const first = await u.call(
      by(r => {
        tried.push(r.name)
        return built()
      }),
      null
    )
    t.ok(first.ok, 'two retries reach the good replica')
    t.same(tried, ['d1', 'd2', 'g'], 'each try on another replica')
    tried.length = 0
    const one = upstream(t, [replica('d1', dead), replica('d2', dead), replica('g', good.url)], { retries: 1 })
    const limited = await one.call(
      by(r => {
        tried.push(r.name)
        return built()
      }),
      null
    )
    t.match(limited, { ok: false, result: 'connect_failed', error: { code: 'UPSTREAM_UNREACHABLE' } })
    t.same(tried, ['d1', 'd2'], 'retries: 1 means two tries, not three')
    t.match(
      await upstream(t, [replica('x', undefined)]).call(
        by(() => built()),
        null
      ),
      {
        ok: false,
        result: 'no_replica',
        error: { code: 'NO_HEALTHY_UPSTREAM' }
      }
    )
  }
)

t.test('502, 503 and 504 go to another replica; 500 and 4xx do not', async t => {
  for (const [status, retried] of [
    [502, true],
    [503, true],
    [504, true],
    [500, false],
    [429, false],
    [400, false]
  ] as const) {
    const bad = await vendor(t, () => ({ status, body: '{}' }))
    const good = await vendor(t, () => ({ body: '{"ok":1}' }))
    const u = upstream(t, [replica('bad', bad.url), replica('good', good.url)])
    const out = await u.call(
      by(() => built()),
      null
    )
    t.equal(out.ok, retried, `${status}: ${retried ? 'retried on the other replica' : 'answered as is'}`)
    t.equal(good.seen.length, retried ? 1 : 0)
  }
})

t.test('a timeout is retried only when the mapping marks the call idempotent', async t => {
  const slow = await vendor(t, () => ({ body: '{}' }))
  slow.server.removeAllListeners('request')
  slow.server.on('request', () => {
    /* never answers */
  })
  const good = await vendor(t, () => ({ body: '{"ok":1}' }))
  const settings = { timeoutSeconds: 3, headersTimeoutSeconds: 0.2 }
  const plain = await upstream(t, [replica('slow', slow.url), replica('good', good.url)], settings).call(
    by(() => built()),
    null
  )
  t.match(
    plain,
    { ok: false, result: 'timeout', error: { code: 'UPSTREAM_TIMEOUT' } },
    'not idempotent: the vendor may have acted on it'
  )
  const idem = await upstream(t, [replica('slow', slow.url), replica('good', good.url)], settings).call(
    by(() => built()),
    null,
    { idempotent: true }
  )
  t.ok(idem.ok, 'idempotent: sent again to the other replica')
})

t.test('the retry budget caps retries in flight at max(3, budget% of requests in flight)', async t => {
  const hold: (() => void)[] = []
  const bad = await vendor(t, () => ({ status: 503, body: '{}' }))
  const slowGood = await vendor(t, () => ({ body: '{}' }))
  slowGood.server.removeAllListeners('request')
  slowGood.server.on('request', (_req, res) => {
    hold.push(() => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{}')
    })
  })
  const metrics = new Metrics()
  const pool = {
    replicas: [replica('bad', bad.url), replica('good', slowGood.url)],
    recordSuccess: () => {},
    recordFailure: () => false
  } as unknown as UpstreamPool
  // Every call starts on `bad` (round-robin would alternate: pin it with one eligible first choice each time).
  const u = new TextUpstream('r', pool, { ...SETTINGS, retryBudgetPercent: 20 }, metrics)
  t.teardown(async () => await u.close())
  const calls = Array.from(
    { length: 10 },
    async () =>
      await u.call(
        by(() => built()),
        null
      )
  )
  await new Promise(resolve => setTimeout(resolve, 300))
  for (const f of hold) f()
  const outs = await Promise.all(calls)
  const text = await metrics.registry.metrics()
  const retried = Number(
    /assist_gateway_upstream_retries_total\{route="r",reason="status_5xx"\} (\d+)/.exec(text)?.[1] ?? 0
  )
  const refused = Number(
    /assist_gateway_upstream_retries_total\{route="r",reason="budget_exhausted"\} (\d+)/.exec(text)?.[1] ?? 0
  )
  t.ok(
    retried >= 1 && retried <= 3,
    `at most 3 retries in flight with 10 requests (20% of 10 is 2, the floor is 3): ${retried}`
  )
  t.equal(
    retried + refused,
    outs.filter((_, i) => i % 2 === 0).length,
    'every call that started on the failing replica was retried or refused by the budget'
  )
})

t.test('the deadline covers queueing for a connection; after close calls are refused', async t => {
  const v = await vendor(t, () => ({ body: '{}' }))
  v.server.removeAllListeners('request')
  const arrived = new Promise<void>(resolve => {
    v.server.on('request', () => {
      resolve() /* and never answers */
    })
  })
  const clock = new FakeClock()
  const u = upstream(t, [replica('v', v.url)], { timeoutSeconds: 0.3, connectionsPerReplica: 1 }, clock)
  let settled = 0
  const calls = [1, 2, 3].map(async () => {
    const out = await u.call(
      by(() => built()),
      null
    )
    settled++
    return out
  })
  // One request holds the only connection; the other two wait for it inside undici.
  await arrived
  await flush()
  t.equal(settled, 0, 'nothing settles before the deadline')
  clock.advance(299)
  await flush()
  t.equal(settled, 0, 'nor just before it')
  clock.advance(1)
  const outs = await Promise.all(calls)
  t.ok(
    outs.every(o => !o.ok && o.error.code === 'UPSTREAM_TIMEOUT'),
    'all three time out on the one deadline, the queued ones too, not one after another'
  )
  await u.close()
  t.match(
    await u.call(
      by(() => built()),
      null
    ),
    { ok: false, error: { code: 'SHUTTING_DOWN' } }
  )
})

t.test(
  'a 429 with retry-after is asked again once the delay has passed (the same replica when it is the only one)',
  async t => {
    let n = 0
    const v = await vendor(t, () =>
      ++n === 1
        ? { status: 429, body: '{"error":"slow down"}', headers: { 'retry-after': '2' } }
        : { body: '{"ok":true}' }
    )
    const clock = new FakeClock()
    const u = upstream(t, [replica('v', v.url)], { timeoutSeconds: 5 }, clock)
    let done = false
    const call = u
      .call(
        by(() => built()),
        null
      )
      .finally(() => {
        done = true
      })
    while (v.seen.length < 1) await flush()
    await flush()
    clock.advance(1999)
    await flush()
    t.equal(v.seen.length, 1, 'not before retry-after')
    t.notOk(done)
    clock.advance(1)
    const out = await call
    t.equal(v.seen.length, 2, 'asked again after 2 s')
    t.match(out, { ok: true, answer: { body: { ok: true } } })
  }
)

t.test(
  'a 429 whose retry-after ends past the deadline, or without one, is answered at once (502, vendor status 429)',
  async t => {
    const v = await vendor(t, req =>
      req.url.endsWith('late')
        ? { status: 429, body: '{}', headers: { 'retry-after': '10' } }
        : { status: 429, body: '{}' }
    )
    const u = upstream(t, [replica('v', v.url)], { timeoutSeconds: 5 })
    for (const path of ['/late', '/none']) {
      const out = await u.call(
        by(() => built({ path })),
        null
      )
      t.match(out, { ok: false, vendorStatus: 429, error: { code: 'UPSTREAM_BAD_ANSWER' } }, path)
    }
    t.equal(v.seen.length, 2, 'each asked once')
  }
)

t.test('retry-after: delay-seconds or an HTTP-date; anything else is none', async t => {
  const now = Date.parse('2026-03-01T12:00:00Z')
  t.same(retryAfter('3'), { retryAfterMs: 3000 })
  t.same(retryAfter(' 0 '), { retryAfterMs: 0 })
  t.same(retryAfter('Sun, 01 Mar 2026 12:00:05 GMT', now), { retryAfterMs: 5000 })
  t.same(retryAfter('Sun, 01 Mar 2026 11:00:00 GMT', now), { retryAfterMs: 0 }, 'a date past is no delay')
  for (const bad of [undefined, '', '-1', '1.5', 'soon', '12345678901']) t.same(retryAfter(bad, now), {}, String(bad))
})
