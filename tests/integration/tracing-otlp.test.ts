import t from 'tap'
import { stream } from '../helpers/audio'
import { TEXT_TOKEN, platformLeg, routeTo, startVendor, until } from '../helpers/gateway'
import { type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver'
import { spawnGateway } from '../helpers/process'
import { utterance } from '../helpers/tls'
import { audioInit } from '../helpers/legs'

// OpenTelemetry traces of `serve` as shipped (2 workers), exported to an OTLP receiver in this process.
const UTTERANCE_PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
const UNSAMPLED_PARENT = '00-11112222333344445555666677778888-1111222233334444-00'
const LEG_PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
const health = { active: { kind: 'none' } }
const SERVER = 2
const CLIENT = 3
const ERROR = 2

async function post(url: string, traceparent: string): Promise<number> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN, traceparent },
    body: JSON.stringify(utterance())
  })
  await res.arrayBuffer()
  return res.status
}

const childrenOf = (spans: ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] =>
  spans.filter(s => s.traceId === parent.traceId && s.parentSpanId === parent.spanId)

t.test(
  'OTEL_* turn tracing on: an utterance and a failed-over leg are spans linked to the caller’s traceparent',
  async t => {
    const receiver = await startOtlpReceiver(t)
    const text = await startVendor(t, { kind: 'json-events' })
    const a = await startVendor(t, { kind: 'passthrough', resultEveryFrames: 0, echo: true })
    const b = await startVendor(t, { kind: 'passthrough', resultEveryFrames: 0, echo: true })
    const g = await spawnGateway(
      t,
      {
        health,
        audio: { reattachGraceSeconds: 0 },
        routes: {
          chat: routeTo([text], 'mappings/json-events.yaml'),
          calls: routeTo([a, b], 'mappings/passthrough.yaml')
        }
      },
      {
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
        OTEL_SERVICE_NAME: 'gateway-under-test',
        OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
        OTEL_BSP_SCHEDULE_DELAY: '200'
      }
    )
    t.match(g.output(), /"event":"tracing"[^\n]*"protocol":"http\/protobuf"/, 'each worker says where spans go')

    t.equal(await post(g.url('/text/chat'), UTTERANCE_PARENT), 200)
    t.equal(await post(g.url('/text/chat'), UNSAMPLED_PARENT), 200)
    const [sampled, unsampled] = text.textRequests().map(r => r.headers.traceparent)
    t.match(
      unsampled,
      /^00-11112222333344445555666677778888-[0-9a-f]{16}-00$/,
      'a caller’s unsampled trace goes on unsampled'
    )

    const leg = platformLeg(t, g.url('/audio/calls'), audioInit(770001), {
      headers: { traceparent: LEG_PARENT }
    })
    const answer = (await leg.answer) as { command: string; parameters: { echo: string } }
    t.equal(answer.command, 'CONNECTED')
    const upgrade = JSON.parse(answer.parameters.echo).upgrade as { headers: Record<string, string> }
    await stream(leg, 0, 25)
    const first = a.sessions().length === 1 ? a : b
    const second = first === a ? b : a
    first.dropAll()
    t.ok(await until(() => second.sessions().length === 1), 'the leg failed over to the other replica')
    await stream(leg, 25, 100)
    leg.ws.close(1000)
    await leg.closed

    // The drain exports what is left before each worker exits: then every span is in.
    process.kill(g.pid, 'SIGTERM')
    await g.exited
    const spans = receiver.spans()
    t.ok(receiver.requests().every(r => r.path === '/v1/traces' && r.contentType === 'application/x-protobuf'))

    const roots = spans.filter(s => s.name === 'utterance')
    t.equal(roots.length, 1, 'one utterance span: the unsampled caller’s utterance recorded nothing')
    const u = roots[0]
    t.equal(u.traceId, '4bf92f3577b34da6a3ce929d0e0e4736', 'the caller’s trace')
    t.equal(u.parentSpanId, '00f067aa0ba902b7', 'as a child of the caller’s span')
    t.equal(u.kind, SERVER)
    t.match(u.attributes, {
      'assist_gateway.route': 'chat',
      'http.response.status_code': 200,
      'http.request.method': 'POST'
    })
    t.match(u.resource, {
      'service.name': 'gateway-under-test',
      'deployment.environment': 'test',
      'service.instance.id': /\/w[01]$/
    })
    t.ok([0, 1].includes(u.resource['assist_gateway.worker'] as number), 'the worker that served it')
    const steps = childrenOf(spans, u)
    t.same(
      steps.map(s => s.name).sort(),
      ['credential', 'mapping text.request', 'mapping text.response', 'upstream POST', 'validation'],
      'credential, validation, mapping, the upstream attempt and the answer, each a child span'
    )
    const attempt = steps.find(s => s.name === 'upstream POST')!
    t.equal(attempt.kind, CLIENT)
    t.match(attempt.attributes, {
      'assist_gateway.upstream': 'r0',
      'assist_gateway.attempt': 0,
      'http.response.status_code': 200
    })
    t.equal(sampled, `00-${u.traceId}-${attempt.spanId}-01`, 'the vendor call carries the attempt’s span as its parent')

    const legs = spans.filter(s => s.name === 'leg')
    t.equal(legs.length, 1, 'one span for the whole leg: 100 frames, no span per frame')
    const l = legs[0]
    t.equal(l.traceId, '0af7651916cd43dd8448eb211c80319c')
    t.equal(l.parentSpanId, 'b7ad6b7169203331')
    t.equal(childrenOf(spans, l).length, 0, 'its moments are events, not spans')
    t.equal(upgrade.headers.traceparent, `00-${l.traceId}-${l.spanId}-01`, 'the vendor upgrade carries the leg’s span')
    const names = l.events.map(e => e.name)
    const order = [
      'handshake.accepted',
      'placement',
      'vendor.connected',
      'handshake.connected',
      'failover.start',
      'vendor.connected',
      'failover.done',
      'close'
    ]
    let at = -1
    for (const name of order) {
      const next = names.indexOf(name, at + 1)
      t.ok(next > at, `${name} comes next (events: ${names.join(', ')})`)
      at = next
    }
    const connects = l.events.filter(e => e.name === 'vendor.connected').map(e => e.attributes.upstream)
    t.same(
      connects,
      [first === a ? 'r0' : 'r1', first === a ? 'r1' : 'r0'],
      'each vendor session’s connect, by replica'
    )
    t.match(l.events.find(e => e.name === 'failover.done')!.attributes, { from: connects[0], upstream: connects[1] })
    t.match(l.attributes, {
      'assist_gateway.route': 'calls',
      'assist_gateway.contact_id': '770001',
      'assist_gateway.failovers': 1,
      'assist_gateway.frames_from_platform': 100,
      'assist_gateway.outcome': 'normal'
    })
    t.not(l.status.code, ERROR)
  }
)

