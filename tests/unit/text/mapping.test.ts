import t from 'tap'
import { join } from 'node:path'
import type { ConfigError } from '../../../gateway/errors'
import { loadMapping } from '../../../gateway/mapping/compile'
import { dryRunMapping } from '../../../gateway/mapping/dry-run'
import { evaluate as runText } from '../../../gateway/mapping/fast-path'
import type { TextInput } from '../../../gateway/mapping/text'
import { copyHeaders, checkPath, mapRequest, mapRequestNow } from '../../../gateway/mapping/text-request'
import { EXAMPLE_UTTERANCE, normalizeUtterance } from '../../../gateway/validate/messages'
import type { RouteConfig } from '../../../gateway/config/types'

const ROOT = join(__dirname, '..', '..', '..')

function input(over: Partial<TextInput> = {}, msg: Record<string, unknown> = EXAMPLE_UTTERANCE): TextInput {
  const { request, message } = normalizeUtterance({ ...msg, authorizationHeader: 'platform-secret' }, true)
  return {
    request,
    message,
    requestId: 'req-1',
    route: { name: 'demo', params: {}, checksToken: true },
    upstream: { name: 'a', credential: null, hasCredential: false },
    ...over
  }
}

function route(mapping: string, over: Partial<RouteConfig> = {}): RouteConfig {
  return {
    name: 'demo',
    default: false,
    async: false,
    mapping,
    auth: { text: ['x'] },
    params: {},
    upstreams: [{ name: 'a', text: 'http://127.0.0.1:1', headers: {}, weight: 1, maxStreams: 1 }],
    ...over
  } as unknown as RouteConfig
}

t.test('json-events: the REST request built from an utterance', async t => {
  const m = loadMapping(join(ROOT, 'mappings', 'json-events.yaml'))
  t.ok(m.text)
  const plain = await mapRequest(m.text!, input())
  t.same(plain, {
    ok: true,
    value: {
      method: 'POST',
      path: '/v1/conversations/584930211/messages',
      headers: { 'x-request-id': 'req-1', 'content-type': 'application/json' },
      body: JSON.stringify({
        conversationId: '584930211',
        businessUnit: 4594,
        tenant: 'tenant-eu-1',
        role: 'customer',
        text: EXAMPLE_UTTERANCE.messageBody,
        attachments: EXAMPLE_UTTERANCE.messageData,
        config: EXAMPLE_UTTERANCE.agentAssistAppConfig
      })
    }
  })
  const keyed = await mapRequest(
    m.text!,
    input({ upstream: { name: 'a', credential: 'vendor-key', hasCredential: true } })
  )
  t.equal(keyed.ok && keyed.value.headers.authorization, 'Bearer vendor-key')
  for (const [p, role] of [
    ['agent', 'agent'],
    ['system', 'system']
  ]) {
    const r = await mapRequest(m.text!, input({}, { ...EXAMPLE_UTTERANCE, participantId: p }))
    t.equal(r.ok && JSON.parse(r.value.body!).role, role)
  }
  const answer = { status: 200, headers: {}, body: { data: { reply: 'r', suggestions: [{ text: 's' }] }, meta: {} } }
  const shaped = await runText(m.text!.response!, { ...input(), response: answer })
  t.same(shaped, {
    ok: true,
    value: { contactId: 584930211, participantId: 'patron', reply: 'r', suggestions: [{ text: 's' }] }
  })
  const unwrapped = await runText(m.text!.response!, { ...input(), response: { ...answer, body: { error: 'x' } } })
  t.same(unwrapped, { ok: true, value: undefined }, 'no data: nothing (502 at run time)')
})

