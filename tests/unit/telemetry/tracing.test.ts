import t from 'tap'
import {
  AlwaysOnSampler,
  BasicTracerProvider,
  InMemorySpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor
} from '@opentelemetry/sdk-trace-base'
import { SpanKind, SpanStatusCode } from '@opentelemetry/api'
import { OtelTracing, startTracing, untraced } from '../../../gateway/telemetry/tracing'

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
const UNSAMPLED = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00'

function traced(): { tracing: OtelTracing; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter()
  const provider = new BasicTracerProvider({
    sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }),
    spanProcessors: [new SimpleSpanProcessor(exporter)]
  })
  return { tracing: new OtelTracing(provider.getTracer('test'), async () => await provider.shutdown()), exporter }
}

t.test('off: the caller’s trace continued with a span id of its own, nothing recorded, no child allocated', async t => {
  const span = untraced.start('utterance', PARENT)
  t.equal(span.traceId, '4bf92f3577b34da6a3ce929d0e0e4736')
  t.match(span.traceparent, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/)
  t.not(span.traceparent.slice(36, 52), '00f067aa0ba902b7')
  t.equal(span.recording, false)
  t.equal(span.child('credential'), span, 'a child is the span itself')
  t.match(untraced.start('leg', 'garbage').traceparent, /-00$/, 'a malformed header: a new trace, not sampled')
  t.equal(startTracing({ enabled: false } as never, { instance: 'i', worker: null, version: '0' }), untraced)
})

t.test(
  'on: a SERVER span under the caller’s, children under it, events and an error status; one end counts',
  async t => {
    const { tracing, exporter } = traced()
    const root = tracing.start('utterance', PARENT, { 'assist_gateway.route': 'demo', skipped: undefined })
    t.equal(root.recording, true)
    const attempt = root.child('upstream POST', { 'assist_gateway.upstream': 'r0' }, 'client')
    t.equal(attempt.traceparent, `00-${root.traceId}-${attempt.traceparent.slice(36, 52)}-01`)
    attempt.end('UPSTREAM_TIMEOUT')
    root.event('aborted', { why: 'test' })
    root.set({ 'http.response.status_code': 504 })
    root.end()
    root.end('ignored')
    root.event('late')
    const [child, parent] = exporter.getFinishedSpans()
    t.equal(exporter.getFinishedSpans().length, 2)
    t.equal(parent.spanContext().traceId, '4bf92f3577b34da6a3ce929d0e0e4736')
    t.equal(parent.parentSpanContext?.spanId, '00f067aa0ba902b7')
    t.equal(parent.kind, SpanKind.SERVER)
    t.same(
      parent.attributes,
      { 'assist_gateway.route': 'demo', 'http.response.status_code': 504 },
      'undefined values left out'
    )
    t.same(
      parent.events.map(e => e.name),
      ['aborted'],
      'nothing after the end'
    )
    t.equal(parent.status.code, SpanStatusCode.UNSET, 'the second end changed nothing')
    t.equal(child.parentSpanContext?.spanId, parent.spanContext().spanId)
    t.equal(child.kind, SpanKind.CLIENT)
    t.same(child.status, { code: SpanStatusCode.ERROR, message: 'UPSTREAM_TIMEOUT' })
  }
)

t.test('on, the caller not sampled: nothing recorded, the flag goes on, children are the span itself', async t => {
  const { tracing, exporter } = traced()
  const root = tracing.start('leg', UNSAMPLED)
  t.equal(root.recording, false)
  t.match(root.traceparent, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-00$/)
  t.equal(root.child('credential'), root)
  root.end()
  t.equal(exporter.getFinishedSpans().length, 0)
  const fresh = tracing.start('leg', '00-00000000000000000000000000000000-00f067aa0ba902b7-01')
  t.equal(fresh.recording, true, 'an all-zero trace id is no parent: a new sampled trace')
  t.not(fresh.traceId, '00000000000000000000000000000000')
})
