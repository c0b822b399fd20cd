import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { status as Status } from '@grpc/grpc-js'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, platformLeg, startGateway, type TestGateway, until } from '../helpers/gateway'
import {
  DF_MAPPING,
  DF_METHOD,
  dfChat,
  dfRoute,
  type StatusServers,
  statusServers,
  withCreateDeadline
} from '../helpers/grpc-status-server'

// Issue 34 item 1 from outside: what the gRPC statuses of a mapping's unary calls become for the platform,
// through `serve` as it ships (2 workers), the shipped mappings/dialogflow-agent-assist.yaml and two replicas
// answering each call with the status the test chose (helpers/grpc-status-server.ts, built from the official
// Dialogflow protos). The statuses mean what gRPC says they mean
// (https://grpc.github.io/grpc/core/md_doc_statuscodes.html, "[codes]" below) and stand for the HTTP status
// google.rpc.Code gives each (google/rpc/code.proto, "HTTP Mapping", "[code.proto]" below); the gateway's
// side is its error table (docs/reference/errors.md) and the mapping reference's "Unary gRPC calls"
// (docs/reference/mapping.md, "[mapping.md]").

/** The replicas' credential (an API key: sent as x-goog-api-key); the servers echo it in their refusals. */
const KEY = 'AIzaTestKey-0123456789-must-not-leak'
const { create: CREATE, analyze: ANALYZE, stream: STREAM, complete: COMPLETE } = DF_METHOD

let df: StatusServers
let gw: TestGateway
let contact = 934300

t.before(async () => {
  df = await statusServers(t, 2)
  // The same mapping with its conversation steps (the chat's, then the legs') given 2 s (shipped: the default 10 s).
  const short = withCreateDeadline(t, 2)
  const legSteps = '    - name: participant\n'
  writeFileSync(short, readFileSync(short, 'utf8').replace(legSteps, `      deadlineSeconds: 2\n${legSteps}`))
  const route = (mapping: string) =>
    dfRoute(
      mapping,
      df.replicas.map(r => r.url),
      ['audio', 'text'],
      { credential: '${DF_KEY}' }
    )
  gw = await startGateway(t, { routes: { df: route(DF_MAPPING), short: route(short) } }, { DF_KEY: KEY })
})

/** One chat utterance of a new contact on `route`: the HTTP status and the body the platform gets. */
const chat = async (route = 'df') => await dfChat(gw, route, ++contact)

/** Calls of `method` per replica while `fn` runs. */
async function counted<T>(method: string, fn: () => Promise<T>): Promise<[T, number[]]> {
  const before = df.count(method)
  const out = await fn()
  return [out, df.count(method).map((n, i) => n - (before[i] ?? 0))]
}

const sum = (ns: number[]): number => ns.reduce((a, b) => a + b, 0)

t.test(
  'text hook: UNAVAILABLE and RESOURCE_EXHAUSTED are tried on the other replica, and the utterance succeeds',
  async t => {
    // [codes] UNAVAILABLE: "most likely a transient condition, which can be corrected by retrying";
    // RESOURCE_EXHAUSTED: "perhaps a per-user quota" (another region's is its own). [mapping.md]: both are tried
    // on another replica (text.retries).
    df.next(ANALYZE, Status.UNAVAILABLE)
    const [a, calls] = await counted(ANALYZE, () => chat())
    t.equal(a.status, 200, a.text)
    t.same(calls, [1, 1], 'AnalyzeContent: one call on each replica')
    // On the setup's first call this time: the conversation is made on the other replica, then the chat.
    df.next(CREATE, Status.RESOURCE_EXHAUSTED)
    const [b, creates] = await counted(CREATE, () => chat())
    t.equal(b.status, 200, b.text)
    t.same(creates, [1, 1], 'CreateConversation: one call on each replica')
  }
)

t.test(
  'text hook: UNAVAILABLE on both replicas is the upstream failure the docs name, 502 UPSTREAM_BAD_ANSWER with vendorStatus 503',
  async t => {
    // [code.proto] UNAVAILABLE is HTTP 503; docs/concepts/utterance.md: a vendor that answers non-2xx on every
    // replica tried is 502 UPSTREAM_BAD_ANSWER, its status in `vendorStatus`, as for an HTTP vendor's 503s.
    df.next(ANALYZE, Status.UNAVAILABLE, Status.UNAVAILABLE)
    const [a, calls] = await counted(ANALYZE, () => chat())
    t.equal(a.status, 502, a.text)
    t.match(a.body, { code: 'UPSTREAM_BAD_ANSWER', vendorStatus: 503 })
    t.same(calls, [1, 1], 'each replica tried once')
  }
)

