import t from 'tap'
import { connect } from 'node:net'
import { Agent, request } from 'undici'
import WebSocket from 'ws'
import { initMessage } from '../../gateway/tools/simulate'
import {
  AUDIO_TOKEN,
  TEXT_TOKEN,
  platformLeg,
  routeTo,
  startGateway,
  startVendor,
  until,
  type PlatformLegClient,
  type TestGateway
} from '../helpers/gateway'
import type { VendorEmulator } from '../../gateway/tools/vendor-emulator'
import { utterance } from '../helpers/tls'

// Abuse resistance on one gateway: the failure delay, the per-address failure budget and the limits.
// Each part speaks from its own loopback address (127.0.0.x), so their budgets do not mix.

const AUDIO_TOKEN_2 = 'abuse-audio-token-2-s3cr3t'
const WRONG = 'wrong-credential-near-miss-s3cr3t'
const DELAY_MS = 300

let vendor: VendorEmulator
let gw: TestGateway
t.before(async () => {
  vendor = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const lim = routeTo([vendor], 'mappings/json-events.yaml')
  lim.auth = { audio: ['${AUDIO_TOKEN}', '${AUDIO_TOKEN_2}'], text: ['${TEXT_TOKEN}'] }
  gw = await startGateway(
    t,
    {
      auth: { failureDelayMs: DELAY_MS, failureBudget: { failures: 3, windowSeconds: 2 } },
      limits: { headerBytes: 4096, initMessageBytes: 1024, legsPerRoute: 3, legsPerClient: 2 },
      uws: { maxPayloadBytes: 4096 },
      text: { maxBodyBytes: 4096 },
      routes: { demo: routeTo([vendor], 'mappings/json-events.yaml'), lim }
    },
    { AUDIO_TOKEN_2 }
  )
})
const answers: string[] = []

let contact = 900000
function leg(route: string, token: string, from = '127.0.0.1', extra: Record<string, unknown> = {}): PlatformLegClient {
  const init = { ...initMessage({ token, contactId: ++contact, busNo: 4594, perspective: 'TX' }), ...extra }
  const l = platformLeg(t, gw.url(`/audio/${route}`), init, { localAddress: from })
  void l.answer.then(a => answers.push(JSON.stringify(a)))
  return l
}

const agents = new Map<string, Agent>()
async function text(
  authorization: string,
  from = '127.0.0.1',
  body = JSON.stringify(utterance())
): Promise<{ status: number; retryAfter: string | null; json: Record<string, unknown> }> {
  let dispatcher = agents.get(from)
  if (dispatcher === undefined) {
    dispatcher = new Agent({ localAddress: from })
    agents.set(from, dispatcher)
    t.teardown(() => dispatcher?.close())
  }
  const r = await request(gw.url('/text/demo'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization },
    body,
    dispatcher
  })
  const raw = await r.body.text()
  answers.push(raw)
  const retryAfter = r.headers['retry-after']
  return { status: r.statusCode, retryAfter: typeof retryAfter === 'string' ? retryAfter : null, json: JSON.parse(raw) }
}

async function metric(name: string): Promise<number> {
  const text = await (await fetch(gw.adminUrl('/metrics'))).text()
  const line = text.split('\n').find(l => l.startsWith(`assist_gateway_${name} `))
  return line === undefined ? 0 : Number(line.split(' ')[1])
}

const vendorFrames = (): number => vendor.sessions().reduce((n, s) => n + s.frames, 0)

