import t, { type Test } from 'tap'
import { startVendorEmulator, type VendorEmulator } from '../../gateway/tools/vendor-emulator'

async function emulator(t: Test, opts: Parameters<typeof startVendorEmulator>[0]): Promise<VendorEmulator> {
  const e = await startVendorEmulator(opts)
  t.teardown(async () => await e.close())
  return e
}

async function call(
  url: string,
  body: unknown,
  headers: Record<string, string> = {}
): Promise<{ status: number; json: any }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body)
  })
  return { status: r.status, json: await r.json() }
}

const rest = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  conversationId: '42',
  businessUnit: 7,
  tenant: 't',
  role: 'customer',
  text: 'hi',
  attachments: {},
  config: {},
  ...over
})

t.test('json-events text: its own REST shape, strictly', async t => {
  const e = await emulator(t, { kind: 'json-events', text: { token: 'k-123' } })
  const url = `${e.httpUrl}/v1/conversations/42/messages`
  const auth = { authorization: 'Bearer k-123' }
  const ok = await call(url, rest(), auth)
  t.equal(ok.status, 200)
  t.same(ok.json.data, {
    conversationId: '42',
    role: 'customer',
    reply: 'echo: hi',
    suggestions: [{ type: 'reply', text: 'echo: hi', confidence: 0.9 }]
  })
  t.equal((await call(url, rest())).status, 401, 'credential required')
  for (const [over, problem] of [
    [{ extra: 1 }, 'extra: unknown field'],
    [{ conversationId: 42 }, 'conversationId: must be a string of digits'],
    [{ conversationId: '43' }, 'conversationId: must match the path'],
    [{ businessUnit: '7' }, 'businessUnit: must be an integer'],
    [{ tenant: '' }, 'tenant: must be a non-empty string'],
    [{ role: 'patron' }, 'role: must be one of customer, agent, system'],
    [{ text: 1 }, 'text: must be a string'],
    [{ attachments: [] }, 'attachments: must be an object']
  ] as const) {
    const r = await call(url, rest(over), auth)
    t.equal(r.status, 400, problem)
    t.same(r.json, { error: { code: 'bad_request', message: problem } })
  }
  t.equal((await call(url, '{nope', auth)).status, 400)
  t.equal(
    (await fetch(url, { method: 'POST', headers: { 'content-type': 'text/plain', ...auth }, body: '{}' })).status,
    415
  )
  t.equal((await call(`${e.httpUrl}/v1/other`, rest(), auth)).status, 404)
  const report = e.textRequests()
  t.equal(report.length, 12, 'every text request but the 404 is recorded')
  t.match(report[0], {
    id: 1,
    method: 'POST',
    path: '/v1/conversations/42/messages',
    status: 200,
    error: null,
    headers: { authorization: '[REDACTED]' }
  })
  t.match(report[2], { status: 400, error: 'extra: unknown field' })
  const viaHttp = (await (await fetch(`${e.httpUrl}/text-requests`)).json()) as unknown[]
  t.equal(viaHttp.length, 12)
})

t.test('passthrough text: the platform JSON at any path, answered in the platform message shape', async t => {
  const e = await emulator(t, { kind: 'passthrough' })
  const msg = {
    contactId: 1,
    busNo: 2,
    tenantId: 't',
    participantId: 'agent',
    messageBody: 'yo',
    authorizationHeader: 'secret-x'
  }
  const r = await call(`${e.httpUrl}/any/path`, msg)
  t.equal(r.status, 200)
  t.same(r.json, {
    command: 'MESSAGE',
    messageType: 'SUGGESTION',
    message: 'echo: yo',
    parameters: { contactId: 1, participantId: 'agent', seq: 1 }
  })
  t.equal(
    (e.textRequests()[0].body as Record<string, unknown>).authorizationHeader,
    '[REDACTED]',
    'the report never keeps a credential'
  )
  t.equal((await call(`${e.httpUrl}/`, { contactId: 1 })).status, 400)
  t.equal((await call(`${e.httpUrl}/sessions`, msg)).status, 404, 'report paths are not text endpoints')
})

t.test('text behaviours: slow, failing, hanging', async t => {
  const e = await emulator(t, { kind: 'passthrough', text: { delayMs: 150 } })
  const msg = { contactId: 1, participantId: 'agent', messageBody: 'x' }
  const slow = call(e.httpUrl, msg)
  // The emulator runs in this process: a check-phase poll sees the request in the same loop turn it arrives,
  // long before its delay timer can fire.
  while (e.textRequests().length === 0) await new Promise(resolve => setImmediate(resolve))
  t.equal(e.textRequests()[0].status, null, 'delayed: received, not yet answered')
  t.equal((await slow).status, 200)
  t.equal(e.textRequests()[0].status, 200, 'answered after the delay')
  e.setText({ status: 502 })
  const failed = await call(e.httpUrl, msg)
  t.equal(failed.status, 502)
  t.equal(failed.json.messageType, 'VENDOR_FAILURE')
  e.setText({ hang: true })
  const ac = new AbortController()
  const hung = fetch(e.httpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(msg),
    signal: ac.signal
  })
  await new Promise(resolve => setTimeout(resolve, 100))
  t.equal(e.textRequests().at(-1)?.status, null, 'received, never answered')
  ac.abort()
  await t.rejects(hung)
})
