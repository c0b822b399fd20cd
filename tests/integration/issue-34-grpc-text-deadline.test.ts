import t from 'tap'
import { status as Status } from '@grpc/grpc-js'
import { startGateway, type TestGateway, until } from '../helpers/gateway'
import type { StatusServers } from '../helpers/grpc-status-server'
import {
  DF_MAPPING,
  DF_METHOD,
  dfChat,
  dfRoute,
  statusServers,
  withCreateDeadline
} from '../helpers/grpc-status-server'
import { freePort } from '../helpers/process'

// The text hook over gRPC (text.grpc, the shipped mappings/dialogflow-agent-assist.yaml) through `serve` as it
// ships, against gRPC servers built from the official Dialogflow protos (helpers/grpc-status-server.ts).
// - docs/reference/configuration.md `text.timeoutSeconds`: "Deadline of one vendor exchange, from the mapped
//   request to the whole answer (… a second replica included). Past it: 504 UPSTREAM_TIMEOUT." Here 2 s, and
//   the mapping's CreateConversation step is given 60 s of its own (deadlineSeconds, its maximum): the
//   utterance's deadline bounds it.
// - docs/concepts/utterance.md: no replica tried could be connected to is 503 UPSTREAM_UNREACHABLE
//   (docs/reference/errors.md), as for an HTTP vendor: a gRPC replica nothing listens at is that, not a vendor's
//   answer.

const { create: CREATE, analyze: ANALYZE } = DF_METHOD

let df: StatusServers
let gw: TestGateway
let contact = 934900

t.before(async () => {
  const closed = [await freePort(), await freePort()]
  df = await statusServers(t, 2)
  const slow = withCreateDeadline(t, 60)
  const route = (mapping: string, urls: string[]) => dfRoute(mapping, urls, ['text'])
  gw = await startGateway(t, {
    text: { timeoutSeconds: 2 },
    routes: {
      slow: route(
        slow,
        df.replicas.map(r => r.url)
      ),
      gone: route(
        DF_MAPPING,
        closed.map(p => `grpc://127.0.0.1:${p}`)
      )
    }
  })
})

const chat = async (route: string) => await dfChat(gw, route, ++contact)

const sum = (ns: number[]): number => ns.reduce((a, b) => a + b, 0)

t.test('text.timeoutSeconds bounds the setup steps: a conversation never made is 504 within it', async t => {
  const calls = sum(df.count(CREATE))
  const analyzed = sum(df.count(ANALYZE))
  // CreateConversation is held by the server until the test lets it go: the answer must come before that, when
  // the utterance's 2 s are over (not the step's own 60 s).
  df.next(CREATE, 'hold')
  let answer: Awaited<ReturnType<typeof chat>> | null = null
  void chat('slow').then(a => {
    answer = a
  })
  t.ok(await until(() => answer !== null, 30_000), 'answered while CreateConversation is still held')
  df.release()
  t.equal(answer!.status, 504, answer!.text)
  t.match(answer!.body, { code: 'UPSTREAM_TIMEOUT' })
  t.equal(sum(df.count(CREATE)), calls + 1, 'one CreateConversation')
  t.equal(sum(df.count(ANALYZE)), analyzed, 'no AnalyzeContent: no time was left for it')
})

t.test('no replica can be connected to: 503 UPSTREAM_UNREACHABLE', async t => {
  const a = await chat('gone')
  t.equal(a.status, 503, a.text)
  t.match(a.body, { code: 'UPSTREAM_UNREACHABLE' })
  t.notOk('vendorStatus' in a.body, 'no vendor answered')
})

t.test('a vendor that answers UNAVAILABLE on both replicas is still its answer: 502, vendorStatus 503', async t => {
  df.next(ANALYZE, Status.UNAVAILABLE, Status.UNAVAILABLE)
  const a = await chat('slow')
  t.equal(a.status, 502, a.text)
  t.match(a.body, { code: 'UPSTREAM_BAD_ANSWER', vendorStatus: 503 })
})
