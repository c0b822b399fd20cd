import t from 'tap'
import { execFile } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { basename, dirname, join, posix, relative } from 'node:path'
import { promisify } from 'node:util'
import { parse, parseAllDocuments } from 'yaml'
import { loadConfig } from '../../gateway/config/load'
import type { Config } from '../../gateway/config/types'
import { CATALOGUE } from '../../gateway/telemetry/catalogue'
import { idleBytes, planWorkers } from '../../gateway/workers/capacity'
import { type K8sObject, manifestsUnder, objectsOf, schemaProblem } from '../helpers/k8s'

// What the container image, docker-compose.yml and ops/k8s/ promise, checked without a Docker engine
// (CI has none): structure, ports and paths against the gateway configs they run, and `check` on every
// shipped config with the environment that runs it.

const root = join(__dirname, '..', '..')
const run = promisify(execFile)
const read = (p: string): string => readFileSync(join(root, p), 'utf8')
const yamlOf = (p: string): any => parse(read(p), { merge: true })
const BIN = join(root, 'bin', 'assist-gateway.js')
/** A pinned tag: a full version, never latest. */
const PINNED = /^[a-z0-9./_-]+:v?\d+\.\d+\.\d+[a-z0-9.-]*$/

/** Port and path of a healthcheck's `fetch('http://127.0.0.1:…/path')` (the port may be `'+(process.env.PORT||N)+'`). */
function fetchTarget(code: string | undefined): { port: number; path: string } | null {
  const m = /^fetch\('http:\/\/127\.0\.0\.1:(?:'\+\(process\.env\.PORT\|\|(\d+)\)\+'|(\d+))(\/\w+)'\)/.exec(code ?? '')
  return m === null ? null : { port: Number(m[1] ?? m[2]), path: m[3] }
}