t.test(
  'a failed authentication is answered no sooner than auth.failureDelayMs, and other legs keep flowing',
  async t => {
    const live = leg('demo', AUDIO_TOKEN)
    t.equal((await live.answer).command, 'CONNECTED')
    const before = vendorFrames()
    const started = performance.now()
    const bad = leg('demo', WRONG, '127.0.0.2')
    // A frame after the refused init does not hurry the answer (nor change it).
    bad.ws.once('open', () => bad.send(Buffer.alloc(160)))
    const pump = setInterval(() => live.send(Buffer.alloc(160)), 10)
    const answer = await bad.answer
    const elapsed = performance.now() - started
    const during = vendorFrames() - before
    clearInterval(pump)
    t.match(answer, { command: 'ERROR', messageType: 'AUTH_INVALID' })
    t.equal((await bad.closed).code, 1008)
    t.ok(elapsed >= DELAY_MS, `the refusal came after ${Math.round(elapsed)} ms, no sooner than ${DELAY_MS}`)
    t.ok(during > 0, `the live leg's frames reached the vendor meanwhile (${during})`)
    t.equal(live.ws.readyState, live.ws.OPEN, 'and the live leg is untouched')

    const textStarted = performance.now()
    const refused = await text(`Bearer ${WRONG}`, '127.0.0.2')
    t.equal(refused.status, 401)
    t.ok(performance.now() - textStarted >= DELAY_MS, 'a refused text request waits the delay out too')
    live.ws.close()
    await live.closed
  }
)

t.test('the per-address failure budget engages after N failures and releases when its window ends', async t => {
  const from = '127.0.0.3'
  const refused = await Promise.all([1, 2, 3].map(() => text(`Bearer ${WRONG}`, from)))
  t.same(
    refused.map(r => r.status),
    [401, 401, 401],
    'the budget (3) is spent'
  )
  const blocked = await text(TEXT_TOKEN, from)
  t.equal(blocked.status, 429, 'then even a good credential from that address is refused')
  t.match(blocked.json, { code: 'TOO_MANY_FAILURES' })
  const retryAfter = Number(blocked.retryAfter)
  t.ok(retryAfter >= 1 && retryAfter <= 2, `with retry-after within the window (${retryAfter})`)
  const audio = leg('demo', AUDIO_TOKEN, from)
  t.match(await audio.answer, {
    command: 'ERROR',
    messageType: 'TOO_MANY_FAILURES',
    parameters: { code: 'TOO_MANY_FAILURES' }
  })
  t.equal((await audio.closed).code, 1008)
  t.equal((await text(TEXT_TOKEN, '127.0.0.1')).status, 200, 'another address is not affected')
  t.equal(await metric('limit_refusals_total{limit="failure_budget",hook="text"}'), 1)
  t.equal(await metric('limit_refusals_total{limit="failure_budget",hook="audio"}'), 1)
  // Released over time: the window (2 s) ends and the address is served again.
  t.ok(await until(async () => (await text(TEXT_TOKEN, from)).status === 200, 10_000, 100), 'released')
})

