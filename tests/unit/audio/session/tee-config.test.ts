import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { loadConfig } from '../../../../gateway/config/load'
import { ConfigError } from '../../../../gateway/errors'
import { buildRoute, routePools } from '../../../../gateway/route'
import { validateAll } from '../../../../gateway/check'
import { MemoryStore } from '../../../../gateway/store/memory'
import { forgetMappings, loadMapping } from '../../../../gateway/mapping/compile'
import { buildGeneration } from '../../../../gateway/server/reload'
import { createLogger } from '../../../../gateway/telemetry/log'
import { Metrics } from '../../../../gateway/telemetry/metrics'

// The route option `tee`: validated with the config, built into a runtime of its own per tee.

const route = (tee: string): string =>
  'routes:\n  demo:\n    mapping: mappings/json-events.yaml\n' +
  '    upstreams: [{ name: a, audio: "ws://127.0.0.1:9/x" }]\n' +
  `    tee:\n${tee}`

function problems(yaml: string, env: Record<string, string> = {}): string[] {
  const dir = t.testdir({ 'g.yaml': yaml })
  try {
    loadConfig(join(dir, 'g.yaml'), env)
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.map(p => `${p.pointer}: ${p.message}`)
    throw err
  }
  return []
}

t.test('a valid tee: defaults, resolved mapping, secrets, and a pool of its own', async t => {
  const dir = t.testdir({
    'g.yaml': route(
      '      - { name: shadow, mapping: mappings/passthrough.yaml, ' +
        'upstreams: [{ name: s, audio: "ws://127.0.0.1:9/y", credential: "${TEE_KEY}" }] }\n'
    )
  })
  const c = loadConfig(join(dir, 'g.yaml'), { TEE_KEY: 'tee-key-123456' })
  const tee = c.routes.demo.tee![0]
  t.equal(tee.results, 'drop', 'results defaults to drop')
  t.match(tee.mapping, /mappings\/passthrough\.yaml$/, 'the mapping path is resolved')
  t.ok(c.secrets.includes('tee-key-123456'), "a tee replica's credential is a secret")
  const rc = c.routes.demo
  const r = buildRoute(rc, loadMapping(rc.mapping), new MemoryStore('i'), c.health)
  t.equal(r.tees?.[0].runtime.name, 'demo/shadow', 'the tee runtime is labelled <route>/<tee>')
  t.equal(r.tees?.[0].runtime.pool.replicas[0].key, 'demo/shadow/s', 'its replicas are its own')
  t.equal(routePools(r).length, 2)
})

t.test('tee problems are reported with pointers, all at once', async t => {
  const got = problems(
    route(
      '      - { name: x, mapping: mappings/nope.yaml, upstreams: [{ name: s, audio: "ws://h/" }] }\n' +
        '      - { name: x, mapping: mappings/passthrough.yaml, upstreams: [{ name: s, audio: "ws://h/" }, ' +
        '{ name: s, audio: "ws://h/" }] }\n'
    )
  )
  t.match(got.join('\n'), /\/routes\/demo\/tee\/0\/mapping: mapping file mappings\/nope\.yaml not found/)
  t.match(got.join('\n'), /\/routes\/demo\/tee\/1\/name: tee name x is used twice in this route/)
  t.match(got.join('\n'), /\/routes\/demo\/tee\/1\/upstreams\/1\/name: replica name s is used twice in this tee/)
  t.match(
    problems(route('      - { name: x, mapping: mappings/passthrough.yaml, upstreams: [] }\n')).join('\n'),
    /\/routes\/demo\/tee\/0\/upstreams/,
    'a tee without replicas is refused'
  )
  t.match(
    problems(
      route(
        '      - { name: x, mapping: mappings/passthrough.yaml, upstreams: [{ name: s, audio: "ws://h/", credential: inline }] }\n'
      )
    ).join('\n'),
    /tee\/0\/upstreams\/0\/credential: secrets must be written as \$\{VAR\} references/,
    'an inline tee credential is refused'
  )
  t.match(
    problems(
      route('      - { name: "a/b", mapping: mappings/passthrough.yaml, upstreams: [{ name: s, audio: "ws://h/" }] }\n')
    ).join('\n'),
    /\/routes\/demo\/tee\/0\/name/,
    'a tee name is a label: no slash'
  )
})

t.test('reload: a route whose tee mapping file changed is rebuilt; an unchanged one is kept', async t => {
  const mapping = readFileSync(join(__dirname, '..', '..', '..', '..', 'mappings', 'passthrough.yaml'), 'utf8')
  const dir = t.testdir({
    'g.yaml': route(
      '      - { name: shadow, mapping: tee.yaml, upstreams: [{ name: s, audio: "ws://127.0.0.1:9/y" }] }\n'
    ),
    'tee.yaml': mapping
  })
  const c = loadConfig(join(dir, 'g.yaml'), {})
  const log = createLogger({ level: 'silent', secrets: [], destination: new Writable({ write: (_c, _e, cb) => cb() }) })
  const deps = { store: new MemoryStore('i'), metrics: new Metrics(), log }
  const g1 = buildGeneration(c, deps, null)
  const g2 = buildGeneration(c, deps, g1)
  t.equal(g2.routes.get('demo'), g1.routes.get('demo'), 'nothing changed: the route (and its tee pools) are kept')
  writeFileSync(join(dir, 'tee.yaml'), `${mapping}\n# changed\n`)
  forgetMappings()
  const g3 = buildGeneration(c, deps, g2)
  t.not(g3.routes.get('demo'), g2.routes.get('demo'), 'the tee mapping changed: the route is rebuilt for new legs')
  for (const g of [g1, g2, g3]) await g.text.close()
})

t.test('check (and serve) load and dry-run each tee mapping too', async t => {
  const dir = t.testdir({
    'g.yaml': route(
      '      - { name: shadow, mapping: bad.yaml, upstreams: [{ name: s, audio: "ws://127.0.0.1:9/y" }] }\n'
    ),
    'bad.yaml': 'vendor: bad\naudio: 5\n'
  })
  const v = await validateAll(join(dir, 'g.yaml'), {})
  t.equal(v.ok, false)
  t.ok(!v.ok && v.problems.some(p => p.file.endsWith('bad.yaml')), 'the problem names the tee mapping file')
})