/** `${NAME}` references without a default: the variables the environment must provide. */
function requiredVars(text: string): string[] {
  return [...new Set([...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map(m => m[1]))].sort()
}

/** The built CLI's `check`, in an environment holding only PATH and the given variables. */
async function check(file: string, env: Record<string, string>): Promise<{ code: number; out: string }> {
  try {
    const r = await run(process.execPath, [BIN, 'check', '--config', file], {
      env: { PATH: process.env.PATH ?? '', ...env },
      cwd: root
    })
    return { code: 0, out: r.stdout + r.stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: typeof e.code === 'number' ? e.code : -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }
  }
}

// ---- the Dockerfile ----

interface Instruction {
  op: string
  args: string
}

function dockerfile(): { stages: Instruction[][]; all: Instruction[] } {
  const lines = read('ops/Dockerfile')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map(l => l.trim())
    .filter(l => l !== '' && !l.startsWith('#'))
  const all = lines.map(l => {
    const [op, ...rest] = l.split(/\s+/)
    return { op: op.toUpperCase(), args: rest.join(' ') }
  })
  const stages: Instruction[][] = []
  for (const i of all) {
    if (i.op === 'FROM') stages.push([])
    stages.at(-1)?.push(i)
  }
  return { stages, all }
}

function imageConfigPath(): string {
  const env = dockerfile()
    .stages.at(-1)!
    .filter(i => i.op === 'ENV')
    .map(i => i.args)
    .join(' ')
  const m = /GATEWAY_CONFIG=\/app\/(\S+)/.exec(env)
  if (m === null) throw new Error('the runtime stage sets no GATEWAY_CONFIG=/app/…')
  return m[1]
}

t.test('the image is built in two stages and runs production files only, not as root', async t => {
  const { stages, all } = dockerfile()
  t.ok(stages.length >= 2, 'multi-stage')
  const args = argDefaults(all)
  for (const from of all.filter(i => i.op === 'FROM')) {
    const image = from.args.split(/\s+/)[0].replace(/^\$\{(\w+)\}$/, (_m, name: string) => args[name] ?? '')
    t.match(image, PINNED, `FROM ${from.args}: pinned base image`)
  }
  const [build, runtime] = [stages[0], stages.at(-1)!]
  t.match(build[0].args, /\bAS build$/i)
  const buildRuns = build.filter(i => i.op === 'RUN').map(i => i.args)
  t.ok(
    buildRuns.some(r => /tsc -p tsconfig\.json/.test(r)),
    'the build stage compiles TypeScript'
  )
  t.ok(
    buildRuns.some(r => /npm prune --omit=dev/.test(r)),
    'dev dependencies are pruned'
  )
  t.ok(
    buildRuns.some(r => /node ops\/prune-uws\.js/.test(r)),
    'other platforms’ uWS binaries are deleted'
  )
  t.notOk(
    runtime.some(i => i.op === 'RUN' && /npm (ci|install)/.test(i.args)),
    'no install in the runtime stage'
  )
  const copies = runtime.filter(i => i.op === 'COPY').map(i => i.args)
  t.ok(
    copies.some(c => /--from=build \/app\/node_modules/.test(c)),
    'node_modules come from the pruned build stage'
  )
  for (const c of all.filter(i => i.op === 'COPY' || i.op === 'ADD'))
    t.notMatch(c.args, /(^|\s)(\.\/)?tests?\b|\btsconfig\.tests/, `${c.op} ${c.args}: no test file`)
  const user = runtime.filter(i => i.op === 'USER').at(-1)?.args ?? 'root'
  t.match(user, /^[1-9]\d*(:\d+)?$/, 'a numeric non-root user (Kubernetes runAsNonRoot can verify it)')
  const ignored = read('.dockerignore').split('\n')
  for (const p of ['tests', 'node_modules', 'dist', '.git']) t.ok(ignored.includes(p), `.dockerignore lists ${p}`)
})

function argDefaults(all: Instruction[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (const i of all.filter(x => x.op === 'ARG')) {
    const [k, v] = i.args.split('=')
    if (v !== undefined) out[k] = v
  }
  return out
}

t.test('the image config listens where a container can be reached, and EXPOSE and HEALTHCHECK follow it', async t => {
  const file = imageConfigPath()
  const { all, stages } = dockerfile()
  t.ok(
    stages.at(-1)!.some(i => i.op === 'COPY' && i.args.split(/\s+/).includes(file)),
    `${file} is copied into the image`
  )
  const cfg = loadConfig(join(root, file), {})
  t.equal(cfg.listen.host, '0.0.0.0', 'public listener on every interface of the container')
  t.equal(cfg.metrics.host, '0.0.0.0', 'metrics reachable from Prometheus in another container')
  t.equal(cfg.admin.host, '127.0.0.1', 'the admin API on the container loopback')
  const exposed = all
    .filter(i => i.op === 'EXPOSE')
    .flatMap(i => i.args.split(/\s+/))
    .map(p => Number(p.replace(/\/tcp$/, '')))
  t.same(exposed, [cfg.listen.port], 'EXPOSE is the public port; the metrics and admin ports are not exposed')
  const hc = all.filter(i => i.op === 'HEALTHCHECK')
  t.equal(hc.length, 1)
  const cmd = JSON.parse(hc[0].args.slice(hc[0].args.indexOf('CMD') + 3).trim()) as string[]
  t.same(cmd.slice(0, 2), ['node', '-e'], 'exec form, with node only (no curl in the image)')
  const target = fetchTarget(cmd[2])
  t.ok(target, 'fetches a path on the loopback')
  t.equal(target?.port, cfg.listen.port, 'on the public port of the image config (PORT overrides both)')
  t.equal(target?.path, '/livez')
})

t.test('prune-uws keeps only the binary of the running platform, architecture and Node ABI', async t => {
  const mine = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`
  const others = [
    'uws_darwin_arm64_115.node',
    'uws_linux_arm64_115.node',
    'uws_win32_x64_108.node',
    'uws_linux_x64_93.node'
  ]
  const files = Object.fromEntries([mine, ...others].map(n => [n, 'x']))
  const dir = t.testdir({
    pkg: {
      'package.json': '{}',
      binaries: files,
      dist: { 'index.js': '', 'uws_linux_x64_115.node': 'x' },
      src: { 'uws.js': '' }
    },
    empty: { binaries: { 'uws_os2_x86_1.node': 'x' } }
  })
  await run(process.execPath, [join(root, 'ops', 'prune-uws.js'), join(dir, 'pkg'), '--no-load-check'])
  t.same(readdirSync(join(dir, 'pkg', 'binaries')), [mine])
  t.same(readdirSync(join(dir, 'pkg', 'dist')), ['index.js'], 'the unused dist/*.node copies go too')
  await t.rejects(
    run(process.execPath, [join(root, 'ops', 'prune-uws.js'), join(dir, 'empty'), '--no-load-check']),
    { code: 1 },
    'no binary for this Node: the build fails instead of shipping the pure-JS fallback'
  )
})

// ---- the runtime: engines is exactly the Node that serves ----

/** NODE_MODULE_VERSION of each Node major (node/src/node_version.h): the ABI in a uWS binary's name. */
const ABI: Record<number, number> = { 16: 93, 17: 102, 18: 108, 19: 111, 20: 115, 21: 120, 22: 127, 23: 131, 24: 137 }

t.test('engines allows exactly the Node majors the pinned uWS build has a binary for and undici runs on', async t => {
  const engines = JSON.parse(read('package.json')).engines.node as string
  const m = /^>=(\d+)\.(\d+)\.(\d+) <(\d+)$/.exec(engines)
  t.ok(m, `engines.node (${engines}) is a lower bound and an exclusive upper major`)
  if (m === null) return
  const uws = join(root, 'node_modules', 'uWebSockets.js', 'binaries')
  const abis = new Set(readdirSync(uws).map(n => Number(/_(\d+)\.node$/.exec(n)?.[1])))
  const undici = /^>=(\d+)\.(\d+)\.(\d+)$/.exec(JSON.parse(read('node_modules/undici/package.json')).engines.node)
  t.ok(undici, 'undici states its lowest Node')
  const served = Object.keys(ABI)
    .map(Number)
    .filter(major => abis.has(ABI[major]) && major >= Number(undici?.[1]))
  const allowed = Object.keys(ABI)
    .map(Number)
    .filter(major => major >= Number(m[1]) && major < Number(m[4]))
  t.same(allowed, served, 'every allowed major has a native binary and runs undici; no served major is left out')
  t.same(m.slice(1, 4), undici?.slice(1, 4), "the lower bound is undici's own")
  t.ok(abis.has(Number(process.versions.modules)), `the Node running the tests (${process.version}) has its binary`)
})

// ---- docker-compose.yml ----

const compose = (): Record<string, any> => yamlOf('docker-compose.yml').services

function gatewayConfigOf(service: any): string {
  const cmd = service.command as string[]
  const i = cmd.indexOf('--config')
  return i < 0 ? imageConfigPath() : cmd[i + 1]
}

/** A compose environment value as compose resolves it with nothing set: `${X:-d}` gives d. */
function composeEnv(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env ?? {}).map(([k, v]) => [k, String(v).replace(/\$\{\w+:-([^}]*)\}/g, '$1')])
  )
}

t.test('compose builds one image once and every other service of it reuses it', async t => {
  const services = compose()
  const builders = Object.entries(services).filter(([, s]) => s.build !== undefined)
  t.equal(builders.length, 1, 'exactly one service builds')
  const [, builder] = builders[0]
  t.equal(builder.build.dockerfile, 'ops/Dockerfile')
  t.equal(builder.build.context, '.')
  t.ok(typeof builder.image === 'string', 'the built image is named, so others can reuse it')
  const users = Object.entries(services).filter(([, s]) => s.image === builder.image)
  t.ok(users.length >= 4, 'the gateways and the emulators all run the built image')
  for (const [name, s] of Object.entries(services)) {
    t.ok(typeof s.image === 'string', `${name} names its image`)
    if (s.image !== builder.image) t.match(s.image, PINNED, `${name}: ${s.image} is pinned`)
    t.notMatch(s.image, /:latest$|^[^:]+$/, `${name}: no latest or untagged image`)
  }
})

t.test('every compose service has a healthcheck and every start waits on an explicit condition', async t => {
  const services = compose()
  for (const [name, s] of Object.entries(services)) {
    t.ok(Array.isArray(s.healthcheck?.test) && s.healthcheck.test.length > 1, `${name} has a healthcheck`)
    t.notOk(Array.isArray(s.depends_on), `${name}: depends_on names a condition for each dependency`)
    for (const [dep, d] of Object.entries((s.depends_on ?? {}) as Record<string, any>)) {
      t.ok(services[dep] !== undefined, `${name} depends on an existing service ${dep}`)
      t.match(d.condition, /^service_(healthy|started|completed_successfully)$/, `${name} → ${dep}: a condition`)
    }
  }
  const gateways = Object.entries(services).filter(([, s]) => s.command?.[0] === 'serve')
  t.equal(gateways.length, 2, 'two gateway instances')
  for (const [name, s] of gateways)
    for (const dep of ['redis', 'vendor-a', 'vendor-b'])
      t.equal(s.depends_on?.[dep]?.condition, 'service_healthy', `${name} starts once ${dep} is healthy`)
  t.equal(services.grafana.depends_on?.prometheus?.condition, 'service_healthy')
})

t.test('compose ports, healthchecks and environment match the gateway config each service runs', async t => {
  const services = compose()
  for (const [name, s] of Object.entries(services)) {
    const [cmd] = (s.command ?? []) as string[]
    const test = (s.healthcheck?.test ?? []) as string[]
    if (cmd === 'serve') {
      const file = gatewayConfigOf(s)
      const text = read(file)
      const env = composeEnv(s.environment)
      for (const v of requiredVars(text)) t.ok(env[v] !== undefined, `${name} sets ${v}, which ${file} requires`)
      const cfg: Config = loadConfig(join(root, file), env)
      t.equal(cfg.listen.host, '0.0.0.0', `${name}: public listener reachable`)
      t.equal(cfg.metrics.host, '0.0.0.0', `${name}: metrics reachable by Prometheus on the compose network`)
      const published = ((s.ports ?? []) as string[]).map(p => Number(p.split(':').at(-1)))
      t.same(published, [cfg.listen.port], `${name} publishes the public port only, never metrics or admin`)
      t.same(test.slice(0, 3), ['CMD', 'node', '-e'])
      t.same(fetchTarget(test[3]), { port: cfg.listen.port, path: '/livez' }, `${name}: healthcheck on /livez`)
    } else if (cmd === 'vendor') {
      const port = Number(s.command[s.command.indexOf('--port') + 1])
      t.equal(s.command[s.command.indexOf('--host') + 1], '0.0.0.0', `${name} listens for the gateways`)
      t.same(fetchTarget(test[3]), { port, path: '/healthz' }, `${name}: healthcheck on the emulator's /healthz`)
    }
  }
})

