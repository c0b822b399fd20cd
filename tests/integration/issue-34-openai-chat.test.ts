import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { runCli } from '../helpers/cli'
import { until } from '../helpers/gateway'
import { chatGateway, chatGatewayOf, type Json, openaiEmulator, say } from '../helpers/openai-chat'

// Issue 34 item 6: the chat-completions mapping to the letter. The platform's script engine (real HTTP) → a real
// gateway (`serve`) → the strict OpenAI emulator (a real listener), which records every request it gets, 404s too.
// Where requests go follows the official Node SDK, openai/openai-node 7.5.0 (7b7d6ca): src/client.ts (`baseURL`
// defaults to https://api.openai.com/v1; `buildURL` appends a resource path to the base, one slash between),
// src/resources/chat/completions/completions.ts (`create` posts to '/chat/completions'; `stream: true` gets
// server-sent events, read by src/core/streaming.ts) and src/resources/models.ts (`list` gets '/models'); the API
// reference, Chat Completions, "Create chat completion" (the `stream` parameter) and "Streaming".

/** Where the SDK sends `path` for a `baseURL` (openai-node src/client.ts buildURL: appended, one slash between). */
function sdkPath(baseURL: string, path: string): string {
  const joined = baseURL.endsWith('/') && path.startsWith('/') ? baseURL + path.slice(1) : baseURL + path
  return new URL(joined).pathname
}

t.test('the probe and the requests go where the SDK would, under the base URL (/v1, a path prefix)', async t => {
  // Route: [the emulator's API path, the replica's text URL path]. The SDK's form (a base ending in /v1, at the
  // root and behind a prefix), and the form the mapping documented first (no /v1: the mapping adds it).
  const cases = {
    sdk: ['/v1', '/v1'],
    prefixed: ['/proxy/openai/v1', '/proxy/openai/v1/'],
    older: ['/proxy/openai/v1', '/proxy/openai']
  } as const
  const emus = Object.fromEntries(
    await Promise.all(
      Object.entries(cases).map(async ([name, [api]]) => [name, await openaiEmulator(t, { basePath: api })] as const)
    )
  )
  const gw = await chatGatewayOf(
    t,
    Object.fromEntries(Object.entries(cases).map(([name, [, path]]) => [name, { emus: [emus[name]], path }])),
    { probe: true }
  )
  const probed = (): boolean =>
    Object.values(emus).every(e => e.httpRequests().filter(r => r.method === 'GET' && r.status === 200).length >= 2)
  t.ok(await until(async () => probed(), 30_000), 'every replica answered the probe twice')
  const admin = ((await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as Json).routes as Json[]
  for (const [name, [api, path]] of Object.entries(cases)) {
    const emu = emus[name]
    t.equal(admin.find(r => r.route === name)?.replicas[0].state, 'up', `${path}: the replica is up`)
    const a = await say(gw, 'I was charged twice', name)
    t.equal(a.status, 200, `${path}: the utterance is answered`)
    t.equal(a.body.suggestion, 'Suggested reply to: I was charged twice')
    const seen = new Set(emu.httpRequests().map(r => `${r.method} ${r.path} ${r.status}`))
    t.same([...seen].sort(), [`GET ${api}/models 200`, `POST ${api}/chat/completions 200`], `${path}: nowhere else`)
    if (path.endsWith('/v1') || path.endsWith('/v1/')) {
      const base = emu.httpUrl + path
      t.equal(sdkPath(base, '/chat/completions'), `${api}/chat/completions`, '(where the SDK posts)')
      t.equal(sdkPath(base, '/models'), `${api}/models`, '(where the SDK lists models)')
    }
  }
})

t.test(
  'a 200 event stream reaches the platform as 502 UPSTREAM_ANSWER_NOT_JSON, counted as a vendor failure',
  async t => {
    // The emulator streams whatever was asked (a server or proxy that forces streaming), as the API answers
    // `stream: true`: text/event-stream, chat.completion.chunk events, then `data: [DONE]`.
    const emu = await openaiEmulator(t, { chatEventStream: true })
    const gw = await chatGateway(t, [emu])
    const a = await say(gw, 'I was charged twice')
    t.equal(a.status, 502, 'an error the platform sees, not 200 with an empty suggestion')
    t.match(a.body, {
      code: 'UPSTREAM_ANSWER_NOT_JSON',
      vendorStatus: 200,
      detail: /answered 200 with content-type text\/event-stream, not the JSON the mapping reads/
    })
    t.notOk('suggestion' in a.body)
    const [req] = emu.httpRequests()
    t.match(req, { method: 'POST', path: '/v1/chat/completions', status: 200 })
    t.notOk('stream' in (req.body as Json), 'the gateway did not ask for a stream')
    const m = await (await fetch(gw.adminUrl('/metrics'))).text()
    t.match(m, /assist_gateway_upstream_requests_total\{route="x",upstream="v0",result="bad_answer"\} 1\b/)
    t.match(m, /assist_gateway_text_requests_total\{route="x",code="502"\} 1\b/)
    t.ok(await until(async () => gw.logs.lines.some(l => l.event === 'text_failed'), 5_000), 'the failure is logged')
    t.match(
      gw.logs.lines.find(l => l.event === 'text_failed'),
      { code: 'UPSTREAM_ANSWER_NOT_JSON', upstream: 'v0', result: 'bad_answer', vendorStatus: 200 }
    )
  }
)

t.test('check refuses a copy of openai-chat.yaml whose body asks for stream: true, at its line and column', async t => {
  const shipped = readFileSync(join(__dirname, '..', '..', 'mappings', 'openai-chat.yaml'), 'utf8')
  const anchor = '            "model": $exists($p.model)'
  t.ok(shipped.includes(anchor))
  const streaming = shipped.replace(anchor, `            "stream": true,\n${anchor}`)
  const config = (mapping: string): string =>
    [
      'routes:',
      '  x:',
      `    mapping: ${mapping}`,
      '    params: { model: gpt-4.1-mini, sendContact: true }',
      '    upstreams: [{ name: a, text: "http://127.0.0.1:1/v1" }]'
    ].join('\n')
  const dir = t.testdir({
    'openai-stream.yaml': streaming,
    'streaming.yaml': config('./openai-stream.yaml'),
    'shipped.yaml': config('mappings/openai-chat.yaml')
  })
  const lines = streaming.split('\n')
  const line = lines.findIndex(l => l.includes('"stream": true')) + 1
  const col = lines[line - 1].indexOf('"stream"') + 1
  const r = await runCli(['check', '--config', join(dir, 'streaming.yaml')])
  t.equal(r.code, 2, 'a config problem exits 2')
  t.match(
    r.stderr,
    `${join(dir, 'openai-stream.yaml')}:${line}:${col}: /text/request/body: asks for a streamed answer ("stream": true)`
  )
  const ok = await runCli(['check', '--config', join(dir, 'shipped.yaml')])
  t.equal(ok.code, 0, `the shipped mapping passes: ${ok.stderr}`)
})
