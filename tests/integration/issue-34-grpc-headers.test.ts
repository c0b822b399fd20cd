import t from 'tap'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, platformLeg, startGateway, TEXT_TOKEN, type TestGateway, until } from '../helpers/gateway'
import { DF_MAPPING, DF_METHOD, dfRoute, type StatusServers, statusServers } from '../helpers/grpc-status-server'
import { utterance } from '../helpers/tls'

// A secret that is not legal gRPC metadata, through `serve` as it ships and the shipped
// mappings/dialogflow-agent-assist.yaml (its unary steps: CreateConversation first). gRPC metadata values are
// printable ASCII (https://grpc.io/docs/guides/metadata/, "Constraints"; grpc-js refuses anything else, quoting
// the value). The usual cause is a Kubernetes secret written with a trailing newline. It is the gateway's
// configuration, not the vendor's verdict: INVALID_ARGUMENT naming the header (docs/reference/mapping.md,
// "Unary gRPC calls": a mapping error, MAPPING_FAILED on the text hook, a refused request for a leg), never a
// refused credential, and the value appears nowhere: not in the answer, not in the log, not sent.

const KEY = 'AIzaTrailingNewline-0123456789-must-not-leak'
const HEADER = 'tenant-secret-0123456789-must-not-leak'
const CREATE = DF_METHOD.create

let df: StatusServers
let gw: TestGateway
let contact = 935100

t.before(async () => {
  df = await statusServers(t, 1)
  const route = (upstream: Record<string, unknown>) =>
    dfRoute(
      DF_MAPPING,
      df.replicas.map(r => r.url),
      ['audio', 'text'],
      upstream
    )
  gw = await startGateway(
    t,
    {
      routes: {
        key: route({ credential: '${DF_KEY}' }),
        header: route({ headers: { 'x-tenant-secret': '${HDR}' } })
      }
    },
    { DF_KEY: `${KEY}\n`, HDR: `${HEADER}\n` }
  )
})

const leaks = (text: string): boolean => text.includes(KEY) || text.includes(HEADER)

for (const [route, header] of [
  ['key', 'x-goog-api-key'],
  ['header', 'x-tenant-secret']
] as const)
  t.test(`${header} with a trailing newline: INVALID_ARGUMENT naming it, its value nowhere`, async t => {
    const logsBefore = gw.logs.lines.length
    const res = await fetch(gw.url(`/text/${route}`), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN },
      body: JSON.stringify(utterance({ contactId: ++contact, busNo: 4594, messageBody: 'hello' }))
    })
    const text = await res.text()
    t.equal(res.status, 500, text)
    t.match(JSON.parse(text), { code: 'MAPPING_FAILED' })
    t.notOk(leaks(text), 'the answer says nothing of the value')
    t.ok(
      await until(() =>
        gw.logs.lines
          .slice(logsBefore)
          .some(l => String(l.mappingError ?? '').includes(`INVALID_ARGUMENT (conversation): header "${header}"`))
      ),
      'the log names the header'
    )
    const l = platformLeg(
      t,
      gw.url(`/audio/${route}`),
      initMessage({ token: AUDIO_TOKEN, contactId: ++contact, busNo: 4594, perspective: 'TX' })
    )
    const answer = await l.answer
    const closed = await l.closed
    t.match(answer, {
      command: 'ERROR',
      messageType: 'UPSTREAM_REFUSED',
      parameters: { vendorCloseCode: 4003, vendorCloseClass: 'bad-request' }
    })
    t.match(String((answer.parameters as Record<string, unknown>).vendorCloseReason), `header "${header}"`)
    t.notOk(leaks(JSON.stringify(answer)) || leaks(closed.reason), 'the leg’s answer says nothing of it')
    t.ok(await until(() => gw.logs.lines.slice(logsBefore).some(l => l.event === 'leg_summary')), 'the leg is over')
    t.notOk(leaks(JSON.stringify(gw.logs.lines.slice(logsBefore))), 'nor the log')
    t.same(df.count(CREATE), [0], 'nothing was sent')
  })
