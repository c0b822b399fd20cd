import t from 'tap'
import { request } from 'undici'
import { initMessage } from '../../gateway/tools/simulate'
import { logged, platformLeg, startGateway, startVendor, until } from '../helpers/gateway'
import { runCli } from '../helpers/cli'
import { utterance } from '../helpers/tls'

// Issue 33 item 5 (part): a view per tenant, from outside, on serve as it ships (2 workers): GET
// /admin/calls?tenant= and `assist-gateway calls --tenant` list one tenant's legs (acme's and globex's
// contact 9 are two calls), and `tenant` is on leg_summary and on the text hook's access line (`unknown`
// for a refused credential). The vendor is the bundled json-events emulator (vendor-formats.md, json-events).

const ENV = { ACME_AUDIO: 'acme-audio-credential-0123', GLOBEX_AUDIO: 'globex-audio-credential-4567' }

t.test('one tenant at a time: the admin API, the CLI, leg_summary and access lines', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(
    t,
    {
      log: { accessLog: 'info' },
      tenants: {
        acme: { credentials: { audio: ['${ACME_AUDIO}'], text: ['${ACME_AUDIO}'] } },
        globex: { credentials: { audio: ['${GLOBEX_AUDIO}'] } }
      },
      routes: {
        assist: {
          mapping: 'mappings/json-events.yaml',
          upstreams: [{ name: 'r0', audio: vendor.url, text: vendor.httpUrl }]
        }
      }
    },
    ENV
  )
  const leg = (token: string, contactId: number) =>
    platformLeg(t, gw.url('/audio/assist'), initMessage({ token, contactId, busNo: 4594, perspective: 'TX' }))
  const legs = [leg(ENV.ACME_AUDIO, 9), leg(ENV.GLOBEX_AUDIO, 9), leg(ENV.GLOBEX_AUDIO, 10)]
  for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
  const get = async (q: string) =>
    (await (await fetch(gw.adminUrl(`/admin/calls?${q}`))).json()) as { calls: { tenant: string; contactId: string }[] }
  t.ok(await until(async () => (await get('tenant=globex')).calls.length === 2), "globex's two legs are listed")
  t.same(
    (await get('tenant=acme')).calls.map(c => [c.tenant, c.contactId]),
    [['acme', '9']],
    "acme sees its contact 9 only, not globex's"
  )
  t.same(
    (await get('contactId=9&tenant=globex')).calls.map(c => c.tenant),
    ['globex'],
    'a contact of one tenant'
  )
  t.equal((await fetch(gw.adminUrl('/admin/calls?tenant=bad%20name'))).status, 400, 'a bad tenant name: 400')
  const cli = await runCli(['calls', '--admin', gw.adminUrl(''), '--tenant', 'globex'])
  t.equal(cli.code, 0)
  t.match(cli.stdout, /^INSTANCE\s+WORKER\s+TENANT\s+ROUTE/)
  t.equal(cli.stdout.split('\n').filter(l => /\sglobex\s/.test(l)).length, 2, 'the CLI prints globex’s legs')
  t.notMatch(cli.stdout, /\sacme\s/)

  const post = async (authorization: string) =>
    await request(gw.url('/text/assist'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization },
      body: JSON.stringify(utterance())
    })
  await (await post(ENV.ACME_AUDIO)).body.dump()
  await (await post('not-a-credential')).body.dump()
  t.ok(await until(() => logged(gw, 'text_request', { tenant: 'acme', status: 200 })), 'access line: tenant acme')
  t.ok(await until(() => logged(gw, 'text_request', { tenant: 'unknown', status: 401 })), 'refused: unknown')
  for (const l of legs) l.ws.close(1000)
  t.ok(await until(() => logged(gw, 'leg_summary', { tenant: 'globex', contactId: 10 })), 'leg_summary: tenant')
  t.ok(await until(() => logged(gw, 'leg_summary', { tenant: 'acme', contactId: 9 })))
})
