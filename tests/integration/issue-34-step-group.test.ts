import t, { type Test } from 'tap'
import { status as Status } from '@grpc/grpc-js'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, platformLeg, startGateway, type TestGateway, until } from '../helpers/gateway'
import { mappingCopy } from '../helpers/grpc'
import { DF_MAPPING, DF_METHOD, dfRoute, type StatusServers, statusServers } from '../helpers/grpc-status-server'

// A contact's group (docs/reference/mapping.md, "Unary gRPC calls": a teardown's `when: last` runs when the
// contact's last leg ends) through `serve` as it ships, the shipped mappings/dialogflow-agent-assist.yaml and
// gRPC servers built from the official Dialogflow protos (helpers/grpc-status-server.ts). A leg that ran the setup
// counts in its contact's group until its session ends, whatever became of its stream; a leg that was gone before
// its setup came back never joins. Either way, the conversation is completed (CompleteConversation,
// conversation.proto) when the contact's last leg ends.

let contact = 934700
const { create: CREATE, participant: PARTICIPANT, complete: COMPLETE, stream: STREAM } = DF_METHOD
let df: StatusServers
let gw: TestGateway

t.before(async () => {
  df = await statusServers(t, 1)
  // The shipped mapping, but a stream is ready at its vendor's first word (as the WebSocket vendors' `ready`), so
  // a stream the vendor refuses at once is refused before ready: the leg ran its setup, its stream never flowed.
  const ready = mappingCopy(
    t,
    DF_MAPPING,
    '  frames:\n    encoding: mulaw\n',
    '  ready:\n    when: "true"\n  frames:\n    encoding: mulaw\n'
  )
  const route = (mapping: string) =>
    dfRoute(
      mapping,
      df.replicas.map(r => r.url),
      ['audio']
    )
  gw = await startGateway(t, { routes: { df: route(DF_MAPPING), ready: route(ready) } })
})

const sum = (ns: number[]): number => ns.reduce((a, b) => a + b, 0)

function leg(route: string, contactId: number, perspective: 'TX' | 'RX') {
  const init = initMessage({ token: AUDIO_TOKEN, contactId, busNo: 4594, perspective })
  return platformLeg(t, gw.url(`/audio/${route}`), init)
}

/**
 * The contact's RX leg opens and flows while `tx` (its TX leg) comes and goes; then the RX leg ends, the
 * contact's last: the conversation is completed, once.
 */
async function rxAround(t: Test, route: string, greet: boolean, tx: (id: number) => Promise<void>): Promise<void> {
  const id = ++contact
  const created = sum(df.count(CREATE))
  const completed = sum(df.count(COMPLETE))
  if (greet) df.next(STREAM, 'greet')
  const rx = leg(route, id, 'RX')
  t.match(await rx.answer, { command: 'CONNECTED' }, 'the RX leg is up')
  await tx(id)
  t.equal(sum(df.count(CREATE)), created + 1, 'one conversation for the contact')
  t.equal(sum(df.count(COMPLETE)), completed, 'not completed while the RX leg lives')
  rx.ws.close(1000)
  t.ok(
    await until(() => sum(df.count(COMPLETE)) === completed + 1),
    'CompleteConversation when the RX leg, the last, ends'
  )
}

t.test('a leg whose stream was refused after its setup leaves the group', async t => {
  await rxAround(t, 'ready', true, async id => {
    // The stream is refused before ready (INVALID_ARGUMENT: the leg ends, UPSTREAM_REFUSED) after its participant
    // was made: its setup joined the group.
    const participants = sum(df.count(PARTICIPANT))
    df.next(STREAM, Status.INVALID_ARGUMENT)
    const tx = leg('ready', id, 'TX')
    t.match(await tx.answer, { command: 'ERROR', messageType: 'UPSTREAM_REFUSED' })
    await tx.closed
    t.equal(sum(df.count(PARTICIPANT)), participants + 1, 'the TX leg’s setup ran')
  })
})

t.test('a leg closed while its setup runs never joins the group', async t => {
  await rxAround(t, 'df', false, async id => {
    const participants = sum(df.count(PARTICIPANT))
    const summaries = () => gw.logs.lines.filter(l => l.event === 'leg_summary').length
    const ended = summaries()
    // The TX participant is held by the server; meanwhile the platform ends the TX leg, and its session is over.
    df.next(PARTICIPANT, 'hold')
    const tx = leg('df', id, 'TX')
    t.ok(await until(() => sum(df.count(PARTICIPANT)) === participants + 1), 'the TX leg’s setup is under way')
    tx.ws.close(1000)
    await tx.closed
    t.ok(await until(() => summaries() > ended), 'the TX leg is over')
    // Then its participant comes, for a leg that is gone: its setup is over, and it joins nothing.
    df.release()
    // The late answer reaches the gateway: nothing to see from outside until the RX leg ends (a join, had there
    // been one, would have been sent a moment after it came).
    await new Promise(r => setTimeout(r, 1000))
  })
})
