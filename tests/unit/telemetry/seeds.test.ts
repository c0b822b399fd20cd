import t from 'tap'
import { samples } from '../../helpers/metrics'
import { QUOTA_LIMITS } from '../../../gateway/auth/quotas'
import { CODES } from '../../../gateway/errors'
import { CLOSED_LABELS, labelSpaceOf, tenantsOf } from '../../../gateway/server/metric-labels'
import { CATALOGUE, Metrics, type MetricName, PUBLISHED_LABELS } from '../../../gateway/telemetry/metrics'
import { EMPTY_SPACE, isOpenLabel, type LabelSpace, seedSeries } from '../../../gateway/telemetry/seeds'

// Every series the gateway can count exists at 0 before its first event (telemetry/seeds.ts): closed label
// values from the modules that count them (server/metric-labels.ts), open ones from the config.

const space: LabelSpace = {
  routes: [
    { name: 'demo', join: false },
    { name: 'stereo', join: true }
  ],
  replicas: [
    { route: 'demo', upstream: 'a' },
    { route: 'demo', upstream: 'b' },
    { route: 'stereo', upstream: 'v' },
    { route: 'demo/copy', upstream: 't' }
  ],
  tees: [{ route: 'demo', tee: 'copy' }],
  workers: [],
  tenants: ['acme', 'demo', 'unknown']
}

t.test('every closed label of every seeded metric has its values; open ones come from the config', async t => {
  const closed = { ...CLOSED_LABELS, ...PUBLISHED_LABELS }
  for (const [name, entry] of Object.entries(CATALOGUE)) {
    if (entry.type === 'gauge' || name === 'ws_closes_total') continue
    const labels: readonly string[] = entry.labels
    for (const g of closed[name as MetricName] ?? [{ values: {} }])
      for (const l of labels)
        t.ok(isOpenLabel(l) || g.values[l] !== undefined, `${name}: ${l} is open or has its values`)
    for (const l of Object.keys(closed[name as MetricName]?.[0]?.values ?? {}))
      t.ok(labels.includes(l), `${name}: ${l} is one of its labels`)
  }
})

t.test('outcomes and codes come from the error catalogue, each once', async t => {
  const outcomes = seedSeries('audio_sessions_total', CLOSED_LABELS, space).filter(l => l.route === 'demo')
  for (const code of Object.keys(CODES))
    t.ok(
      outcomes.some(l => l.outcome === code.toLowerCase()),
      `audio_sessions_total{outcome="${code.toLowerCase()}"}`
    )
  t.equal(new Set(outcomes.map(l => l.outcome)).size, outcomes.length, 'no outcome twice')
  const codes = seedSeries('text_requests_total', CLOSED_LABELS, space)
  for (const status of new Set(Object.values(CODES).map(c => String(c.status))))
    t.ok(
      codes.some(l => l.route === 'demo' && l.code === status),
      `text_requests_total{route="demo",code="${status}"}`
    )
  t.ok(
    codes.some(l => l.route === '' && l.code === '404'),
    'the empty route (a path naming no route) has its codes too'
  )
})

t.test('open labels: replicas, tees, join routes, moves between a route’s own replicas', async t => {
  t.same(
    seedSeries('upstream_ejections_total', CLOSED_LABELS, space),
    space.replicas.map(r => ({ route: r.route, upstream: r.upstream })),
    'every replica of every pool, a tee’s under <route>/<tee>'
  )
  t.same(
    seedSeries('audio_joins_total', CLOSED_LABELS, space).map(l => l.route),
    ['stereo', 'stereo', 'stereo', 'stereo', 'stereo'],
    'joins: on the join route only'
  )
  t.same(seedSeries('audio_moves_total', CLOSED_LABELS, space), [
    { route: 'demo', from: 'a', to: 'b' },
    { route: 'demo', from: 'b', to: 'a' }
  ])
  t.ok(
    seedSeries('audio_tee_sessions_total', CLOSED_LABELS, space).every(l => l.route === 'demo' && l.tee === 'copy'),
    'tee series: its route and tee'
  )
  t.same(
    seedSeries('upstream_requests_total', CLOSED_LABELS, space).filter(l => l.result === 'no_replica'),
    space.routes.map(r => ({ route: r.name, upstream: '', result: 'no_replica' })),
    'no_replica: under each route with an empty upstream'
  )
  t.same(seedSeries('worker_restarts_total', CLOSED_LABELS, { ...EMPTY_SPACE, workers: ['0', '1'] }), [
    { worker: '0' },
    { worker: '1' }
  ])
})