t.test('Prometheus loads the alert rules and scrapes every gateway on its metrics port', async t => {
  const services = compose()
  const prom = yamlOf('ops/prometheus.yml')
  const mounts = new Map(
    (services.prometheus.volumes as string[]).map(v => {
      const [src, dst] = v.split(':')
      return [posix.normalize(src), dst]
    })
  )
  const configAt = mounts.get('ops/prometheus.yml')
  t.equal(configAt, '/etc/prometheus/prometheus.yml', 'the default config path of the image')
  t.ok(prom.rule_files.includes('alerts.yml'))
  t.equal(mounts.get('ops/alerts.yml'), posix.join(posix.dirname(configAt!), 'alerts.yml'), 'rules beside it')
  const job = prom.scrape_configs.find((j: any) => j.job_name === 'assist-gateway')
  t.ok(job, 'job "assist-gateway" (the up == 0 alert selects it)')
  const gateways = Object.entries(services).filter(([, s]) => s.command?.[0] === 'serve')
  const expected = gateways.map(([name, s]) => {
    const cfg = loadConfig(join(root, gatewayConfigOf(s)), composeEnv(s.environment))
    return `${name}:${cfg.metrics.port}`
  })
  t.same([...job.static_configs.flatMap((c: any) => c.targets)].sort(), expected.sort())
  const up = yamlOf('ops/alerts.yml')
    .groups.flatMap((g: any) => g.rules)
    .find((r: any) => /^up\{/.test(r.expr))
  t.equal(up?.expr, 'up{job="assist-gateway"} == 0', 'an alert when an instance cannot be scraped')
  t.equal(up?.labels?.severity, 'page')
})

t.test('Grafana is provisioned with the Prometheus datasource and the dashboard', async t => {
  const services = compose()
  const mounts = new Map(
    (services.grafana.volumes as string[]).map(v => {
      const [src, dst] = v.split(':')
      return [posix.normalize(src), dst]
    })
  )
  for (const kind of ['datasources', 'dashboards'])
    t.equal(mounts.get(`ops/grafana/provisioning/${kind}`), `/etc/grafana/provisioning/${kind}`)
  const dash = mounts.get('ops/grafana-dashboard.json')
  t.ok(dash?.endsWith('.json'), 'the dashboard file is mounted')
  const dsDir = join(root, 'ops', 'grafana', 'provisioning', 'datasources')
  const sources = readdirSync(dsDir).flatMap(f => parse(readFileSync(join(dsDir, f), 'utf8')).datasources)
  const ds = sources.find((d: any) => d.type === 'prometheus')
  t.equal(ds?.url, 'http://prometheus:9090', 'the compose Prometheus')
  t.equal(ds?.isDefault, true)
  const dbDir = join(root, 'ops', 'grafana', 'provisioning', 'dashboards')
  const providers = readdirSync(dbDir).flatMap(f => parse(readFileSync(join(dbDir, f), 'utf8')).providers)
  t.ok(
    providers.some((p: any) => p.type === 'file' && p.options.path === posix.dirname(dash ?? '')),
    'a file provider reads the folder the dashboard is mounted in'
  )
  const dashboard = JSON.parse(read('ops/grafana-dashboard.json'))
  t.equal(dashboard.__inputs, undefined, 'no import-time inputs: file provisioning does not fill them')
  const vars = new Set(dashboard.templating.list.filter((v: any) => v.type === 'datasource').map((v: any) => v.name))
  const uids = new Set<string>()
  JSON.stringify(dashboard, (k, v) => {
    if (k === 'datasource' && v?.uid !== undefined) uids.add(v.uid)
    return v
  })
  t.ok(uids.size > 0)
  for (const uid of uids) t.ok(vars.has(/^\$\{(\w+)\}$/.exec(uid)?.[1]), `datasource ${uid} is a dashboard variable`)
})

// ---- Kubernetes ----

const K8S = join(root, 'ops', 'k8s')
const manifests = (): { file: string; object: K8sObject }[] => manifestsUnder(K8S, root)
/** The one object of a kind and name among the manifests under ops/k8s/base. */
function base(kind: string, name = 'assist-gateway'): any {
  const found = manifests().filter(
    m =>
      m.file.startsWith('ops/k8s/base/') &&
      m.file !== 'ops/k8s/base/hpa-live-legs.yaml' &&
      m.object.kind === kind &&
      m.object.metadata.name === name
  )
  if (found.length !== 1) throw new Error(`ops/k8s/base has ${found.length} ${kind} ${name}`)
  return found[0].object
}
/** The gateway config the Deployment mounts, as written (YAML), and the container. */
function mounted(): { text: string; cfg: any; c: any; dep: any; cm: any } {
  const dep = base('Deployment')
  const cm = base('ConfigMap')
  const [c] = dep.spec.template.spec.containers
  const configPath = c.args[c.args.indexOf('--config') + 1] as string
  const text = cm.data[basename(configPath)] as string
  return { text, cfg: parse(text), c, dep, cm }
}
const containerPort = (c: any, name: string): number => c.ports.find((p: any) => p.name === name)?.containerPort

t.test('every Kubernetes manifest validates against its API schema (kubernetes-models)', async t => {
  const all = manifests()
  t.ok(all.length >= 10, 'the base, the overlay and the monitoring manifests are found')
  for (const { file, object } of all)
    t.equal(schemaProblem(object), null, `${file}: ${object.kind} ${object.metadata.name} validates`)
  // The validation catches what it should: a port that is not a number, a missing container name.
  const bad = structuredClone(base('Deployment'))
  bad.spec.template.spec.containers[0].ports[0].containerPort = 'eighty'
  t.match(schemaProblem(bad), /containerPort must be integer/)
})

t.test(
  'the kustomizations list every manifest of their folder (hpa-live-legs.yaml is the documented alternative)',
  async t => {
    for (const dir of ['base', 'monitoring', 'overlays/fleet-redis']) {
      const k = parse(read(`ops/k8s/${dir}/kustomization.yaml`))
      const patches = new Set((k.patches ?? []).map((p: any) => p.path))
      const files = readdirSync(join(K8S, dir)).filter(
        n =>
          /\.ya?ml$/.test(n) &&
          n !== 'kustomization.yaml' &&
          !patches.has(n) &&
          objectsOf(read(`ops/k8s/${dir}/${n}`)).length > 0
      )
      const listed = (k.resources as string[]).filter(r => /\.ya?ml$/.test(r))
      t.same(listed.sort(), files.filter(f => f !== 'hpa-live-legs.yaml').sort(), `ops/k8s/${dir}`)
    }
    t.same(parse(read('ops/k8s/kustomization.yaml')).resources, ['base'], 'ops/k8s renders the base')
    t.ok((parse(read('ops/k8s/overlays/fleet-redis/kustomization.yaml')).resources as string[]).includes('../../base'))
  }
)

t.test(
  'ports: the public Service reaches http only, metrics has its own Service, admin stays on loopback, fleet is pod to pod',
  async t => {
    const { cfg, c, dep, text } = mounted()
    const svc = base('Service')
    const metricsSvc = base('Service', 'assist-gateway-metrics')
    const np = base('NetworkPolicy')
    t.same(dep.spec.selector.matchLabels, svc.spec.selector, 'the Service selects the pods')
    t.match(dep.spec.template.metadata.labels, svc.spec.selector)
    t.match(c.image, PINNED, 'a pinned image tag')
    t.equal(containerPort(c, 'http'), cfg.listen.port, 'containerPort http = listen.port')
    t.equal(containerPort(c, 'metrics'), cfg.metrics.port, 'containerPort metrics = metrics.port')
    t.equal(containerPort(c, 'fleet'), cfg.fleet.port, 'containerPort fleet = fleet.port')
    t.equal(cfg.listen.host, '0.0.0.0')
    t.equal(cfg.metrics.host, '0.0.0.0', 'metrics on the pod IP, for Prometheus')
    t.equal(cfg.admin.host, '127.0.0.1', 'the admin API on the pod’s loopback only')
    t.notOk(
      c.ports.some((p: any) => p.containerPort === cfg.admin.port),
      'no containerPort for the admin API'
    )
    t.equal(
      cfg.fleet.advertiseUrl,
      `ws://\${POD_IP}:${cfg.fleet.port}`,
      'the other pods relay to this pod’s fleet port'
    )
    t.equal(cfg.fleet.secret, '${FLEET_SECRET}', 'the fleet secret comes from the environment')
    const env = new Map<string, any>(c.env.map((e: any) => [e.name, e]))
    for (const v of requiredVars(text)) t.ok(env.has(v), `the Deployment sets ${v}`)
    t.same(env.get('POD_IP')?.valueFrom, { fieldRef: { fieldPath: 'status.podIP' } })
    t.ok(env.get('FLEET_SECRET')?.valueFrom?.secretKeyRef, 'FLEET_SECRET from the Secret')
    const target = (p: any): number =>
      typeof p.targetPort === 'number' ? p.targetPort : containerPort(c, p.targetPort)
    t.same(
      svc.spec.ports.map((p: any) => target(p)),
      [cfg.listen.port],
      'the public Service: the public port only'
    )
    t.same(
      metricsSvc.spec.ports.map((p: any) => target(p)),
      [cfg.metrics.port],
      'the metrics Service: metrics only'
    )
    t.equal(metricsSvc.spec.clusterIP, 'None', 'headless: each pod is scraped on its own')
    const policyPort = (p: any): number => (typeof p.port === 'number' ? p.port : containerPort(c, p.port))
    t.same(np.spec.podSelector.matchLabels, svc.spec.selector, 'the NetworkPolicy applies to the gateway pods')
    const rules = np.spec.ingress as any[]
    const ruleOf = (port: number): any => rules.find(r => r.ports.map(policyPort).includes(port))
    t.equal(ruleOf(cfg.listen.port)?.from, undefined, 'the public port is open to all')
    t.ok(ruleOf(cfg.metrics.port)?.from?.[0]?.namespaceSelector, 'metrics: the monitoring namespace only')
    t.same(
      ruleOf(cfg.fleet.port)?.from,
      [{ podSelector: { matchLabels: svc.spec.selector } }],
      'fleet: the other gateway pods only'
    )
    t.notOk(ruleOf(cfg.admin.port), 'no network reaches the admin port')
    const probePort = (p: any): number =>
      typeof p.httpGet.port === 'number' ? p.httpGet.port : containerPort(c, p.httpGet.port)
    t.equal(c.livenessProbe.httpGet.path, '/livez')
    t.equal(c.readinessProbe.httpGet.path, '/readyz')
    for (const p of [c.livenessProbe, c.readinessProbe, c.startupProbe])
      t.equal(probePort(p), cfg.listen.port, `${p.httpGet.path} probed on the public listener`)
    t.notOk(dep.spec.template.metadata.annotations?.['prometheus.io/scrape'], 'no annotation scrape (a second job)')
  }
)

t.test(
  'an edited ConfigMap reloads by itself: serve --watch-config, the volume mounted whole (no subPath)',
  async t => {
    const { c, dep, cm } = mounted()
    t.ok(c.args.includes('--watch-config'), 'the Deployment runs serve --watch-config')
    const configPath = c.args[c.args.indexOf('--config') + 1] as string
    const mount = c.volumeMounts.find((m: any) => configPath.startsWith(`${m.mountPath}/`))
    t.ok(mount, 'the config file is on a mounted volume')
    t.equal(mount.subPath, undefined, 'mounted whole: a subPath mount is never updated by the kubelet')
    const volume = dep.spec.template.spec.volumes.find((v: any) => v.name === mount.name)
    t.equal(volume.configMap?.name, cm.metadata.name, 'from the ConfigMap')
  }
)

t.test('CPU and memory requests and limits agree with the workers serve starts from them', async t => {
  const { c } = mounted()
  const { requests, limits } = c.resources
  t.same(requests, limits, 'requests = limits (Guaranteed QoS)')
  t.notOk(
    c.env.some((e: any) => e.name === 'GATEWAY_WORKERS'),
    'the worker count comes from the CPU limit'
  )
  t.notOk(c.args.includes('--workers'))
  const cpus = /^(\d+)m$/.test(String(limits.cpu)) ? Number(String(limits.cpu).slice(0, -1)) / 1000 : Number(limits.cpu)
  const bytes = quantity(String(limits.memory))
  t.ok(Number.isInteger(cpus) && cpus >= 1, 'a whole number of CPUs: one worker each')
  // The cgroup the kubelet gives this container (cgroup v2), read by serve's own code on a 64-core node.
  const dir = t.testdir({
    cgroup: { 'cpu.max': `${cpus * 100000} 100000`, 'memory.max': String(bytes) },
    self: '0::/\n'
  })
  const plan = planWorkers({ parallelism: 64, paths: { root: join(dir, 'cgroup'), self: join(dir, 'self') } })
  t.match(plan, { ok: true, value: { workers: cpus } }, `${cpus} workers, and the memory limit holds them`)
  t.ok(bytes >= idleBytes(cpus) + cpus * 500 * 60 * 1024, 'room for 500 legs per worker at 60 KiB each beyond idle')
})

/** A Kubernetes memory quantity (Mi, Gi, M, G or bytes) in bytes. */
function quantity(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi|k|M|G)?$/.exec(q)
  if (m === null) throw new Error(`quantity ${q}`)
  const unit = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, k: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1
  return Number(m[1]) * unit
}