t.test('each limit refuses with its documented error and close code, and is counted', async t => {
  const huge = leg('lim', AUDIO_TOKEN, '127.0.0.1', { pad: 'x'.repeat(2000) })
  t.match(
    await huge.answer,
    { command: 'ERROR', messageType: 'MESSAGE_TOO_LARGE' },
    'init over limits.initMessageBytes'
  )
  t.equal((await huge.closed).code, 1009)
  t.equal(await metric('limit_refusals_total{limit="init_size",hook="audio"}'), 1)

  const a1 = leg('lim', AUDIO_TOKEN)
  const a2 = leg('lim', `Bearer ${AUDIO_TOKEN}`)
  t.same([(await a1.answer).command, (await a2.answer).command], ['CONNECTED', 'CONNECTED'])
  const a3 = leg('lim', AUDIO_TOKEN)
  t.match(
    await a3.answer,
    { messageType: 'LEG_LIMIT', parameters: { limit: 'legs_per_client' } },
    'a third leg of one client'
  )
  t.equal((await a3.closed).code, 1013)
  const b1 = leg('lim', AUDIO_TOKEN_2)
  t.equal((await b1.answer).command, 'CONNECTED', 'another client still gets the third place of the route')
  const b2 = leg('lim', AUDIO_TOKEN_2)
  t.match(
    await b2.answer,
    { messageType: 'LEG_LIMIT', parameters: { limit: 'legs_per_route' } },
    'a fourth leg of the route'
  )
  t.equal((await b2.closed).code, 1013)
  t.equal(await metric('limit_refusals_total{limit="legs_per_client",hook="audio"}'), 1)
  t.equal(await metric('limit_refusals_total{limit="legs_per_route",hook="audio"}'), 1)
  a1.ws.close()
  await a1.closed
  const b3 = leg('lim', AUDIO_TOKEN_2)
  t.equal((await b3.answer).command, 'CONNECTED', 'a place freed by an ended leg is taken again')

  b1.send(Buffer.alloc(5000))
  t.equal((await b1.closed).code, 1009, 'a frame over uws.maxPayloadBytes')
  t.match(b1.messages.at(-1), { messageType: 'MESSAGE_TOO_LARGE' })
  t.equal(await metric('limit_refusals_total{limit="frame_size",hook="audio"}'), 1)

  const big = await text(TEXT_TOKEN, '127.0.0.1', JSON.stringify(utterance({ messageBody: 'y'.repeat(5000) })))
  t.equal(big.status, 413, 'a body over text.maxBodyBytes')
  t.match(big.json, { code: 'MESSAGE_TOO_LARGE' })
  t.equal(await metric('limit_refusals_total{limit="body_size",hook="text"}'), 1)
})

/** A raw request with this header block: what the client reads before the socket closes (or the error). */
function rawRequest(headers: string): Promise<string> {
  return new Promise(resolve => {
    const socket = connect(Number(new URL(gw.url('/')).port), '127.0.0.1', () =>
      socket.write(`GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${headers}\r\n`)
    )
    let out = ''
    socket.on('data', d => (out += d.toString('latin1')))
    socket.on('close', () => resolve(out))
    socket.on('error', err => resolve(`error ${(err as NodeJS.ErrnoException).code}`))
  })
}

t.test('a request head over limits.headerBytes is refused with 431 and counted; past uWS own bound, cut', async t => {
  const pad = 'h'.repeat(5000)
  const r = await request(gw.url('/text/demo'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN, 'x-pad': pad },
    body: JSON.stringify(utterance())
  })
  const body = await r.body.text()
  answers.push(body)
  t.equal(r.statusCode, 431, 'text')
  t.equal(r.headers.connection, 'close')
  t.match(JSON.parse(body), { code: 'HEADERS_TOO_LARGE' })
  const ws = new WebSocket(gw.url('/audio/demo'), { headers: { 'x-pad': pad } })
  const status = await new Promise<number>(resolve => {
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
    ws.on('open', () => resolve(101))
    ws.on('error', () => {})
  })
  ws.terminate()
  t.equal(status, 431, 'the audio upgrade')
  t.equal(await metric('limit_refusals_total{limit="header_size",hook="text"}'), 1)
  t.equal(await metric('limit_refusals_total{limit="header_size",hook="audio"}'), 1)

  t.match(await rawRequest(`X-Pad: ${'a'.repeat(60_000)}\r\n`), /^HTTP\/1\.1 200 /, 'a 60 KB header block is read')
  const tooBig = await rawRequest(`X-Pad: ${'a'.repeat(200_000)}\r\n`)
  t.notMatch(
    tooBig,
    /^HTTP\//,
    `over uWS's ~128 KB header buffer: no status, the socket is cut (${tooBig || 'closed'})`
  )
})

t.test('no credential, not even a refused one, in any log line or answer', async t => {
  t.ok(answers.length > 10 && gw.logs.lines.length > 10, 'answers and log lines were captured')
  for (const s of [AUDIO_TOKEN, AUDIO_TOKEN_2, TEXT_TOKEN, WRONG]) {
    t.notOk(gw.logs.raw.includes(s), 'not in the logs')
    t.notOk(
      answers.some(a => a.includes(s)),
      'not in any answer'
    )
  }
})
