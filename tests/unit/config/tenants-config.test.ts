import t, { type Test } from 'tap'
import { join } from 'node:path'
import { authenticateStatic } from '../../../gateway/auth/hook-auth'
import { loadConfig } from '../../../gateway/config/load'
import { describeTenants } from '../../../gateway/config/tenants'
import { ConfigError } from '../../../gateway/errors'
import { loadMapping } from '../../../gateway/mapping/compile'
import { buildRoute, hookAuth } from '../../../gateway/route'
import { MemoryStore } from '../../../gateway/store/memory'

// Issue 33 item 1: tenants in the config, with the names the issue gives (tenants.<t>.credentials.audio/text,
// .clients, .limits.legs/legsPerSecond/utterancesPerSecond; routes.<r>.tenants), and a route's own auth as a
// tenant of its own named after the route.

const ENV = { ACME_AUDIO: 'acme-audio-0123', ACME_TEXT: 'acme-text-0123', GLOBEX_AUDIO: 'globex-audio-4567' }
const UP = 'upstreams: [{ name: a, audio: "ws://127.0.0.1:9/x", text: "http://127.0.0.1:9" }]'

function cfg(t: Test, yaml: string, env: Record<string, string> = ENV) {
  const dir = t.testdir({ 'g.yaml': yaml })
  return () => loadConfig(join(dir, 'g.yaml'), env)
}

const TENANTS = `tenants:
  acme:
    credentials: { audio: ["\${ACME_AUDIO}"], text: ["\${ACME_TEXT}"] }
    limits: { legs: 400, legsPerSecond: 50, utterancesPerSecond: 100 }
  globex:
    credentials: { audio: ["\${GLOBEX_AUDIO}"] }
`

t.test('tenants: credentials and limits by name; routes.<r>.tenants names who may use the route', async t => {
  const c = cfg(
    t,
    `${TENANTS}routes:
  assist:
    mapping: mappings/json-events.yaml
    tenants: [acme, globex]
    ${UP}
  acme-only:
    mapping: mappings/json-events.yaml
    tenants: [acme]
    ${UP}
  open:
    mapping: mappings/json-events.yaml
    ${UP}
`
  )()
  t.same(c.tenants?.acme?.limits, { legs: 400, legsPerSecond: 50, utterancesPerSecond: 100 })
  t.same(c.tenants?.globex?.limits, { legs: 0, legsPerSecond: 0, utterancesPerSecond: 0 }, 'absent: no limit')
  t.same(c.routes.assist.tenants, ['acme', 'globex'])
  for (const s of Object.values(ENV)) t.ok(c.secrets.includes(s), 'a tenant credential is a secret (redacted)')
  t.ok(c.routes.assist.secrets?.includes('acme-audio-0123'), "the route's answers are scrubbed of its tenants'")
  t.notOk(c.routes['acme-only'].secrets?.includes('globex-audio-4567'), 'not of tenants it does not admit')
  const route = (name: string) =>
    buildRoute(
      c.routes[name]!,
      loadMapping(c.routes[name]!.mapping),
      new MemoryStore('i'),
      c.health,
      undefined,
      c.tenants
    )
  const assist = route('assist')
  const audio = (r: ReturnType<typeof route>, v: unknown) =>
    authenticateStatic([v], hookAuth(r, 'audio').list, r.anonymous)
  t.match(audio(assist, 'acme-audio-0123'), { ok: true, principal: { kind: 'static', tenant: 'acme' } })
  t.match(audio(assist, 'Bearer globex-audio-4567'), { ok: true, principal: { kind: 'static', tenant: 'globex' } })
  t.match(audio(assist, 'acme-text-0123'), { ok: false, code: 'AUTH_INVALID' }, 'a text credential opens no leg')
  t.match(audio(assist, undefined), { ok: false, code: 'AUTH_MISSING' }, 'a route with tenants asks for a credential')
  t.match(audio(route('acme-only'), 'globex-audio-4567'), { ok: false, code: 'AUTH_INVALID' }, 'not admitted')
  t.match(audio(route('open'), 'globex-audio-4567'), { ok: true, principal: { tenant: 'globex' } }, 'absent: all')
  t.match(audio(route('open'), undefined), { ok: false, code: 'AUTH_MISSING' }, 'admitting tenants: never anonymous')
  const text = (r: ReturnType<typeof route>, v: unknown) =>
    authenticateStatic([v], hookAuth(r, 'text').list, r.anonymous)
  t.match(text(route('acme-only'), 'acme-text-0123'), { ok: true, principal: { tenant: 'acme' } })
  const globexText = buildRoute(
    { ...c.routes['acme-only']!, tenants: ['globex'] },
    loadMapping(c.routes['acme-only']!.mapping),
    new MemoryStore('i'),
    c.health,
    undefined,
    c.tenants
  )
  t.match(
    text(globexText, undefined),
    { ok: false, code: 'AUTH_MISSING' },
    'a route whose tenants have no text credential is not open on its text hook'
  )
  t.equal(
    describeTenants(c.routes.assist, ['acme', 'globex']),
    'route assist: tenants acme, globex (routes.assist.tenants)'
  )
  t.equal(
    describeTenants(c.routes.open, ['acme', 'globex']),
    'route open: every tenant (acme, globex; no routes.open.tenants)'
  )
})

