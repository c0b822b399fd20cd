import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { CATALOGUE, PREFIX } from '../../../gateway/telemetry/metrics'

const root = join(__dirname, '..', '..', '..')
const known = new Set(Object.keys(CATALOGUE))

/** Prometheus's own per-target series, the one non-catalogue series an alert may query alone. */
const PROMETHEUS_UP = /^up\{job="assist-gateway"\} == 0$/

function metricNames(text: string): string[] {
  return [...text.matchAll(/assist_gateway_([a-z_]+)/g)].map(m => m[1].replace(/_(bucket|sum|count)$/, ''))
}

t.test('alert rules and the dashboard use only catalogue metrics', async t => {
  const alerts = parse(readFileSync(join(root, 'ops', 'alerts.yml'), 'utf8')) as {
    groups: { rules: { alert: string; expr: string }[] }[]
  }
  const dashboard = JSON.parse(readFileSync(join(root, 'ops', 'grafana-dashboard.json'), 'utf8')) as {
    panels: { title: string; targets: { expr: string }[] }[]
  }
  const exprs = [
    ...alerts.groups.flatMap(g => g.rules.map(r => ({ where: `alert ${r.alert}`, expr: r.expr }))),
    ...dashboard.panels.flatMap(p => p.targets.map(x => ({ where: `panel ${p.title}`, expr: x.expr })))
  ]
  t.ok(exprs.length > 10)
  for (const { where, expr } of exprs) {
    const names = metricNames(expr)
    t.ok(names.length > 0 || PROMETHEUS_UP.test(expr), `${where} queries a gateway metric (or Prometheus's up)`)
    for (const n of names)
      t.ok(
        known.has(n as keyof typeof CATALOGUE) || n.startsWith('process_') || n.startsWith('nodejs_'),
        `${where}: ${PREFIX}${n} is in the catalogue`
      )
  }
})
