import t from 'tap'
import { Readable } from 'node:stream'
import { connect as tlsConnect } from 'node:tls'
import { Agent, request } from 'undici'
import { TEXT_TOKEN, routeTo, startVendor, until } from '../helpers/gateway'
import { post, startTlsGateway, utterance, type TlsGateway } from '../helpers/tls'
import { processTree, rssBytes } from '../bench/lib'

const auth = { authorization: TEXT_TOKEN }

t.test('1000 utterances in flight at once over HTTPS are all answered, each with its own answer', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startTlsGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  // All 1000 are issued at once; they share 100 keep-alive connections, so what is tested is the
  // gateway's handling of many requests (each answer to its own request), not how fast this machine
  // completes 1000 TLS handshakes. The connect timeout is off: a busy machine is slow, not wrong.
  const agent = new Agent({ connect: { ca: gw.ca, timeout: 0 }, connections: 100, headersTimeout: 0, bodyTimeout: 0 })
  t.teardown(async () => await agent.close())
  const answers = await Promise.all(
    Array.from(
      { length: 1000 },
      async (_, i) =>
        await post(agent, gw.url('/text/demo'), utterance({ contactId: 1000 + i, messageBody: `utterance ${i}` }), auth)
    )
  )
  const wrong = answers.filter(
    (a, i) => a.status !== 200 || a.json?.reply !== `echo: utterance ${i}` || a.json?.contactId !== 1000 + i
  )
  t.equal(wrong.length, 0, 'every answer is a 200 carrying its own utterance')
  t.equal(new Set(answers.map(a => a.headers['x-request-id'])).size, 1000, 'every request has its own id')
  t.equal(vendor.textRequests().length, 1000)
})

t.test('a vendor that never answers is 504 at text.timeoutSeconds, while other requests keep being served', async t => {
  const hung = await startVendor(t, { kind: 'json-events', text: { hang: true } })
  const fine = await startVendor(t, { kind: 'json-events' })
  const gw = await startTlsGateway(t, {
    text: { timeoutSeconds: 3, connectionsPerReplica: 4 },
    routes: { slow: routeTo([hung], 'mappings/json-events.yaml'), fast: routeTo([fine], 'mappings/json-events.yaml') }
  })
  const started = performance.now()
  // More hanging requests than the replica has connections: the queued ones time out on the same deadline.
  let slowSettled = 0
  const slow = Array.from({ length: 8 }, async () => {
    const a = await post(gw.agent, gw.url('/text/slow'), utterance(), auth)
    slowSettled++
    return { a, ms: performance.now() - started }
  })
  const fastAnswers: number[] = []
  for (let i = 0; i < 10; i++)
    fastAnswers.push((await post(gw.agent, gw.url('/text/fast'), utterance({ messageBody: `fast ${i}` }), auth)).status)
  const settledWhileFast = slowSettled
  t.same(fastAnswers, Array(10).fill(200), 'the other route is served meanwhile')
  for (const { a, ms } of await Promise.all(slow)) {
    t.equal(a.status, 504)
    t.equal(a.json.code, 'UPSTREAM_TIMEOUT')
    // A timer never fires early: the answer is not before the configured timeout (however late a busy machine makes it).
    t.ok(ms >= 2950, `answered no sooner than the configured timeout (${Math.round(ms)} ms)`)
  }
  t.equal(settledWhileFast + (8 - slowSettled), 0, 'the slow ones were all still waiting when the fast ones were done')
  t.ok(
    hung.textRequests().length >= 4 && hung.textRequests().every(r => r.status === null),
    'the vendor got requests and never answered'
  )
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(metrics, /assist_gateway_upstream_requests_total\{route="slow",upstream="r0",result="timeout"\} [48]/)
  t.match(metrics, 'assist_gateway_text_requests_total{route="slow",code="504"} 8')
})

/**
 * Stream up to `total` bytes of body over TLS in 64 KiB chunks, with backpressure, as a well-behaved
 * client does: it stops sending once an answer arrives and closes when told `connection: close`.
 */
