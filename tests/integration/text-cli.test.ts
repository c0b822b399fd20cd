import t from 'tap'
import { join } from 'node:path'
import { runCli } from '../helpers/cli'
import { TEXT_TOKEN, routeTo, startVendor } from '../helpers/gateway'
import { startTlsGateway } from '../helpers/tls'

/** The real command line (the built CLI, bin/assist-gateway.js), as an operator runs it. */
async function cli(
  args: string[],
  env: Record<string, string> = {}
): Promise<{ code: number | null; out: string; err: string }> {
  const r = await runCli(args, env)
  return { code: r.code, out: r.stdout, err: r.stderr }
}

t.test('simulate text posts one utterance over HTTPS and prints the status and the answer', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startTlsGateway(t, {
    routes: { demo: { ...routeTo([vendor], 'mappings/json-events.yaml'), default: true } }
  })
  // The simulator verifies the certificate: the throwaway one is made trusted for it.
  const ok = await cli(
    [
      'simulate',
      'text',
      '--url',
      gw.url('/agent_assist_text_webhooks/utterance'),
      '--token',
      TEXT_TOKEN,
      '--participant',
      'agent',
      '--text',
      'where is my parcel?'
    ],
    { NODE_EXTRA_CA_CERTS: gw.caFile }
  )
  t.equal(ok.code, 0, ok.err)
  t.match(ok.out, /^status 200 \(request [0-9a-f-]{36}\)$/m)
  t.match(ok.out, /^answer \{"contactId":1000000,"participantId":"agent","reply":"echo: where is my parcel\?"/m)
  t.match(vendor.textRequests()[0].body, { role: 'agent', text: 'where is my parcel?' })

  const refused = await cli([
    'simulate',
    'text',
    '--url',
    gw.url('/text/demo'),
    '--token',
    'not-the-token-123',
    '--auth-header',
    '--text',
    'hi',
    '--insecure'
  ])
  t.equal(refused.code, 1)
  t.match(refused.out, /^status 401/m)
  t.match(refused.out, /"code":"AUTH_INVALID"/)
  t.notMatch(refused.out + refused.err, 'not-the-token-123', 'the token is never printed')

  const untrusted = await cli([
    'simulate',
    'text',
    '--url',
    gw.url('/text/demo'),
    '--token',
    TEXT_TOKEN,
    '--text',
    'hi'
  ])
  t.equal(untrusted.code, 1, 'a certificate nobody trusts is refused without --insecure')
  t.match(untrusted.out, /^error /m)

  const usage = await cli(['simulate', 'text', '--url', gw.url('/text/demo')])
  t.equal(usage.code, 2)
  t.match(usage.err, /--text is required/)
  const participant = await cli([
    'simulate',
    'text',
    '--url',
    gw.url('/text/demo'),
    '--text',
    'x',
    '--participant',
    'bot'
  ])
  t.equal(participant.code, 2)
  t.match(participant.err, /--participant must be patron, agent or system/)
})

t.test('check prints every text mapping problem as file:line:col: /pointer: message', async t => {
  const dir = t.testdir({
    'bad.yaml':
      'vendor: bad\ntext:\n  request:\n    path: \'"v1/no-slash"\'\n    body: \'request.messageBody.{ "x": 1 }\'\n  response: "response.body.answer"\nsamples:\n  text:\n    - { body: { other: 1 } }\n',
    'gateway.yaml':
      'routes:\n  demo:\n    mapping: bad.yaml\n    upstreams: [{ name: a, text: "http://127.0.0.1:1" }]\n'
  })
  const r = await cli(['check', '--config', join(dir, 'gateway.yaml')])
  t.equal(r.code, 2)
  const file = join(dir, 'bad.yaml')
  t.match(
    r.err,
    `${file}:4:5: /text/request/path: must produce a path that starts with "/" and holds no spaces or "#"; it produced "v1/no-slash"`
  )
  t.match(
    r.err,
    `${file}:6:3: /text/response: on samples/text/0: must produce the answer for the platform; it produced nothing`
  )
  const shipped = await cli(['check', '--config', join(__dirname, '..', '..', 'ops', 'gateway.yaml')])
  t.equal(shipped.code, 0, shipped.err)
})
