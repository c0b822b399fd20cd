import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { CATALOGUE, Metrics, PREFIX } from '../../../gateway/telemetry/metrics'
import { EMPTY_SPACE } from '../../../gateway/telemetry/seeds'

t.test('every catalogue metric is registered under the prefix, and nothing else is', async t => {
  const m = new Metrics()
  const names = (await m.registry.getMetricsAsJSON())
    .map(x => x.name)
    .filter(n => !n.startsWith('process_') && !n.startsWith('nodejs_'))
  t.same(
    names.slice().sort(),
    Object.keys(CATALOGUE)
      .map(n => PREFIX + n)
      .sort()
  )
})

t.test('per-leg integers are published at scrape time, ended legs keep counting', async t => {
  const m = new Metrics()
  const a = m.startLeg('r1')
  a.active = true
  a.framesFromPlatform = 10
  a.bytesFromPlatform = 1600
  a.dropHold = 2
  const b = m.startLeg('r1')
  b.framesFromPlatform = 5
  m.endLeg(b)
  m.endLeg(b)
  const text = await m.registry.metrics()
  t.match(text, 'assist_gateway_audio_frames_total{route="r1",direction="from_platform"} 15')
  t.match(text, 'assist_gateway_audio_bytes_total{route="r1",direction="from_platform"} 1600')
  t.match(text, 'assist_gateway_audio_dropped_frames_total{route="r1",reason="hold_overflow"} 2')
  t.match(text, 'assist_gateway_audio_sessions_active{route="r1"} 1')
})

t.test('the docs name only catalogue metrics, and the metrics reference names every one', async t => {
  const root = join(__dirname, '..', '..', '..')
  const files = ['README.md', ...markdownUnder(join(root, 'docs')).map(f => relative(root, f))]
  const known = new Set(Object.keys(CATALOGUE))
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8')
    const used = new Set(
      [...text.matchAll(/assist_gateway_([a-z_]+)/g)].map(m => m[1].replace(/_(bucket|sum|count)$/, ''))
    )
    for (const n of used)
      t.ok(
        known.has(n as keyof typeof CATALOGUE) || n.startsWith('process_') || n.startsWith('nodejs_'),
        `${file}: ${n} is in the catalogue`
      )
  }
  const reference = readFileSync(join(root, 'docs', 'reference', 'metrics.md'), 'utf8')
  for (const n of known) t.match(reference, `| \`${PREFIX}${n}\` |`, `${n} is in docs/reference/metrics.md`)
})

function markdownUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap(e =>
    e.isDirectory() ? markdownUnder(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : []
  )
}

t.test('per-route gauges have a sample at 0 for every configured route when idle', async t => {
  const m = new Metrics()
  m.labelSpace = () => ({
    ...EMPTY_SPACE,
    routes: [
      { name: 'demo', join: false },
      { name: 'other', join: false }
    ]
  })
  let text = await m.registry.metrics()
  for (const route of ['demo', 'other']) {
    t.match(text, `assist_gateway_audio_sessions_active{route="${route}"} 0`)
    t.match(text, `assist_gateway_audio_buffered_bytes{route="${route}"} 0`)
  }
  const leg = m.startLeg('demo')
  leg.active = true
  leg.bufferedBytes = 320
  text = await m.registry.metrics()
  t.match(text, 'assist_gateway_audio_sessions_active{route="demo"} 1')
  t.match(text, 'assist_gateway_audio_buffered_bytes{route="demo"} 320')
  t.match(text, 'assist_gateway_audio_sessions_active{route="other"} 0')
  m.endLeg(leg)
  t.match(await m.registry.metrics(), 'assist_gateway_audio_sessions_active{route="demo"} 0')
})
