import t from 'tap'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { type K8sObject, objectsOf, schemaProblem } from '../helpers/k8s'

// The shipped ops files through the tools that read them: `kubectl kustomize` renders every kustomization
// under ops/k8s and each rendered object validates against its API schema; `promtool` checks the alert rules
// and runs their unit tests (ops/alerts.test.yml). Each part runs when its tool is installed (.ci/run
// installs both: Debian's kubernetes-client and prometheus packages) and says so when it is not.

const root = join(__dirname, '..', '..')
const run = promisify(execFile)

async function tool(cmd: string, args: string[]): Promise<{ code: number; out: string; err: string }> {
  try {
    const r = await run(cmd, args, { cwd: root, maxBuffer: 16 * 1024 * 1024 })
    return { code: 0, out: r.stdout, err: r.stderr }
  } catch (err) {
    const e = err as { code?: number | string; stdout?: string; stderr?: string }
    return { code: typeof e.code === 'number' ? e.code : -1, out: e.stdout ?? '', err: `${e.stderr ?? ''}${e.code}` }
  }
}

/** kubectl's embedded kustomize major version (0: kubectl is absent; kubectl 1.20, Debian 12's, says none: 2). */
async function kustomizeMajor(): Promise<number> {
  const v = await tool('kubectl', ['version', '--client', '-o', 'json'])
  if (v.code !== 0 && v.out === '') return 0
  const m = /"kustomizeVersion":\s*"v(\d+)/.exec(v.out)
  return m === null ? 2 : Number(m[1])
}

/** What each kustomization must render (kinds and names), to catch one that renders but drops a file. */
const RENDERS: Record<string, { needs: number; objects: string[] }> = {
  'ops/k8s/base': {
    needs: 2,
    objects: [
      'ConfigMap/assist-gateway',
      'Deployment/assist-gateway',
      'HorizontalPodAutoscaler/assist-gateway',
      'NetworkPolicy/assist-gateway',
      'PodDisruptionBudget/assist-gateway',
      'Service/assist-gateway',
      'Service/assist-gateway-metrics'
    ]
  },
  'ops/k8s/monitoring': { needs: 2, objects: ['ServiceMonitor/assist-gateway', 'PrometheusRule/assist-gateway'] },
  // Folders as resources and `patches:` need kustomize 4 or later (kubectl 1.21+).
  'ops/k8s': { needs: 4, objects: [] },
  'ops/k8s/overlays/fleet-redis': {
    needs: 4,
    objects: ['Deployment/assist-gateway-redis', 'Service/assist-gateway-redis', 'NetworkPolicy/assist-gateway-redis']
  }
}

t.test('kubectl kustomize renders every kustomization under ops/k8s, and every object validates', async t => {
  const major = await kustomizeMajor()
  if (major === 0) {
    t.pass('kubectl kustomize', {
      skip:
        'kubectl is not installed (.ci/run installs Debian’s kubernetes-client): the manifests are still ' +
        'validated file by file by tests/unit/ops/packaging.test.ts'
    })
    return
  }
  const rendered: Record<string, K8sObject[]> = {}
  for (const [dir, want] of Object.entries(RENDERS)) {
    if (major < want.needs) {
      t.pass(`kubectl kustomize ${dir}`, {
        skip: `kubectl's kustomize is v${major} (Debian 12's kubectl 1.20); this one needs v${want.needs}+`
      })
      continue
    }
    const r = await tool('kubectl', ['kustomize', dir])
    t.equal(r.code, 0, `kubectl kustomize ${dir}`, { stderr: r.err })
    const objects = objectsOf(r.out)
    rendered[dir] = objects
    const names = objects.map(o => `${o.kind}/${o.metadata.name}`)
    for (const o of want.objects) t.ok(names.includes(o), `${dir} renders ${o}`)
    for (const o of objects) t.equal(schemaProblem(o), null, `${dir}: ${o.kind} ${o.metadata.name} validates`)
  }
  if (rendered['ops/k8s'] !== undefined && rendered['ops/k8s/base'] !== undefined)
    t.same(rendered['ops/k8s'], rendered['ops/k8s/base'], 'ops/k8s is the base')
  const overlay = rendered['ops/k8s/overlays/fleet-redis']
  if (overlay !== undefined) {
    const dep = overlay.find(o => o.kind === 'Deployment' && o.metadata.name === 'assist-gateway') as any
    const env = dep.spec.template.spec.containers[0].env.find((e: any) => e.name === 'REDIS_URL')
    t.same(
      env,
      { name: 'REDIS_URL', value: 'redis://assist-gateway-redis:6379' },
      'REDIS_URL: the fleet’s Redis, no Secret'
    )
    t.equal(overlay.length, (rendered['ops/k8s/base']?.length ?? 0) + 3, 'the base and the three Redis objects')
  }
})

t.test('promtool checks the alert rules and their unit tests pass', async t => {
  const v = await tool('promtool', ['--version'])
  if (v.code !== 0) {
    t.pass('promtool', { skip: 'promtool is not installed (.ci/run installs Debian’s prometheus package)' })
    return
  }
  const check = await tool('promtool', ['check', 'rules', 'ops/alerts.yml'])
  t.equal(check.code, 0, 'promtool check rules ops/alerts.yml', { output: check.out + check.err })
  t.match(check.out, /SUCCESS: \d+ rules found/)
  const tests = await tool('promtool', ['test', 'rules', 'ops/alerts.test.yml'])
  t.equal(tests.code, 0, 'promtool test rules ops/alerts.test.yml', { output: tests.out + tests.err })
})