t.test(
  'text hook: UNAUTHENTICATED and PERMISSION_DENIED are a refused credential, never tried on the other replica',
  async t => {
    // [codes] UNAUTHENTICATED: "does not have valid authentication credentials"; PERMISSION_DENIED: "does not have
    // permission": every region holds the same key's verdict. [code.proto] 401 and 403; [mapping.md]: "a refused
    // credential (502 UPSTREAM_BAD_ANSWER, vendorStatus 401 or 403)", the answer an HTTP vendor's 401 or 403 gets.
    for (const [status, http] of [
      [Status.UNAUTHENTICATED, 401],
      [Status.PERMISSION_DENIED, 403]
    ] as const) {
      df.next(ANALYZE, status)
      const [a, calls] = await counted(ANALYZE, () => chat())
      t.equal(a.status, 502, a.text)
      t.match(a.body, { code: 'UPSTREAM_BAD_ANSWER', vendorStatus: http }, Status[status])
      t.equal(sum(calls), 1, `${Status[status]}: one call, not retried`)
      t.equal(df.replicas.find(r => r.calls[ANALYZE])?.apiKey, KEY, 'the server was sent the credential')
      t.notOk(a.text.includes(KEY), 'and the answer says nothing of it')
    }
  }
)

t.test('text hook: INVALID_ARGUMENT is MAPPING_FAILED, not retried', async t => {
  // [codes] INVALID_ARGUMENT: "arguments that are problematic regardless of the state of the system": the
  // mapping built a request the API does not take. [mapping.md]: INVALID_ARGUMENT is MAPPING_FAILED (500).
  df.next(ANALYZE, Status.INVALID_ARGUMENT)
  const [a, calls] = await counted(ANALYZE, () => chat())
  t.equal(a.status, 500, a.text)
  t.match(a.body, { code: 'MAPPING_FAILED' })
  t.equal(sum(calls), 1, 'one call')
  t.ok(
    await until(() => gw.logs.lines.some(l => String(l.mappingError ?? '').startsWith('INVALID_ARGUMENT (text.grpc)'))),
    'the log names the status and the call'
  )
})

/** An audio leg of a new contact (TX) on `route`. */
function leg(route = 'df') {
  const init = initMessage({ token: AUDIO_TOKEN, contactId: ++contact, busNo: 4594, perspective: 'TX' })
  return platformLeg(t, gw.url(`/audio/${route}`), init)
}

t.test(
  'a call past its deadline (DEADLINE_EXCEEDED): text 504 UPSTREAM_TIMEOUT; a leg ends (4004); neither retried',
  async t => {
    // [codes] DEADLINE_EXCEEDED: "the deadline expired before the operation could complete" (the caller's own
    // deadline: here the mapping's 2 s for the conversation step); a timeout may have reached the vendor, so it is
    // not repeated. [code.proto] 504; [mapping.md] text: UPSTREAM_TIMEOUT; a setup call: close 4004, `transient`,
    // which before the leg's first vendor session is ready ends it as any vendor's answer then does
    // (docs/concepts/replicas-and-failover.md "Before ready"): UPSTREAM_REFUSED.
    df.next(CREATE, 'hang')
    const [a, calls] = await counted(CREATE, () => chat('short'))
    t.equal(a.status, 504, a.text)
    t.match(a.body, { code: 'UPSTREAM_TIMEOUT' })
    t.equal(sum(calls), 1, 'text: one call')
    df.next(CREATE, 'hang')
    const [l, legCalls] = await counted(CREATE, async () => {
      const l = leg('short')
      return { answer: await l.answer, closed: await l.closed }
    })
    t.match(l.answer, {
      command: 'ERROR',
      messageType: 'UPSTREAM_REFUSED',
      parameters: { vendorCloseCode: 4004, vendorCloseClass: 'transient' }
    })
    t.equal(l.closed.code, 1011)
    t.equal(sum(legCalls), 1, 'audio: one call')
  }
)