async function streamBody(gw: TlsGateway, total: number, chunked: boolean): Promise<{ answer: string; sent: number }> {
  return await new Promise((resolve, reject) => {
    let answer = ''
    let sent = 0
    const chunk = Buffer.alloc(65536, 0x61)
    const s = tlsConnect({ host: '127.0.0.1', port: gw.port, ca: gw.ca, servername: 'localhost' }, () => {
      s.write(
        `POST /text/demo HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nauthorization: ${TEXT_TOKEN}\r\n` +
          (chunked ? 'transfer-encoding: chunked\r\n\r\n' : `content-length: ${total}\r\n\r\n`)
      )
      const pump = (): void => {
        while (answer === '' && sent < total) {
          sent += chunk.length
          const ok = chunked
            ? s.write(`${chunk.length.toString(16)}\r\n`) && s.write(chunk) && s.write('\r\n')
            : s.write(chunk)
          if (!ok) {
            s.once('drain', pump)
            return
          }
        }
      }
      pump()
    })
    s.on('data', d => {
      answer += String(d)
      if (/\r\n\r\n[\s\S]*\}$/.test(answer) && /\r\nconnection: close\r\n/i.test(answer)) s.end()
    })
    // A reset once the answer is in (the client closed mid-body) is no failure.
    s.on('error', err => {
      if (answer === '') reject(err)
    })
    s.on('close', () => resolve({ answer, sent }))
    setTimeout(() => reject(new Error(`no answer after ${sent} bytes`)), 60000).unref()
  })
}

t.test('a 10 MB body is refused with 413 promptly, without the process growing by 10 MB; deep JSON is 400', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startTlsGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const TEN_MB = 10 * 1024 * 1024
  // The gateway's memory: its main process and workers (VmRSS), before and after.
  const rss = (): number => processTree(gw.pid).reduce((n, pid) => n + (rssBytes(pid) || 0), 0)
  const grownBy = async <R>(fn: () => Promise<R>): Promise<[R, number]> => {
    const before = rss()
    const r = await fn()
    return [r, rss() - before]
  }

  // A declared length past the limit: answered from the request head, before any body is read.
  // (It declares 100 MB: however slowly a busy gateway answers, the client has not sent it all by then.)
  const [raw, rawGrowth] = await grownBy(async () => await streamBody(gw, 10 * TEN_MB, false))
  t.match(raw.answer, /^HTTP\/1\.1 413 /, 'declared length: 413')
  t.match(raw.answer, /\r\nconnection: close\r\n/i, 'the client is told to stop and close')
  t.match(raw.answer, /"code":"MESSAGE_TOO_LARGE"/)
  t.ok(raw.sent < 10 * TEN_MB, `the client stopped before sending it all (${Math.round(raw.sent / 1024)} KiB sent)`)
  t.ok(rawGrowth < 5 * 1024 * 1024, `the gateway did not grow by the body (${Math.round(rawGrowth / 1024)} KiB)`)

  // An ordinary client, with a buffer (declared length) and with a stream (chunked: the limit holds while reading).
  for (const [how, body] of [
    ['buffer', () => Buffer.alloc(TEN_MB, 0x20)],
    [
      'stream',
      () =>
        Readable.from(
          (function* () {
            for (let i = 0; i < 160; i++) yield Buffer.alloc(65536, 0x20)
          })()
        )
    ]
  ] as const) {
    const [r, growth] = await grownBy(async () => {
      const res = await request(gw.url('/text/demo'), {
        method: 'POST',
        dispatcher: gw.agent,
        headers: { 'content-type': 'application/json', ...auth },
        body: body()
      })
      return { status: res.statusCode, json: (await res.body.json()) as { code: string } }
    })
    t.equal(r.status, 413, `${how}: 413`)
    t.equal(r.json.code, 'MESSAGE_TOO_LARGE')
    t.ok(growth < 5 * 1024 * 1024, `${how}: the gateway did not grow by the body (${Math.round(growth / 1024)} KiB)`)
  }

  const deepArray = '['.repeat(10000) + ']'.repeat(10000)
  const a = await post(gw.agent, gw.url('/text/demo'), deepArray, auth)
  t.equal(a.status, 400)
  t.same(a.json.pointers, ['/'])
  const deepData = JSON.stringify(utterance()).replace(
    '"messageData":{"channel":"chat"}',
    `"messageData":${'{"a":'.repeat(10000)}1${'}'.repeat(10000)}`
  )
  const b = await post(gw.agent, gw.url('/text/demo'), deepData, auth)
  t.equal(b.status, 400)
  t.equal(b.json.code, 'MESSAGE_INVALID')
  t.match(b.json.invalidParams[0], { pointer: /^\/messageData(\/a){63}$/, reason: 'nests deeper than 64 levels' })
  t.equal((await post(gw.agent, gw.url('/text/demo'), utterance(), auth)).status, 200, 'the gateway serves on')
  t.ok(await until(() => vendor.textRequests().length === 1), 'only the valid one reached the vendor')
})
