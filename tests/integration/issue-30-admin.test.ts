import t from 'tap'
import { seriesAt } from '../helpers/metrics'
import { request } from 'node:http'
import { readFileSync, writeFileSync } from 'node:fs'
import { parse, stringify } from 'yaml'
import { ADMIN_WRITE, AUDIO_TOKEN, TEXT_TOKEN, routeTo, startGatewayInProcess, startVendor } from '../helpers/gateway'
import { freePort, spawnGateway } from '../helpers/process'

// Issue 30 item 4: an admin API no reload can open, and a tokenless loopback admin that no web page can
// drive. `serve` as it ships (two workers: the main process answers the admin API), and one process.

// Three gateways, two of them processes with two workers each: on a busy 2-core machine that can take
// more than the runner's per-file limit (120 s), which is raised for this file only.
t.setTimeout(300_000)

const ADMIN_TOKEN = 'issue-30-admin-token-0123456789'
const SECRETS = { ADMIN_TOKEN, VENDOR_KEY: 'vendor-key-s3cr3t-4567', URL_KEY: 'url-key-s3cr3t-8901' }

/** One HTTP request with exactly these headers (fetch sets Host itself and refuses to change it). */
function raw(
  url: string,
  method: string,
  headers: Record<string, string>,
  body = ''
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers }, res => {
      let text = ''
      res.on('data', d => {
        text += String(d)
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

const sample = seriesAt

t.test('a reload that drops the admin token and moves the listener changes nothing of the admin API', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const adminPort = await freePort()
  const gw = await spawnGateway(
    t,
    {
      admin: { host: '0.0.0.0', port: adminPort, token: '${ADMIN_TOKEN}' },
      routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
    },
    SECRETS
  )
  const admin = (path: string): string => `http://127.0.0.1:${adminPort}${path}`
  const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` }
  t.equal((await fetch(admin('/admin/upstreams'))).status, 401, 'before: 401 without the token')
  // The file now says: loopback, no token.
  const file = parse(readFileSync(gw.file, 'utf8')) as Record<string, any>
  file.admin = { host: '127.0.0.1', port: adminPort }
  writeFileSync(gw.file, stringify(file))
  const reload = await fetch(admin('/admin/reload'), { method: 'POST', headers: { ...bearer, ...ADMIN_WRITE } })
  t.equal(reload.status, 200, 'the reload itself is applied')
  t.match(await reload.json(), { ok: true, restartRequired: ['admin'] }, 'and says the admin change needs a restart')
  const after = await fetch(admin('/admin/upstreams'))
  t.equal(after.status, 401, 'after: still 401 without the token')
  t.match(await after.json(), { code: 'ADMIN_UNAUTHORIZED' })
  t.equal((await fetch(admin('/admin/upstreams'), { headers: bearer })).status, 200, 'the token still opens it')
  const view = (await (await fetch(admin('/admin/config'), { headers: bearer })).json()) as Record<string, any>
  t.match(
    view,
    { config: { admin: { host: '0.0.0.0', port: adminPort, token: '[REDACTED]' } }, restartRequired: ['admin'] },
    'GET /admin/config: the admin listener in force, and the change waiting for a restart'
  )
})

t.test('one process: a reload that drops the admin token leaves it in force', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  // One process: the lone gateway's own reload path (the workers' is the test above).
  const gw = await startGatewayInProcess(
    t,
    {
      admin: { host: '127.0.0.1', port: 0, token: '${ADMIN_TOKEN}' },
      routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
    },
    SECRETS,
    { reloadable: true }
  )
  const file = parse(readFileSync(gw.configFile, 'utf8')) as Record<string, any>
  file.admin = { host: '127.0.0.1', port: 0 }
  writeFileSync(gw.configFile, stringify(file))
  t.match(await gw.server.reload('test'), { ok: true, restartRequired: ['admin'] })
  t.equal((await fetch(gw.adminUrl('/admin/upstreams'))).status, 401, 'still 401 without the token')
  const view = await fetch(gw.adminUrl('/admin/config'), { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  t.match(await view.json(), { config: { admin: { token: '[REDACTED]' } }, restartRequired: ['admin'] })
})

t.test('a tokenless loopback admin (serve with workers, and one process)', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const config = {
    fleet: { host: '127.0.0.1', port: 0, secret: '${FLEET_SECRET}' },
    routes: {
      demo: {
        ...routeTo([vendor], 'mappings/json-events.yaml'),
        upstreams: [
          { name: 'r0', audio: `${vendor.url}?key=\${URL_KEY}`, text: vendor.httpUrl, credential: '${VENDOR_KEY}' }
        ]
      }
    }
  }
  const env = { ...SECRETS, FLEET_SECRET: 'fleet-secret-s3cr3t-0123456789' }
  const gw = await spawnGateway(t, config, env)
  // One process as well: the lone gateway answers its own admin API.
  const one = await startGatewayInProcess(t, config, env)

  await t.test('it refuses what a web page could send, and serves its own callers', async t => {
    const reloads = async (): Promise<number> =>
      (await sample(gw.adminUrl('/metrics'), 'assist_gateway_config_reloads_total{result="ok"}')) +
      (await sample(gw.adminUrl('/metrics'), 'assist_gateway_config_reloads_total{result="failed"}'))
    const before = await reloads()
    const evil = { origin: 'http://evil.example' }
    const refused: [string, Promise<{ status: number; body: string }>][] = [
      [
        'a cross-origin text/plain POST (a form a page submits)',
        raw(gw.adminUrl('/admin/reload'), 'POST', { ...evil, 'content-type': 'text/plain' }, 'x')
      ],
      [
        'a form-encoded POST without an Origin',
        raw(gw.adminUrl('/admin/reload'), 'POST', { 'content-type': 'application/x-www-form-urlencoded' }, 'a=b')
      ],
      [
        'a JSON POST without x-requested-with',
        raw(gw.adminUrl('/admin/reload'), 'POST', { 'content-type': 'application/json' })
      ],
      [
        'a POST as the CLI makes it, but from another origin',
        raw(gw.adminUrl('/admin/reload'), 'POST', { ...ADMIN_WRITE, ...evil })
      ],
      ['a cross-origin GET', raw(gw.adminUrl('/admin/upstreams'), 'GET', evil)],
      ['an Origin of "null" (a sandboxed page)', raw(gw.adminUrl('/admin/upstreams'), 'GET', { origin: 'null' })],
      [
        'a name that resolves to 127.0.0.1 (DNS rebinding): Host is not loopback',
        raw(gw.adminUrl('/admin/config'), 'GET', { host: 'evil.example:9465' })
      ]
    ]
    for (const [what, answer] of refused) {
      const a = await answer
      t.equal(a.status, 403, what)
      t.match(JSON.parse(a.body), { code: 'ADMIN_FORBIDDEN' })
    }
    t.equal(await reloads(), before, 'no reload ran')
    t.equal(
      await sample(gw.adminUrl('/metrics'), 'assist_gateway_auth_failures_total{hook="admin",reason="cross_origin"}'),
      refused.length,
      'each refusal counted'
    )
    // Its own callers: the CLI and curl as the docs show them, and a page of its own origin.
    const port = new URL(gw.adminUrl('')).port
    const own = await raw(gw.adminUrl('/admin/reload'), 'POST', { ...ADMIN_WRITE, origin: `http://127.0.0.1:${port}` })
    t.equal(own.status, 200, 'a POST with JSON and x-requested-with, from its own origin')
    t.equal((await fetch(gw.adminUrl('/admin/reload'), { method: 'POST', headers: ADMIN_WRITE })).status, 200)
    t.equal((await raw(gw.adminUrl('/admin/upstreams'), 'GET', { host: `localhost:${port}` })).status, 200, 'localhost')
    t.equal((await fetch(gw.adminUrl('/admin/upstreams'))).status, 200, 'a plain GET')
    t.ok((await reloads()) > before, 'those reloads ran')
  })

  await t.test('GET /admin/config: the config in force, every secret redacted', async t => {
    const secrets = [AUDIO_TOKEN, TEXT_TOKEN, env.VENDOR_KEY, env.URL_KEY, env.FLEET_SECRET]
    for (const [who, url] of [
      ['serve with workers (the main process)', gw.adminUrl('/admin/config')],
      ['one process', one.adminUrl('/admin/config')]
    ]) {
      const r = await fetch(url)
      t.equal(r.status, 200, who)
      const text = await r.text()
      for (const s of secrets) t.notOk(text.includes(s), `${who}: no secret in it`)
      const view = JSON.parse(text) as Record<string, any>
      t.match(
        view.config.routes.demo,
        {
          auth: { audio: ['[REDACTED]'], text: ['[REDACTED]'] },
          upstreams: [{ credential: '[REDACTED]', audio: /\?key=\[REDACTED\]$/ }]
        },
        `${who}: credentials and URL keys redacted where they were`
      )
      t.equal(view.config.fleet.secret, '[REDACTED]')
      t.notOk('secrets' in view.config, 'the loader’s list of secrets is not shown')
      t.same(view.restartRequired, [])
    }
  })
})