t.test('the config keys turn it on too: http/json, a ratio sampler; a 5xx utterance is an error span', async t => {
  const receiver = await startOtlpReceiver(t)
  const text = await startVendor(t, { kind: 'json-events' })
  const g = await spawnGateway(t, {
    health,
    tracing: {
      exporter: 'otlp',
      endpoint: `${receiver.endpoint}/`,
      protocol: 'http/json',
      serviceName: 'from-config',
      sampler: 'traceidratio',
      samplerArg: 1
    },
    routes: { chat: routeTo([text], 'mappings/json-events.yaml') }
  })
  t.equal(await post(g.url('/text/chat'), ''), 200)
  text.setText({ status: 503 })
  t.equal(await post(g.url('/text/chat'), ''), 502)
  process.kill(g.pid, 'SIGTERM')
  await g.exited
  t.ok(receiver.requests().length > 0 && receiver.requests().every(r => r.contentType.startsWith('application/json')))
  const roots = receiver.spans().filter(s => s.name === 'utterance')
  t.equal(roots.length, 2)
  t.ok(
    roots.every(r => r.parentSpanId === '' && r.resource['service.name'] === 'from-config'),
    'new traces, root spans'
  )
  const failed = roots.find(r => r.attributes['http.response.status_code'] === 502)!
  t.match(failed.status, { code: ERROR, message: 'UPSTREAM_BAD_ANSWER' })
  const attempts = childrenOf(receiver.spans(), failed).filter(s => s.name === 'upstream POST')
  t.ok(
    attempts.length >= 1 &&
      attempts.every(s => s.status.code === ERROR && s.attributes['http.response.status_code'] === 503)
  )
})
