import t from 'tap'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { CODES } from '../../../gateway/errors'
import { CATALOGUE, Metrics, PREFIX } from '../../../gateway/telemetry/metrics'
import { objectsOf, schemaProblem } from '../../helpers/k8s'

// ops/grafana-dashboard.json and ops/alerts.yml against what the gateway exports: every metric family is on
// a panel, no panel or rule names a series the gateway does not export, every failure of the failure table (docs/reference/errors.md)
// is watched by an alert, and every alert has its runbook in docs/runbooks/.

const root = join(__dirname, '..', '..', '..')

interface Panel {
  title: string
  type: string
  targets?: { expr: string }[]
  panels?: Panel[]
}
interface Rule {
  alert: string
  expr: string
  labels?: Record<string, string>
  annotations?: Record<string, string>
}

const dashboard = JSON.parse(readFileSync(join(root, 'ops', 'grafana-dashboard.json'), 'utf8')) as { panels: Panel[] }
/** Every panel, those inside collapsed rows too. */
const panels: Panel[] = dashboard.panels.flatMap(p => [p, ...(p.panels ?? [])])
const rules: Rule[] = (
  parse(readFileSync(join(root, 'ops', 'alerts.yml'), 'utf8')) as { groups: { rules: Rule[] }[] }
).groups.flatMap(g => g.rules)

/** Prometheus's own per-target series of the gateway's scrape job: the one non-gateway series a rule or panel may use. */
const PROMETHEUS_UP = /^up\{job="assist-gateway"(, instance=~"\$instance")?\}$/

/**
 * The series a query names: gateway metrics (the catalogue's with the prefix stripped, Node's standard
 * `process_*` and `nodejs_*` as they are) and Prometheus's `up{…}` selectors.
 */
function seriesOf(expr: string): { gateway: string[]; up: string[] } {
  return {
    gateway: [...expr.matchAll(/(?<![\w:])(?:assist_gateway_([a-z0-9_]+)|((?:process|nodejs)_[a-z0-9_]+))/g)].map(
      m => m[1] ?? m[2]
    ),
    up: [...expr.matchAll(/(?<![\w:])up(?![\w:])(\{[^}]*\})?/g)].map(m => m[0])
  }
}

/** What a scrape of the gateway shows: family name → type, the catalogue and prom-client's process defaults. */
async function exported(): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  for (const m of await new Metrics().registry.getMetricsAsJSON())
    out.set(m.name.startsWith(PREFIX) ? m.name.slice(PREFIX.length) : m.name, String(m.type))
  return out
}

/** The metric family of a series name (a histogram's _bucket, _sum and _count are its family's). */
function familyOf(series: string, families: Map<string, string>): string | null {
  if (families.has(series)) return series
  const m = /^(.*)_(bucket|sum|count)$/.exec(series)
  return m !== null && families.get(m[1]) === 'histogram' ? m[1] : null
}

const queries = [
  ...rules.map(r => ({ where: `alert ${r.alert}`, expr: r.expr })),
  ...panels.flatMap(p => (p.targets ?? []).map(x => ({ where: `panel "${p.title}"`, expr: x.expr })))
]

t.test('rules and panels name only series the gateway exports (or Prometheus’s up of its job)', async t => {
  const families = await exported()
  t.ok(queries.length > 40)
  for (const { where, expr } of queries) {
    const { gateway, up } = seriesOf(expr)
    t.ok(gateway.length > 0 || up.length > 0, `${where} queries a gateway metric or Prometheus's up`)
    for (const s of gateway) t.ok(familyOf(s, families), `${where}: ${PREFIX}${s} is exported`)
    for (const u of up) t.match(u, PROMETHEUS_UP, `${where}: up of the job "assist-gateway" only`)
  }
})

