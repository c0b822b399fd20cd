import t from 'tap'
import { request } from 'undici'
import { WebSocket } from 'ws'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { TEXT_TOKEN, logged, routeTo, startGateway, startVendor, until } from '../helpers/gateway'
import { utterance } from '../helpers/tls'
import { audioInit } from '../helpers/legs'
import { vendorGateway } from '../helpers/vendors'

const INCOMING = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/

async function post(url: string, headers: Record<string, string>): Promise<{ status: number; requestId: string }> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN, ...headers },
    body: JSON.stringify(utterance())
  })
  await res.body.dump()
  return { status: res.statusCode, requestId: String(res.headers['x-request-id']) }
}

t.test(
  'x-request-id and traceparent: kept when well-formed, continued to the vendor, one access line each',
  async t => {
    const vendor = await startVendor(t, { kind: 'json-events' })
    const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
    const url = gw.url('/text/demo')

    const kept = await post(url, { 'x-request-id': 'caller-id.42', traceparent: INCOMING })
    t.equal(kept.status, 200)
    t.equal(kept.requestId, 'caller-id.42', 'a well-formed request id is kept')
    await until(() => vendor.textRequests().length === 1)
    const first = vendor.textRequests()[0].headers
    t.equal(first['x-request-id'], 'caller-id.42', 'and reaches the vendor')
    t.match(first.traceparent, TRACEPARENT)
    t.equal(first.traceparent.slice(3, 35), '4bf92f3577b34da6a3ce929d0e0e4736', 'the caller’s trace continues')
    t.not(first.traceparent.slice(36, 52), '00f067aa0ba902b7', 'with this hop as the parent')
    t.equal(first.traceparent.slice(53), '01', 'and its sampled flag')

    const fresh = await post(url, { 'x-request-id': `bad id ${'x'.repeat(200)}`, traceparent: 'ff-garbage' })
    t.match(fresh.requestId, /^[0-9a-f-]{36}$/, 'a malformed request id is replaced by a new one')
    await until(() => vendor.textRequests().length === 2)
    const second = vendor.textRequests()[1].headers
    t.match(second.traceparent, TRACEPARENT, 'a malformed traceparent starts a new trace')
    t.equal(second.traceparent.slice(53), '00', 'not sampled: the gateway records no spans')
    t.not(second.traceparent.slice(3, 35), '4bf92f3577b34da6a3ce929d0e0e4736')

    const refused = await post(url, { authorization: 'wrong' })
    t.equal(refused.status, 401)
    t.ok(
      await until(() => logged(gw, 'text_request', { status: 401, route: 'demo' })),
      'a refusal has its access line too'
    )
    const lines = gw.logs.lines.filter(l => l.event === 'text_request')
    t.equal(lines.length, 3, 'one access line per request')
    t.match(lines[0], {
      status: 200,
      route: 'demo',
      upstream: 'r0',
      requestId: 'caller-id.42',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736'
    })
    t.type(lines[0].ms, 'number')
  }
)

t.test('log.accessLog: off writes no access line', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, {
    log: { accessLog: 'off' },
    routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
  })
  t.equal((await post(gw.url('/text/demo'), {})).status, 200)
  t.notOk(logged(gw, 'text_request'))
})

t.test('an audio upgrade carries the platform traceparent on to the vendor upgrade, as a child of it', async t => {
  const KEY = 'dg-key-0123456789abcdef'
  const emu = await startRealVendor({ kind: 'deepgram', apiKey: KEY })
  t.teardown(async () => await emu.close())
  const gw = await vendorGateway(t, emu, 'mappings/deepgram.yaml', KEY)
  const ws = new WebSocket(gw.url('/audio/x').replace(/^http/, 'ws'), { headers: { traceparent: INCOMING } })
  t.teardown(() => ws.terminate())
  const answer = new Promise<Record<string, unknown>>(resolve =>
    ws.once('message', data => resolve(JSON.parse(String(data)) as Record<string, unknown>))
  )
  await new Promise(resolve => ws.once('open', resolve))
  ws.send(JSON.stringify(audioInit(77)))
  t.equal((await answer).command, 'CONNECTED')
  t.ok(await until(() => emu.sessions().length === 1))
  const sent = emu.sessions()[0].headers.traceparent
  t.match(sent, TRACEPARENT)
  t.equal(sent.slice(3, 35), '4bf92f3577b34da6a3ce929d0e0e4736', 'the platform’s trace continues to the vendor')
  t.not(sent.slice(36, 52), '00f067aa0ba902b7', 'with the gateway’s hop as the parent')
})