t.test('the request is built synchronously when every expression takes the fast path', async t => {
  const m = loadMapping(join(ROOT, 'mappings', 'json-events.yaml'))
  t.same(mapRequestNow(m.text!, input()), await mapRequest(m.text!, input()))
  const dir = t.testdir({ 'slow.yaml': 'vendor: s\ntext: { request: { body: "$uppercase(request.messageBody)" } }\n' })
  const slow = loadMapping(join(dir, 'slow.yaml'))
  t.equal(mapRequestNow(slow.text!, input()), null, 'outside the subset: JSONata decides, later')
  t.match(await mapRequest(slow.text!, input()), {
    ok: true,
    value: {
      body: EXAMPLE_UTTERANCE.messageBody.toUpperCase(),
      headers: { 'content-type': 'text/plain; charset=utf-8' }
    }
  })
})

t.test('passthrough: the platform JSON, with the credential rule', async t => {
  const m = loadMapping(join(ROOT, 'mappings', 'passthrough.yaml'))
  const plain = await mapRequest(m.text!, input())
  t.ok(plain.ok)
  if (!plain.ok) return
  t.equal(plain.value.path, null, 'the replica URL as it is')
  t.same(JSON.parse(plain.value.body!), EXAMPLE_UTTERANCE, 'unchanged, and without the platform credential')
  const keyed = await mapRequest(
    m.text!,
    input({ upstream: { name: 'a', credential: 'vendor-key', hasCredential: true } })
  )
  t.equal(keyed.ok && JSON.parse(keyed.value.body!).authorizationHeader, 'vendor-key')
  t.equal(m.text!.response, null, 'the vendor answer goes back unchanged')
})

t.test('passthrough: the message as it came is sent as its own bytes, never serialised again', async t => {
  const m = loadMapping(join(ROOT, 'mappings', 'passthrough.yaml'))
  // Spacing and key order a new serialisation would change: the bytes sent prove which one went.
  const text = `{ "tenantId":"t-1",  "contactId": 584930211, "busNo":4594, "participantId":"patron",
    "messageBody":"caf\\u00e9", "messageData": {}, "agentAssistAppConfig": {} }`
  const msg = JSON.parse(text) as Record<string, unknown>
  const { request, message } = normalizeUtterance(msg, true)
  const base = { request, message, requestId: 'r', route: { name: 'demo', params: {}, checksToken: true } }
  const now = mapRequestNow(m.text!, {
    ...base,
    messageJson: text,
    upstream: { name: 'a', credential: null, hasCredential: false }
  })
  t.ok(now?.ok)
  t.equal(now?.ok && now.value.body, text, 'the text as received, byte for byte')
  t.equal(now?.ok && now.value.headers['content-type'], 'application/json')
  const later = await mapRequest(m.text!, {
    ...base,
    messageJson: text,
    upstream: { name: 'a', credential: null, hasCredential: false }
  })
  t.equal(later.ok && later.value.body, text, 'the same through the JSONata path')
  // A replica credential changes the message: serialised anew, with the credential in it.
  const keyed = mapRequestNow(m.text!, {
    ...base,
    messageJson: text,
    upstream: { name: 'a', credential: 'vendor-key', hasCredential: true }
  })
  t.not(keyed?.ok && keyed.value.body, text)
  t.equal(keyed?.ok && JSON.parse(keyed.value.body!).authorizationHeader, 'vendor-key')
  // Without the text (the credential was dropped from the message, or a dry run): serialised as before.
  const dropped = mapRequestNow(m.text!, input())
  t.same(dropped?.ok && JSON.parse(dropped.value.body!), EXAMPLE_UTTERANCE)
})