t.test(
  'every exported metric family is on a panel, and the process row shows CPU, memory, fds, lag, restarts per worker',
  async t => {
    const onPanels = new Set<string>()
    const families = await exported()
    for (const p of panels)
      for (const x of p.targets ?? [])
        for (const s of seriesOf(x.expr).gateway) {
          const f = familyOf(s, families)
          if (f !== null) onPanels.add(f)
        }
    t.ok(families.size > Object.keys(CATALOGUE).length + 20, 'the catalogue and Node’s standard families')
    for (const name of families.keys())
      t.ok(onPanels.has(name), `${name in CATALOGUE ? PREFIX : ''}${name} is on a panel`)
    const perProcess = [
      'process_cpu_user_seconds_total',
      'process_open_fds',
      'process_resident_memory_bytes',
      'nodejs_heap_size_used_bytes',
      'nodejs_eventloop_lag_p99_seconds',
      'nodejs_gc_duration_seconds',
      'process_cpu_seconds_total',
      'worker_restarts_total'
    ]
    const rows = dashboard.panels.filter(p => p.type === 'row').map(p => p.title)
    t.match(rows, [
      'Overview',
      'Text hook',
      'Audio',
      'Vendors',
      'Processes (per worker)',
      'Front door',
      /Reload, drain/
    ])
    const processRow = rowPanels('Processes (per worker)')
    for (const name of perProcess) {
      const q = processRow
        .flatMap(p => p.targets ?? [])
        .find(x => seriesOf(x.expr).gateway.some(s => familyOf(s, families) === name))
      t.ok(q, `the process row shows ${name}`)
      t.match(q?.expr, /by \([^)]*\bworker\b[^)]*\)/, `${name}: one series per worker`)
    }
  }
)

/** The panels under a row, in dashboard order (rows laid out expanded). */
function rowPanels(title: string): Panel[] {
  const out: Panel[] = []
  let inside = false
  for (const p of dashboard.panels) {
    if (p.type === 'row') inside = p.title === title
    else if (inside) out.push(p)
  }
  return out
}

/** Failures no alert should watch; each says why. */
const UNCOUNTED: Record<string, string> = {
  QUERY_INVALID: 'an operator’s malformed query to the admin API (GET /admin/calls): answered 400, nothing is wrong'
}

t.test('every failure of the failure table is watched by an alert, and every alert has its runbook', async t => {
  const page = readFileSync(join(root, 'docs', 'reference', 'errors.md'), 'utf8')
  const region = page.slice(page.indexOf('<!-- generated: errors'), page.indexOf('<!-- end generated -->'))
  const table = [...region.matchAll(/^\| `([A-Z_]+)` \|/gm)].map(m => m[1])
  t.ok(table.length >= 30, 'the failure table (docs/reference/errors.md) is found')
  t.same(table.slice().sort(), Object.keys(CODES).sort(), 'the failure table is every code of gateway/errors.ts')
  const watched = new Map<string, string[]>()
  for (const r of rules)
    for (const code of (r.annotations?.failures ?? '').split(/\s+/).filter(Boolean)) {
      t.ok(code in CODES, `${r.alert}: ${code} is an error code`)
      watched.set(code, [...(watched.get(code) ?? []), r.alert])
    }
  for (const code of table)
    if (UNCOUNTED[code] === undefined) t.ok(watched.has(code), `${code} is watched by an alert`)
    else t.notOk(watched.has(code), `${code} is watched by no alert (${UNCOUNTED[code]})`)
  const runbooks = join(root, 'docs', 'runbooks')
  for (const r of rules) {
    t.equal(
      r.annotations?.runbook_url,
      `{{ $externalLabels.runbook_base_url }}/${r.alert}.md`,
      `${r.alert} links its runbook under the base URL of the external label runbook_base_url`
    )
    const file = join(runbooks, `${r.alert}.md`)
    t.ok(existsSync(file), `docs/runbooks/${r.alert}.md exists`)
    if (!existsSync(file)) continue
    const text = readFileSync(file, 'utf8')
    t.match(text, new RegExp(`^# ${r.alert}\\n`), `${r.alert}: the runbook is titled by the alert`)
    for (const h of ['## What it means', '## How to confirm', '## What to do']) t.match(text, h, `${r.alert}: ${h}`)
    for (const code of (r.annotations?.failures ?? '').split(/\s+/).filter(Boolean))
      t.match(text, `\`${code}\``, `${r.alert}'s runbook names ${code}`)
    t.match(r.labels?.severity, /^(page|ticket)$/, `${r.alert}: a severity`)
  }
  const alerts = new Set(rules.map(r => r.alert))
  for (const f of readdirSync(runbooks))
    t.ok(alerts.has(f.replace(/\.md$/, '')), `docs/runbooks/${f} belongs to an alert (no orphan runbook)`)
})

interface PromtoolTest {
  input_series: { series: string; values: string }[]
  alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[]
  external_labels?: Record<string, string>
}