t.test(
  'audio.setup: a refused credential or request ends the leg as closeCodes say (UPSTREAM_REFUSED), ERROR first, nothing of the credential',
  async t => {
    // [mapping.md] "A failed setup call ends the setup as the stream's own status would": close 4000 + the status,
    // which the mapping's closeCodes (gateway/mapping/grpc.ts GRPC_CLOSE_CODES: docs/reference/mapping.md
    // "Transports") class. [codes] UNAUTHENTICATED and PERMISSION_DENIED: `auth`, a refused credential;
    // INVALID_ARGUMENT: `bad-request`. Both end the leg, every replica would answer the same
    // (docs/concepts/replicas-and-failover.md "Close codes"): ERROR UPSTREAM_REFUSED, then close 1011.
    for (const [status, cls] of [
      [Status.PERMISSION_DENIED, 'auth'],
      [Status.UNAUTHENTICATED, 'auth'],
      [Status.INVALID_ARGUMENT, 'bad-request']
    ] as const) {
      const name = Status[status]
      const logsBefore = gw.logs.lines.length
      df.next(CREATE, status)
      const [l, calls] = await counted(CREATE, async () => {
        const l = leg()
        return { answer: await l.answer, closed: await l.closed }
      })
      t.match(
        l.answer,
        {
          command: 'ERROR',
          messageType: 'UPSTREAM_REFUSED',
          parameters: { vendorCloseCode: 4000 + status, vendorCloseClass: cls }
        },
        name
      )
      t.equal(l.closed.code, 1011, `${name}: then the close of UPSTREAM_REFUSED`)
      t.equal(sum(calls), 1, `${name}: not tried on the other replica`)
      t.equal(df.replicas.find(r => r.calls[CREATE])?.apiKey, KEY, 'the server was sent the credential')
      const reason = String((l.answer.parameters as Record<string, unknown>).vendorCloseReason)
      t.match(reason, `setup conversation: ${name}`, 'the vendor’s words, with the step’s name')
      t.ok(reason.includes('[redacted]'), 'the credential the server echoed is redacted')
      t.notOk(
        JSON.stringify(l.answer).includes(KEY) || l.closed.reason.includes(KEY),
        'the platform gets nothing of it'
      )
      t.ok(await until(() => gw.logs.lines.slice(logsBefore).some(l => l.event === 'leg_summary')), 'the leg is over')
      t.notOk(JSON.stringify(gw.logs.lines.slice(logsBefore)).includes(KEY), 'nor the log')
    }
    t.same(df.count(STREAM), [0, 0], 'no stream opened')
  }
)

// [codes] RESOURCE_EXHAUSTED: "perhaps a per-user quota" (another region's is its own), UNAVAILABLE: retry,
// elsewhere; issue 34 item 1: "UNAVAILABLE and RESOURCE_EXHAUSTED retryable and failed over"; [mapping.md]: a
// setup call's RESOURCE_EXHAUSTED or UNAVAILABLE fails over, counted against the replica.
for (const code of [Status.RESOURCE_EXHAUSTED, Status.UNAVAILABLE])
  t.test(`audio.setup: ${Status[code]} on one replica opens the leg on the other`, async t => {
    df.next(CREATE, code)
    const streams = sum(df.count(STREAM))
    const completed = sum(df.count(COMPLETE))
    const [one, calls] = await counted(CREATE, async () => {
      const l = leg()
      return { l, answer: await l.answer }
    })
    t.match(one.answer, { command: 'CONNECTED' }, 'the leg is up on the other replica')
    t.same(calls, [1, 1], 'one CreateConversation on each replica')
    t.ok(await until(() => sum(df.count(STREAM)) === streams + 1), 'its stream is open')
    one.l.ws.close(1000)
    t.ok(await until(() => sum(df.count(COMPLETE)) === completed + 1), 'completed at its end')
  })

t.test('audio.setup: UNAVAILABLE on both replicas is UPSTREAM_UNREACHABLE', async t => {
  // docs/reference/errors.md UPSTREAM_UNREACHABLE: "every replica tried failed to connect" (503, 1013).
  df.next(CREATE, Status.UNAVAILABLE, Status.UNAVAILABLE)
  const [both, calls2] = await counted(CREATE, async () => {
    const l = leg()
    return { answer: await l.answer, closed: await l.closed }
  })
  t.match(both.answer, { command: 'ERROR', messageType: 'UPSTREAM_UNREACHABLE' })
  t.equal(both.closed.code, 1013, 'then the close of UPSTREAM_UNREACHABLE')
  t.same(calls2, [1, 1], 'each replica tried once')
  t.notOk(JSON.stringify(both.answer).includes(KEY), 'nothing of the credential')
  t.notOk(
    gw.logs.lines.some(l => l.event === 'teardown_failed'),
    'no teardown failed'
  )
})