t.test('a seeded registry shows every series at 0, keeps counts, and seeds a reload’s new route', async t => {
  let current = space
  const m = new Metrics()
  m.sessionsTotal.inc({ route: 'demo', outcome: 'ok' }, 2)
  m.seed(CLOSED_LABELS, () => current)
  m.handshakeDuration.observe({ route: 'demo' }, 0.02)
  let text = await m.registry.metrics()
  t.equal(samples(text, 'assist_gateway_audio_sessions_total').get('{route="demo",outcome="ok"}'), 2, 'kept')
  t.equal(samples(text, 'assist_gateway_audio_sessions_total').get('{route="demo",outcome="internal"}'), 0)
  t.equal(samples(text, 'assist_gateway_audio_handshake_duration_seconds_count').get('{route="demo"}'), 1, 'kept')
  t.equal(samples(text, 'assist_gateway_audio_handshake_duration_seconds_count').get('{route="stereo"}'), 0)
  t.equal(samples(text, 'assist_gateway_limit_refusals_total').get('{limit="failure_budget",hook="text"}'), 0)
  t.equal(samples(text, 'assist_gateway_auth_failures_total').get('{hook="relay",reason="replayed"}'), 0)
  t.equal(
    samples(text, 'assist_gateway_audio_dropped_frames_total').get('{route="stereo",reason="backpressure"}'),
    0,
    'counters published from the per-leg totals have their series at 0 too'
  )
  t.equal(
    samples(text, 'assist_gateway_audio_tee_dropped_frames_total').get('{route="demo",tee="copy",reason="ended"}'),
    0
  )
  t.equal(samples(text, 'assist_gateway_ws_closes_total').size, 0, 'close codes (chosen by the peer) are not seeded')
  // A reload adds a route: its series appear; seeding again keeps what was counted.
  current = { ...space, routes: [...space.routes, { name: 'added', join: false }] }
  m.reseed()
  text = await m.registry.metrics()
  t.equal(samples(text, 'assist_gateway_audio_failovers_total').get('{route="added",result="failed"}'), 0)
  t.equal(samples(text, 'assist_gateway_audio_handshake_duration_seconds_count').get('{route="demo"}'), 1)
  t.equal(samples(text, 'assist_gateway_audio_sessions_total').get('{route="demo",outcome="ok"}'), 2)
})

t.test(
  'per-tenant series (issue 33 item 5): every tenant of the config and unknown, at 0, and a reload’s new tenant',
  async t => {
    // Tenant values: the configured tenants, a route with its own auth, a route open to anonymous callers, and
    // unknown; not a route that admits only configured tenants (its callers are those tenants).
    const routes = [
      { name: 'own', config: { auth: { audio: ['k'] }, tenants: ['acme'] }, tenants: [{ name: 'acme' }] },
      { name: 'open', config: {}, tenants: [] },
      { name: 'shared', config: { tenants: ['acme', 'globex'] }, tenants: [{ name: 'acme' }, { name: 'globex' }] },
      { name: 'all', config: {}, tenants: [{ name: 'acme' }, { name: 'globex' }] }
    ]
    t.same(tenantsOf(routes, ['acme', 'globex']).sort(), ['acme', 'globex', 'open', 'own', 'unknown'])
    t.same(labelSpaceOf([], ['acme']).tenants, ['acme', 'unknown'], 'no route: the configured tenants and unknown')
    t.same(
      seedSeries('tenant_refusals_total', CLOSED_LABELS, space)
        .filter(l => l.tenant === 'acme')
        .map(l => l.limit)
        .sort(),
      ['legs_per_client', 'legs_per_route', ...QUOTA_LIMITS].sort(),
      'refusals: the quotas and the leg limits, per tenant'
    )
    t.ok(
      seedSeries('tenant_legs_total', CLOSED_LABELS, space).every(
        l => Object.keys(l).sort().join() === 'outcome,tenant'
      ),
      'tenant series carry no route label'
    )
    let current = space
    const m = new Metrics()
    m.seed(CLOSED_LABELS, () => current)
    const leg = m.startLeg('demo')
    leg.active = true
    leg.tenant = 'acme'
    const tee = m.startLeg('demo/copy')
    tee.active = true
    m.tenantLegs.inc({ tenant: 'acme', outcome: 'ok' })
    m.tenantUtteranceCounts.cell('unknown', '401').inc()
    let text = await m.registry.metrics()
    t.same(
      Object.fromEntries(samples(text, 'assist_gateway_tenant_legs_active')),
      { '{tenant="acme"}': 1, '{tenant="demo"}': 0, '{tenant="unknown"}': 0 },
      'live legs by tenant, every tenant at 0 when idle; a tee’s vendor session is no leg of a tenant'
    )
    t.equal(samples(text, 'assist_gateway_tenant_legs_total').get('{tenant="acme",outcome="ok"}'), 1)
    t.equal(samples(text, 'assist_gateway_tenant_legs_total').get('{tenant="demo",outcome="ok"}'), 0)
    t.equal(samples(text, 'assist_gateway_tenant_utterances_total').get('{tenant="unknown",code="401"}'), 1)
    t.equal(samples(text, 'assist_gateway_tenant_utterances_total').get('{tenant="acme",code="429"}'), 0)
    t.equal(samples(text, 'assist_gateway_tenant_refusals_total').get('{tenant="acme",limit="tenant_legs"}'), 0)
    current = { ...space, tenants: [...space.tenants, 'globex'] }
    m.reseed()
    text = await m.registry.metrics()
    t.equal(samples(text, 'assist_gateway_tenant_refusals_total').get('{tenant="globex",limit="tenant_legs"}'), 0)
    t.equal(samples(text, 'assist_gateway_tenant_legs_active').get('{tenant="globex"}'), 0, 'a reload’s tenant')
    t.equal(samples(text, 'assist_gateway_tenant_legs_total').get('{tenant="acme",outcome="ok"}'), 1, 'kept')
  }
)