t.test('the grace period is derived from the drain settings: preStop + shutdown.deadlineSeconds + 10', async t => {
  const { cfg, c, dep } = mounted()
  const pod = dep.spec.template.spec
  const defaults = JSON.parse(read('schemas/gateway-config.schema.json')).properties.shutdown.properties
  const shutdown = (k: string): number => cfg.shutdown?.[k] ?? defaults[k].default
  const sleep = c.lifecycle.preStop.exec.command as string[]
  t.equal(sleep[0], 'sleep', 'preStop waits for the endpoints to drop the pod (the image has sleep)')
  const seconds = Number(sleep[1])
  t.ok(seconds >= 5, 'long enough for kube-proxy and load balancers to notice')
  t.equal(
    pod.terminationGracePeriodSeconds,
    seconds + shutdown('deadlineSeconds') + 10,
    'preStop + deadline + 5 (the main process cuts a worker 5 s past the deadline) + 5 to exit'
  )
  t.ok(
    shutdown('deadlineSeconds') >= shutdown('drainDelaySeconds') + shutdown('legDrainSeconds'),
    'the deadline covers the drain'
  )
  t.ok(
    c.livenessProbe.periodSeconds * c.livenessProbe.failureThreshold > shutdown('deadlineSeconds'),
    'liveness does not restart a draining pod (the public listener closes after the drain delay)'
  )
  t.match(
    read('ops/k8s/base/deployment.yaml'),
    /terminationGracePeriodSeconds = preStop sleep \+ shutdown\.deadlineSeconds/
  )
})

