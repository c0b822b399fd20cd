import t from 'tap'
import { EXAMPLE_UTTERANCE } from '../../gateway/validate/messages'
import { startGateway, until } from '../helpers/gateway'
import {
  CHAT_KEY as KEY,
  CHAT_PARAMS as PARAMS,
  chatGateway,
  type Json,
  openaiEmulator as emulator,
  say
} from '../helpers/openai-chat'
import { vendorSchemas } from '../helpers/vendor-schemas'

// The platform's script engine (real HTTP) → a real gateway (`serve`) → the strict OpenAI emulator's Chat Completions.
// Follows openai/openai-openapi openapi.yaml (f85dbe2): the request the gateway sends is validated against
// CreateChatCompletionRequest, and the emulator answers a CreateChatCompletionResponse; rate limits are 429
// with retry-after. The field names follow the official Node SDK, openai/openai-node 7.5.0 (7b7d6ca),
// src/resources/chat/completions/completions.ts, ChatCompletionCreateParams: `user` is deprecated, "replaced by
// `safety_identifier` and `prompt_cache_key`". Where requests go, and event-stream answers: issue-34-openai-chat.test.ts.

const schemas = vendorSchemas('openai-openapi-subset.json')
const gateway = async (t: Parameters<typeof emulator>[0], emus: Parameters<typeof chatGateway>[1], key = KEY) =>
  await chatGateway(t, emus, { key })

t.test('openai chat: each utterance → POST /v1/chat/completions; the first choice is the suggestion', async t => {
  const emu = await emulator(t)
  const gw = await gateway(t, [emu])
  const a = await say(gw, 'I was charged twice')
  t.equal(a.status, 200)
  t.match(a.body, {
    contactId: EXAMPLE_UTTERANCE.contactId,
    participantId: 'patron',
    suggestion: 'Suggested reply to: I was charged twice',
    model: 'gpt-4.1-mini',
    finishReason: 'stop',
    usage: { total_tokens: Number }
  })
  const [req] = emu.httpRequests()
  t.match(req, { method: 'POST', path: '/v1/chat/completions', status: 200, headers: { authorization: '[REDACTED]' } })
  t.same(req.body, {
    model: 'gpt-4.1-mini',
    messages: [
      { role: 'system', content: 'You help billing agents.' },
      { role: 'user', content: 'I was charged twice' }
    ],
    temperature: 0.2,
    safety_identifier: `contact-${EXAMPLE_UTTERANCE.contactId}`
  })
  t.notOk('user' in (req.body as Json), 'not the deprecated `user`')
  t.same(schemas.check('CreateChatCompletionRequest', req.body), [], 'the request matches the published schema')
  t.notSame(schemas.check('CreateChatCompletionRequest', { messages: [] }), [], '(which does refuse a bad one)')
  t.notOk(gw.logs.raw.includes(KEY), 'the key is never logged')
})

t.test('openai chat: a 429 with retry-after is honoured: asked again after the delay, then 200', async t => {
  const emu = await emulator(t, { chatRateLimit: { first: 1, retryAfterSeconds: 1 } })
  const gw = await gateway(t, [emu])
  const a = await say(gw, 'Where is my parcel?')
  t.equal(a.status, 200)
  t.equal(a.body.suggestion, 'Suggested reply to: Where is my parcel?')
  t.same(
    emu.httpRequests().map(r => r.status),
    [429, 200],
    'the same replica, asked again'
  )
  const m = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(m, /assist_gateway_upstream_retries_total\{route="x",reason="rate_limited"\} 1/)
})

t.test('openai chat: a retry-after past the text deadline is not waited for: 502 with the vendor status', async t => {
  const emu = await emulator(t, { chatRateLimit: { first: 5, retryAfterSeconds: 30 } })
  const gw = await gateway(t, [emu])
  const a = await say(gw, 'Hello?')
  t.equal(a.status, 502)
  t.match(a.body, { code: 'UPSTREAM_BAD_ANSWER', vendorStatus: 429 })
  t.equal(emu.httpRequests().length, 1)
})

t.test(
  'openai chat: a wrong key is 401 at the vendor: 502 UPSTREAM_BAD_ANSWER, vendorStatus 401, not retried',
  async t => {
    const emu = await emulator(t)
    const gw = await gateway(t, [emu], 'sk-wrong')
    const a = await say(gw, 'Hello?')
    t.equal(a.status, 502)
    t.match(a.body, { code: 'UPSTREAM_BAD_ANSWER', vendorStatus: 401 })
    t.notOk(gw.logs.raw.includes('sk-wrong'))
  }
)

t.test('openai chat: a replica goes away between utterances: the next ones go to the other, none lost', async t => {
  const a = await emulator(t)
  const b = await emulator(t)
  const gw = await gateway(t, [a, b])
  const answers: number[] = []
  for (let i = 0; i < 4; i++) answers.push((await say(gw, `before ${i}`)).status)
  await a.close()
  for (let i = 0; i < 4; i++) answers.push((await say(gw, `after ${i}`)).status)
  t.same(answers, [200, 200, 200, 200, 200, 200, 200, 200], 'every utterance answered')
  const seen = [...a.httpRequests(), ...b.httpRequests()].map(r => (r.body as Json).messages[1].content)
  for (let i = 0; i < 4; i++) {
    t.ok(seen.includes(`before ${i}`))
    t.ok(seen.includes(`after ${i}`))
  }
  t.equal(
    b.httpRequests().filter(r => String((r.body as Json).messages[1].content).startsWith('after')).length,
    4,
    'the survivor answered every later one'
  )
})

t.test(
  'openai chat: the probe (GET /v1/models with the key) keeps a text replica up; a wrong key takes it down',
  async t => {
    for (const [key, state] of [
      [KEY, 'up'],
      ['sk-wrong', 'down']
    ] as const) {
      const emu = await emulator(t)
      const gw = await startGateway(
        t,
        {
          health: { active: { kind: undefined, intervalSeconds: 0.25 } },
          routes: {
            x: {
              mapping: 'mappings/openai-chat.yaml',
              params: PARAMS,
              upstreams: [{ name: 'v', text: emu.httpUrl, credential: '${VENDOR_KEY}' }]
            }
          }
        },
        { VENDOR_KEY: key }
      )
      const replica = async (): Promise<Json> =>
        ((await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as Json).routes[0].replicas[0]
      t.ok(
        await until(async () => {
          const r = await replica()
          return state === 'up' ? /probe ok \((\d{2,}|[3-9]) in a row\)/.test(r.reason) : r.state === 'down'
        }, 10_000),
        `${state} with ${key === KEY ? 'the right' : 'a wrong'} key`
      )
      if (state === 'down') t.match((await replica()).reason, /^credential refused/)
      else
        t.ok(
          emu.httpRequests().every(q => q.path === '/v1/models' && q.status === 200),
          'only the models list was asked'
        )
    }
  }
)