t.test('what expressions produce is checked: paths, headers, bodies', async t => {
  t.equal(checkPath(undefined), null)
  t.equal(checkPath(''), null)
  t.equal(checkPath('/a/b?c=1'), null)
  t.match(checkPath('a/b'), /starts with "\/"/)
  t.match(checkPath('/a b'), /no spaces/)
  t.match(checkPath(5), /string/)
  const into: Record<string, string> = {}
  t.equal(copyHeaders({ 'X-Num': 5, 'x-bool': true, 'x-skip': null }, into), null)
  t.same(into, { 'x-num': '5', 'x-bool': 'true' }, 'names lower-cased, scalars as strings, null skipped')
  t.match(copyHeaders({ host: 'evil' }, {}), /host is set by the gateway/)
  t.match(copyHeaders({ 'Content-Length': '1' }, {}), /content-length is set by the gateway/)
  t.match(copyHeaders({ 'bad name': 'x' }, {}), /not a valid HTTP token/)
  t.match(copyHeaders({ 'x-a': 'v\r\nx-b: injected' }, {}), /line break/)
  t.match(copyHeaders({ 'x-a': { nested: 1 } }, {}), /must be a string/)
  t.match(copyHeaders([1], {}), /object/)
  t.notMatch(
    String(copyHeaders({ 'x-key': 'secret-value\n' }, {})),
    'secret-value',
    'a complaint never quotes a header value'
  )
})

t.test("a mapping file's text section is validated and compiled at load, problems by pointer", async t => {
  const dir = t.testdir({
    'no-request.yaml': 'vendor: a\ntext: { response: "x" }\n',
    'bad-key.yaml': 'vendor: b\ntext: { request: { body: "x", verb: GET } }\n',
    'bad-expr.yaml': 'vendor: c\ntext: { request: { body: "{ unclosed" } }\n',
    'get.yaml': 'vendor: d\ntext: { request: { method: GET, body: "x" } }\n'
  })
  const problems = (file: string): string[] => {
    try {
      loadMapping(join(dir, file))
      return []
    } catch (err) {
      return (err as ConfigError).problems.map(p => `${p.pointer}: ${p.message}`)
    }
  }
  t.match(problems('no-request.yaml'), ['/text/request: is required'])
  t.match(problems('bad-key.yaml'), ['/text/request/verb: is not an allowed property'])
  t.match(problems('bad-expr.yaml'), [/^\/text\/request\/body: JSONata S0/])
  t.match(problems('get.yaml'), [/^\/text\/request\/method: must be one of "POST", "PUT", "PATCH"/])
})

t.test('check dry-runs the text section and names file, pointer and what was produced', async t => {
  for (const file of ['json-events.yaml', 'passthrough.yaml']) {
    t.same(
      await dryRunMapping(loadMapping(join(ROOT, 'mappings', file)), route(join(ROOT, 'mappings', file))),
      [],
      `${file} is clean`
    )
  }
  const dir = t.testdir({
    'bad.yaml': `${[
      'vendor: bad',
      'text:',
      '  request:',
      '    path: \'"no-slash"\'',
      '    headers: \'{ "authorization": "Bearer " & upstream.credential, "connection": "close" }\'',
      '    body: "42"',
      '  response: "response.body.missing"',
      'samples:',
      '  text:',
      '    - { body: { data: 1 } }',
      '    - { body: { missing: 1 } }'
    ].join('\n')}\n`
  })
  const file = join(dir, 'bad.yaml')
  const problems = await dryRunMapping(
    loadMapping(file),
    route(file, {
      upstreams: [{ name: 'a', text: 'http://x', credential: 'real-secret', headers: {}, weight: 1, maxStreams: 1 }]
    } as unknown as Partial<RouteConfig>)
  )
  t.same(
    problems.map(p => p.file),
    [file, file, file, file]
  )
  t.match(problems, [
    {
      pointer: '/text/request/path',
      message: 'must produce a path that starts with "/" and holds no spaces or "#"; it produced "no-slash"'
    },
    {
      pointer: '/text/request/headers',
      message:
        'header connection is set by the gateway, not the mapping; it produced {"authorization":"Bearer [credential]","connection":"close"}'
    },
    { pointer: '/text/request/body', message: 'must produce an object, an array, a string or null; it produced 42' },
    {
      pointer: '/text/response',
      message: 'on samples/text/0: must produce the answer for the platform; it produced nothing'
    }
  ])
  t.notMatch(JSON.stringify(problems), 'real-secret', 'the dry-run uses a placeholder credential')
})