t.test('the pod runs as non-root, spread over nodes and zones, under a PodDisruptionBudget and an HPA', async t => {
  const { dep, c } = mounted()
  const pod = dep.spec.template.spec
  t.equal(pod.automountServiceAccountToken, false, 'no service-account token mounted: it never calls the API')
  t.equal(pod.securityContext.runAsNonRoot, true)
  t.ok(pod.securityContext.runAsUser > 0, 'a non-zero uid')
  t.equal(c.securityContext.allowPrivilegeEscalation, false)
  t.same(c.securityContext.capabilities.drop, ['ALL'])
  const spread = new Map((pod.topologySpreadConstraints as any[]).map(s => [s.topologyKey, s]))
  t.equal(
    spread.get('kubernetes.io/hostname')?.whenUnsatisfiable,
    'DoNotSchedule',
    'never two pods on one node while another is free'
  )
  t.ok(spread.get('topology.kubernetes.io/zone'), 'spread over zones')
  for (const s of spread.values()) t.same(s.labelSelector.matchLabels, dep.spec.selector.matchLabels)
  const pdb = base('PodDisruptionBudget')
  t.same(pdb.spec.selector.matchLabels, dep.spec.selector.matchLabels)
  t.equal(pdb.spec.maxUnavailable, 1)
  const hpa = base('HorizontalPodAutoscaler')
  t.same(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: dep.metadata.name })
  t.ok(hpa.spec.minReplicas >= 2, 'at least two pods: the PDB can let one go')
  t.match(hpa.spec.metrics, [{ type: 'Resource', resource: { name: 'cpu' } }])
  t.ok(
    hpa.spec.behavior.scaleDown.stabilizationWindowSeconds >= 300,
    'scale-down is slow: each removed pod drains legs'
  )
  const legs = objectsOf(read('ops/k8s/base/hpa-live-legs.yaml'))[0]
  t.match(legs.spec.metrics, [{ type: 'Pods', pods: { metric: { name: 'assist_gateway_audio_sessions_active' } } }])
  t.ok('audio_sessions_active' in CATALOGUE, 'the custom-metric variant scales on an exported metric')
})

