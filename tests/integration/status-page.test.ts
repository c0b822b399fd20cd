import t from 'tap'
import { writeFileSync } from 'node:fs'
import { stream } from '../helpers/audio'
import { chromiumPath, openPage } from '../helpers/browser'
import { platformLeg, routeTo, startVendor, until } from '../helpers/gateway'
import { spawnGateway } from '../helpers/process'
import { audioInit } from '../helpers/legs'

// GET /admin/status in headless Chromium (Debian's package; .ci/run installs it), on `serve` as shipped
// (2 workers: the main process serves the admin listener and the page's reads, merged).
const ADMIN_TOKEN = 'admin-token-for-the-status-page'
const chromium = chromiumPath()

t.test('the status page: behind the admin token, strict CSP, a route, its replicas and a live call, live', async t => {
  if (chromium === null) {
    t.pass('chromium is not installed', { skip: '.ci/run installs Debian’s chromium package' })
    return
  }
  const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const b = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const g = await spawnGateway(
    t,
    {
      admin: { host: '127.0.0.1', token: '${ADMIN_TOKEN}' },
      // Probed every 0.2 s, down at the first failure: the page must show it within its next refresh (2 s).
      health: { active: { kind: 'tcp', intervalSeconds: 0.2, timeoutSeconds: 0.5, unhealthyThreshold: 1 } },
      audio: { reattachGraceSeconds: 0 },
      routes: { demo: routeTo([a, b], 'mappings/json-events.yaml') }
    },
    { ADMIN_TOKEN }
  )
  const page = g.adminUrl('/admin/status')

  const refused = await fetch(page)
  t.equal(refused.status, 401, 'no token, no page')
  t.match(refused.headers.get('www-authenticate'), /^Basic realm="assist-gateway admin"/, 'a browser is asked for it')
  const basic = `Basic ${Buffer.from(`operator:${ADMIN_TOKEN}`).toString('base64')}`
  const served = await fetch(page, { headers: { authorization: basic } })
  t.equal(served.status, 200, 'the token as the password of Basic (any user name)')
  t.equal((await fetch(page, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status, 200, 'or as a bearer')
  const csp = served.headers.get('content-security-policy') ?? ''
  t.match(csp, /default-src 'none'/)
  t.match(csp, /script-src 'self'(;|$)/, 'scripts from this origin only')
  t.notMatch(csp, /unsafe-inline|unsafe-eval|\*/, 'no inline script or style, no eval, no wildcard')
  const html = await served.text()
  t.notMatch(html, /<script>|<style>| style=| on[a-z]+=/, 'nothing inline')
  t.notMatch(html, /https?:\/\//, 'nothing from elsewhere')

  // A live call, streaming while the page is open.
  const leg = platformLeg(t, g.url('/audio/demo'), audioInit(780001))
  t.equal((await leg.answer).command, 'CONNECTED')
  const streaming = stream(leg, 0, 1500)

  const browser = await openPage(t, { username: 'operator', password: ADMIN_TOKEN })
  await browser.goto(page)
  t.equal(browser.challenges(), 1, 'the browser was challenged once and sent the token')
  const state = (replica: string): Promise<string | null> =>
    browser.evaluate(`document.querySelector('[data-route="demo"][data-replica="${replica}"]')?.dataset.state ?? null`)
  t.ok(
    await until(async () => (await state('r0')) === 'up' && (await state('r1')) === 'up'),
    'the route and both replicas, up'
  )
  t.ok(
    await until(
      async () =>
        (await browser.evaluate(`document.querySelector('[data-contact="780001"]')?.dataset.state ?? null`)) ===
        'STREAMING'
    ),
    'the live call, streaming'
  )
  t.match(
    await browser.evaluate('document.querySelector(\'h3[data-route="demo"]\').textContent'),
    /calls in progress 1/
  )
  t.match(await browser.evaluate("document.getElementById('workers').textContent"), /up/, 'the workers')
  t.match(await browser.evaluate("document.getElementById('live').dataset.state"), 'ok')
  const shot = await browser.screenshot()

  await b.close()
  t.ok(await until(async () => (await state('r1')) === 'down', 15_000), 'replica r1 going down shows within seconds')
  // The picture in docs/ (STATUS_SCREENSHOT=docs/images/status-page.png): a replica down, a refusal listed.
  if (process.env.STATUS_SCREENSHOT) {
    await fetch(g.url('/text/demo'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    await until(async () =>
      (await browser.evaluate<string>("document.getElementById('refusals').textContent")).includes('AUTH')
    )
    writeFileSync(process.env.STATUS_SCREENSHOT, await browser.screenshot())
  }
  t.equal(await state('r0'), 'up')
  t.ok(
    await until(async () =>
      (await browser.evaluate<string>("document.getElementById('changes').textContent")).includes('down')
    ),
    'and is listed among the recent changes'
  )

  const reads = browser.requests().filter(r => /\/admin\/(upstreams|calls|recent|workers)/.test(r.url))
  t.ok(reads.length >= 4, 'the page read the admin API')
  t.ok(
    reads.every(r => r.headers['x-requested-with'] === 'assist-gateway'),
    'every read says x-requested-with: assist-gateway'
  )
  t.ok(
    browser.requests().every(r => r.url.startsWith(g.adminUrl(''))),
    'nothing requested from elsewhere'
  )
  t.same(browser.problems(), [], 'no CSP report, no console error, no exception')
  t.equal(shot.subarray(1, 4).toString(), 'PNG', 'a screenshot')
  leg.ws.close(1000)
  await streaming
})
