import t from 'tap'
import { readAnswer } from '../../../gateway/upstream/http-answer'
import type { RawAnswer } from '../../../gateway/upstream/http-exchange'
import type { Replica } from '../../../gateway/upstream/pool'

// A replica's 2xx answer, read once (upstream/http-answer.ts): a caller that reads JSON gets a failure with a stable
// code for anything else, never an empty success. An SSE answer as the OpenAI API reference's Chat Completions
// "Streaming" section shows it (text/event-stream, `data:` lines, `data: [DONE]`).

const replica = { name: 'a' } as Replica
const raw = (contentType: string | null, body: string, status = 200): RawAnswer => ({
  status,
  headers: contentType === null ? {} : { 'content-type': contentType },
  chunks: body === '' ? [] : [Buffer.from(body)],
  error: null,
  timedOut: false
})
const SSE =
  'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n'

t.test(
  'a caller that reads JSON: anything else is UPSTREAM_ANSWER_NOT_JSON with the status, result bad_answer',
  async t => {
    const cases: [RawAnswer, RegExp][] = [
      [raw('text/event-stream; charset=utf-8', SSE), /answered 200 with content-type text\/event-stream, not the JSON/],
      [raw('text/html', '<html>proxy</html>'), /content-type text\/html/],
      [raw('application/json', ''), /an empty body/],
      [raw('application/json', '{"choices": ['), /application\/json that does not parse/],
      [raw(null, '{}'), /no content-type/],
      [raw('x'.repeat(300), 'x'), /another content-type/]
    ]
    for (const [answer, detail] of cases) {
      const out = readAnswer(answer, replica, 'json')
      t.equal(out.ok, false)
      if (out.ok) continue
      t.equal(out.error.code, 'UPSTREAM_ANSWER_NOT_JSON')
      t.match(out.error.detail, detail)
      t.equal(out.result, 'bad_answer')
      t.equal(out.vendorStatus, 200)
    }
    const ok = readAnswer(raw('application/json; charset=utf-8', '{"a":1}'), replica, 'json')
    t.match(ok, { ok: true, answer: { body: { a: 1 }, json: '{"a":1}' } })
  }
)

t.test('a caller that takes any answer: as before (text as text, empty as null, bad JSON a bad answer)', async t => {
  t.match(readAnswer(raw('text/event-stream', SSE), replica, 'any'), { ok: true, answer: { body: SSE, json: null } })
  t.match(readAnswer(raw('application/json', ''), replica, 'any'), { ok: true, answer: { body: null, json: null } })
  const bad = readAnswer(raw('application/json', '{'), replica, 'any')
  t.match(bad, { ok: false, result: 'bad_answer', error: { code: 'UPSTREAM_BAD_ANSWER' } })
  const refused = readAnswer(raw('application/json', '{}', 429), replica, 'json')
  t.match(refused, { ok: false, result: 'status_4xx', vendorStatus: 429, error: { code: 'UPSTREAM_BAD_ANSWER' } })
})