t.test('every alert has a promtool test in which it fires on a first event', async t => {
  const tests = (parse(readFileSync(join(root, 'ops', 'alerts.test.yml'), 'utf8')) as { tests: PromtoolTest[] }).tests
  for (const r of rules) {
    const firing = tests.filter(x =>
      (x.alert_rule_test ?? []).some(a => a.alertname === r.alert && a.exp_alerts.length > 0)
    )
    t.ok(firing.length > 0, `${r.alert}: a test where it fires`)
    t.ok(
      firing.every(x => x.external_labels?.runbook_base_url !== undefined),
      `${r.alert}: its tests render runbook_url from the external label`
    )
    // Counters it takes increase() or rate() of: in a firing test, each starts absent or at 0 (a first event).
    const counters = [...r.expr.matchAll(/(?:increase|rate)\(\s*(\w+)/g)].map(m => m[1])
    for (const name of counters)
      t.ok(
        firing.some(x =>
          x.input_series.some(s => s.series.startsWith(`${name}{`) && /^(_ 0|0)\b/.test(s.values.trim()))
        ),
        `${r.alert}: ${name} starts absent or at 0 in a test where the alert fires`
      )
  }
})

t.test('panels filter by the $instance and $route variables', async t => {
  const vars = (dashboard as unknown as { templating: { list: { name: string; query?: { query: string } }[] } })
    .templating.list
  t.match(
    vars.find(v => v.name === 'instance')?.query?.query,
    /up\{job="assist-gateway"\}/,
    '$instance: the scraped instances'
  )
  t.ok(
    vars.some(v => v.name === 'route'),
    '$route: the configured routes'
  )
  const families = await exported()
  for (const p of panels)
    for (const x of p.targets ?? []) {
      for (const m of x.expr.matchAll(
        /(?<![\w:])(assist_gateway_[a-z0-9_]+|process_[a-z0-9_]+|nodejs_[a-z0-9_]+|up)(\{[^}]*\})?/g
      )) {
        if (m[1] === 'up' && m[2] === undefined) continue
        t.match(m[2] ?? '', /instance=~"\$instance"/, `panel "${p.title}": ${m[1]} by $instance`)
        const f = familyOf(m[1].replace(/^assist_gateway_/, ''), families)
        const labels: readonly string[] =
          f !== null && f in CATALOGUE ? CATALOGUE[f as keyof typeof CATALOGUE].labels : []
        if (labels.includes('route')) t.match(m[2] ?? '', /route=~"\$route"/, `panel "${p.title}": ${m[1]} by $route`)
      }
    }
})

t.test('a row per tenant (issue 33 item 5): $tenant repeats a row whose panels read the tenant series', async t => {
  const vars = (dashboard as unknown as { templating: { list: { name: string; query?: { query: string } }[] } })
    .templating.list
  t.match(vars.find(v => v.name === 'tenant')?.query?.query, /tenant_legs_active\{[^}]*\}, tenant\)/, '$tenant')
  const row = (dashboard.panels as (Panel & { repeat?: string })[]).find(p => p.type === 'row' && p.repeat === 'tenant')
  t.ok(row, 'a row repeated by $tenant')
  const inRow = rowPanels(row?.title ?? '')
  const read = new Set(inRow.flatMap(p => (p.targets ?? []).flatMap(x => seriesOf(x.expr).gateway)))
  for (const name of ['tenant_legs_active', 'tenant_legs_total', 'tenant_utterances_total', 'tenant_refusals_total'])
    t.ok(read.has(name), `the tenant row shows ${name}`)
  for (const p of inRow)
    for (const x of p.targets ?? []) t.match(x.expr, /tenant="\$tenant"/, `panel "${p.title}": one tenant per row`)
})

t.test('the PrometheusRule of ops/k8s/monitoring carries the groups of ops/alerts.yml, and validates', async t => {
  const rule = objectsOf(readFileSync(join(root, 'ops', 'k8s', 'monitoring', 'prometheusrule.yaml'), 'utf8'))[0]
  t.equal(rule.kind, 'PrometheusRule')
  t.equal(schemaProblem(rule), null, 'valid against prometheus-operator’s PrometheusRule schema')
  const alerts = parse(readFileSync(join(root, 'ops', 'alerts.yml'), 'utf8')) as { groups: unknown }
  t.same(rule.spec.groups, alerts.groups, 'the same groups and rules as ops/alerts.yml')
  const kustomization = readFileSync(join(root, 'ops', 'k8s', 'monitoring', 'kustomization.yaml'), 'utf8')
  t.match(kustomization, /- prometheusrule\.yaml/, 'applied with the ServiceMonitor')
})

t.test('the compose Prometheus sets the runbook base URL the alerts link under', async t => {
  const prometheus = parse(readFileSync(join(root, 'ops', 'prometheus.yml'), 'utf8')) as {
    global: { external_labels?: Record<string, string> }
  }
  t.match(prometheus.global.external_labels?.runbook_base_url, /^https?:\/\//)
})
