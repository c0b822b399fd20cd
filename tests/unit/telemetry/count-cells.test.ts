import t from 'tap'
import { Metrics } from '../../../gateway/telemetry/metrics'

// Issue 24: per-request counts go into plain cells; every way of reading the counter sees them.

t.test('cells reach text_requests_total at a scrape, at get(), and in the JSON a worker reports', async t => {
  const m = new Metrics()
  const ok = m.textRequestCounts.cell('r', '200')
  for (let i = 0; i < 5; i++) ok.inc()
  t.equal(m.textRequestCounts.cell('r', '200'), ok, 'one cell per label set, however often asked')
  t.match(await m.registry.metrics(), 'assist_gateway_text_requests_total{route="r",code="200"} 5')
  ok.inc()
  const got = await m.textRequests.get()
  t.equal(got.values.find(v => v.labels.code === '200')?.value, 6, 'get() collects first')
  ok.inc()
  ok.inc()
  const json = (await m.registry.getMetricsAsJSON()) as unknown as {
    name: string
    values: { value: number; labels: Record<string, string> }[]
  }[]
  const metric = json.find(x => x.name === 'assist_gateway_text_requests_total')
  t.equal(metric?.values[0].value, 8)
  t.match(await m.registry.metrics(), 'assist_gateway_text_requests_total{route="r",code="200"} 8', 'nothing twice')
})

t.test('upstream_requests_total likewise', async t => {
  const m = new Metrics()
  const c = m.upstreamRequestCounts.cell('r', 'a', 'ok')
  c.inc()
  c.inc()
  t.match(await m.registry.metrics(), 'assist_gateway_upstream_requests_total{route="r",upstream="a",result="ok"} 2')
})