t.test('Prometheus scrapes the metrics port under job="assist-gateway", the job the alerts select', async t => {
  const sm = manifests().find(m => m.object.kind === 'ServiceMonitor')?.object as any
  t.ok(sm, 'a ServiceMonitor (ops/k8s/monitoring)')
  const metricsSvc = base('Service', 'assist-gateway-metrics')
  t.match(metricsSvc.metadata.labels, sm.spec.selector.matchLabels, 'it selects the metrics Service')
  t.same(
    sm.spec.endpoints.map((e: any) => e.port),
    ['metrics']
  )
  t.equal(metricsSvc.metadata.labels[sm.spec.jobLabel], 'assist-gateway', 'jobLabel gives job="assist-gateway"')
  const plain = parse(read('ops/k8s/monitoring/prometheus-scrape.yml')).scrape_configs
  t.same(
    plain.map((j: any) => j.job_name),
    ['assist-gateway'],
    'the plain scrape job has the same name'
  )
  const keep = plain[0].relabel_configs.find((r: any) => r.action === 'keep')
  t.equal(keep.regex, `assist-gateway;${metricsSvc.metadata.labels['app.kubernetes.io/component']};metrics`)
  const tests = read('ops/alerts.test.yml')
  t.match(tests, /up\{job="assist-gateway", instance=/, 'the promtool rule tests use that job label')
  const up = parse(read('ops/alerts.yml'))
    .groups.flatMap((g: any) => g.rules)
    .find((r: any) => r.alert === 'AssistGatewayInstanceDown')
  t.equal(up?.expr, 'up{job="assist-gateway"} == 0')
})

t.test(
  'the fleet-redis overlay adds a Redis reachable from the gateway pods only and points REDIS_URL at it',
  async t => {
    const dir = 'ops/k8s/overlays/fleet-redis/'
    const own = manifests()
      .filter(m => m.file.startsWith(dir))
      .map(m => m.object)
    const redis = own.find(o => o.kind === 'Deployment') as any
    const svc = own.find(o => o.kind === 'Service') as any
    const np = own.find(o => o.kind === 'NetworkPolicy') as any
    t.match(redis.spec.template.spec.containers[0].image, PINNED)
    t.same(svc.spec.selector, redis.spec.selector.matchLabels)
    t.same(np.spec.ingress, [
      {
        from: [{ podSelector: { matchLabels: base('Deployment').spec.selector.matchLabels } }],
        ports: [{ port: 'redis', protocol: 'TCP' }]
      }
    ])
    const patch = parse(read(`${dir}redis-url.yaml`))
    const env = patch.spec.template.spec.containers[0].env.find((e: any) => e.name === 'REDIS_URL')
    t.equal(env.value, `redis://${svc.metadata.name}:${svc.spec.ports[0].port}`)
    t.equal(env.valueFrom, null, 'the Secret reference is removed, not merged beside the value')
  }
)

// ---- every shipped gateway config passes `check` ----

t.test('every shipped gateway config passes the built CLI’s check, with the environment that runs it', async t => {
  if (!existsSync(join(root, 'dist', 'gateway', 'cli.js'))) {
    t.fail('dist/ is missing: run npm run build (or npx tsc -p tsconfig.json) first')
    return
  }
  const services = compose()
  const composeEnvOf = new Map<string, Record<string, string>>()
  for (const s of Object.values(services))
    if (s.command?.[0] === 'serve') composeEnvOf.set(gatewayConfigOf(s), composeEnv(s.environment))
  const files: string[] = []
  const walk = (d: string): void => {
    for (const n of readdirSync(d)) {
      const p = join(d, n)
      if (statSync(p).isDirectory()) walk(p)
      else if (/\.ya?ml$/.test(n) && parseAllDocuments(readFileSync(p, 'utf8'))[0]?.toJS()?.routes !== undefined)
        files.push(relative(root, p))
    }
  }
  walk(join(root, 'ops'))
  for (const f of ['ops/gateway.yaml', 'ops/container.yaml', 'ops/compose-gateway.yaml'])
    t.ok(files.includes(f), `${f} is found and checked`)
  for (const f of files) {
    const env = composeEnvOf.get(f) ?? {}
    const r = await check(join(root, f), env)
    t.equal(r.code, 0, `check ${f}${Object.keys(env).length > 0 ? ` (with ${Object.keys(env).join(', ')})` : ''}`, {
      output: r.out
    })
  }
  // The defaults-only configs must not depend on a variable the image does not set.
  const bare = await check(join(root, imageConfigPath()), {})
  t.equal(bare.code, 0, 'the image config passes with an empty environment', { output: bare.out })
})

t.test('the Kubernetes ConfigMap’s config passes the built CLI’s check, with the Deployment’s environment', async t => {
  const { dep, cm } = { dep: base('Deployment'), cm: base('ConfigMap') }
  const [c] = dep.spec.template.spec.containers
  const env = Object.fromEntries(c.env.map((e: any) => [e.name, `k8s-${e.name.toLowerCase()}-value`]))
  env.REDIS_URL = 'redis://redis:6379'
  env.POD_IP = '10.0.0.7'
  const configPath = c.args[c.args.indexOf('--config') + 1] as string
  t.equal(dirname(configPath), c.volumeMounts.find((m: any) => configPath.startsWith(m.mountPath)).mountPath)
  const dir = t.testdir({ [basename(configPath)]: cm.data[basename(configPath)] })
  const r = await check(join(dir, basename(configPath)), env)
  t.equal(r.code, 0, `check the ConfigMap's ${basename(configPath)} (with ${Object.keys(env).join(', ')})`, {
    output: r.out
  })
})