t.test("a route's own auth keeps working: a tenant of its own, named after the route", async t => {
  const c = cfg(
    t,
    `routes:
  demo:
    mapping: mappings/json-events.yaml
    auth: { audio: ["\${DEMO_AUDIO}"] }
    ${UP}
  anon:
    mapping: mappings/json-events.yaml
    ${UP}
`,
    { DEMO_AUDIO: 'demo-audio-0123' }
  )()
  const demo = buildRoute(c.routes.demo!, loadMapping(c.routes.demo!.mapping), new MemoryStore('i'), c.health)
  t.match(authenticateStatic(['demo-audio-0123'], demo.audioAuth, demo.anonymous), {
    ok: true,
    principal: { kind: 'static', tenant: 'demo' }
  })
  const anon = buildRoute(c.routes.anon!, loadMapping(c.routes.anon!.mapping), new MemoryStore('i'), c.health)
  t.match(authenticateStatic([undefined], anon.audioAuth, anon.anonymous), {
    ok: true,
    principal: { kind: 'anonymous', tenant: 'anon' }
  })
  t.equal(describeTenants(c.routes.demo, []), 'route demo: its own auth (tenant demo)')
})

t.test('check refuses a credential two tenants claim (TENANT_CREDENTIAL_SHARED), never quoting it', async t => {
  const load = cfg(
    t,
    `${TENANTS}  initech:
    credentials: { text: ["\${ACME_AUDIO}"] }
routes:
  demo:
    mapping: mappings/json-events.yaml
    auth: { audio: ["\${GLOBEX_AUDIO}"] }
    tenants: [acme, nobody]
    ${UP}
  other:
    mapping: mappings/json-events.yaml
    auth: { audio: ["\${OTHER}"] }
    ${UP}
  third:
    mapping: mappings/json-events.yaml
    auth: { audio: ["\${OTHER}"] }
    ${UP}
`,
    { ...ENV, OTHER: 'other-audio-8901' }
  )
  try {
    load()
    t.fail('should throw')
  } catch (err) {
    t.type(err, ConfigError)
    const problems = (err as ConfigError).problems
    const shared = problems.filter(p => p.message.startsWith('TENANT_CREDENTIAL_SHARED'))
    t.same(shared.map(p => p.pointer).sort(), ['/routes/demo/auth/audio/0', '/tenants/initech/credentials/text/0'])
    t.match(shared.find(p => p.pointer.startsWith('/tenants'))?.message, /also belongs to tenant acme/)
    t.match(shared.find(p => p.pointer.startsWith('/routes'))?.message, /also belongs to tenant globex/)
    t.ok(
      problems.some(p => p.pointer === '/routes/demo/tenants/1' && /no tenant named nobody/.test(p.message)),
      'a route naming a tenant that does not exist'
    )
    t.notOk(
      problems.some(p => p.pointer.startsWith('/routes/third') || p.pointer.startsWith('/routes/other')),
      "two routes' own auth may share a credential: each is admitted on its own route only"
    )
    for (const s of [...Object.values(ENV), 'other-audio-8901'])
      t.notOk((err as Error).message.includes(s), 'no credential quoted')
  }
})

t.test('a tenant named like a route with its own auth, and an unknown token client, are refused', async t => {
  const load = cfg(
    t,
    `tenants:
  demo: { credentials: { clients: [ghost] } }
routes:
  demo:
    mapping: mappings/json-events.yaml
    auth: { audio: ["\${DEMO_AUDIO}"] }
    ${UP}
`,
    { DEMO_AUDIO: 'demo-audio-0123' }
  )
  try {
    load()
    t.fail('should throw')
  } catch (err) {
    const pointers = (err as ConfigError).problems.map(p => p.pointer)
    t.ok(pointers.includes('/tenants/demo'), 'a tenant named like a route that has its own auth')
    t.ok(pointers.includes('/tenants/demo/credentials/clients/0'), 'a client not under tokens.clients')
  }
})
