import t from 'tap'
import { join } from 'node:path'
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData } from '@grpc/grpc-js'
import { loadMapping } from '../../gateway/mapping/compile'
import { unaryCall } from '../../gateway/upstream/grpc-unary'

// upstream/grpc-unary.ts `unaryCall` never throws and always settles: whatever goes wrong on the gateway's side
// is a status (INTERNAL) with a detail saying what, never an exception on a leg's control chain or a promise that
// never settles. Against a real gRPC server (google.cloud.dialogflow.v2.Conversations from the official protos,
// conversation.proto: CreateConversation answers a Conversation, whose start_time is a google.protobuf.Timestamp).

const mapping = loadMapping(join(__dirname, '..', '..', 'mappings', 'dialogflow-agent-assist.yaml'))
const create = mapping.text!.setup!.find(s => s.name === 'conversation')!.method
const REQUEST = { parent: 'projects/p/locations/global', conversation: { conversationProfile: 'x' } }

/** A Conversations server whose CreateConversation answers `answer` (proto-loader's object form), on an ephemeral port. */
async function server(answer: object): Promise<string> {
  const s = new Server()
  s.addService({ CreateConversation: create.definition } as never, {
    CreateConversation: (_call: ServerUnaryCall<object, object>, cb: sendUnaryData<object>) => cb(null, answer)
  })
  const port = await new Promise<number>((resolve, reject) =>
    s.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
      err === null ? resolve(p) : reject(err)
    )
  )
  t.teardown(() => s.forceShutdown())
  return `grpc://127.0.0.1:${port}`
}

t.test('a URL that is not a gRPC one: INTERNAL, saying so, not an exception', async t => {
  const out = await unaryCall('wss://vendor.example/v1', create, REQUEST, {}, 5000)
  t.match(out, { ok: false, code: 13, gateway: true, details: /could not be made: a gRPC upstream is grpcs:\/\/host/ })
})

t.test('an answer that cannot be read (a Timestamp past year 275760: RangeError) is INTERNAL, and settles', async t => {
  const url = await server({ name: 'c1', startTime: { seconds: 1e15, nanos: 0 } })
  const out = await unaryCall(url, create, REQUEST, {}, 5000)
  t.match(out, {
    ok: false,
    code: 13,
    gateway: true,
    details: /the answer \(google.cloud.dialogflow.v2.Conversation\) could not be read/
  })
  const fine = await server({ name: 'c2', startTime: { seconds: 1_700_000_000, nanos: 0 } })
  t.match(await unaryCall(fine, create, REQUEST, {}, 5000), {
    ok: true,
    value: { name: 'c2', startTime: '2023-11-14T22:13:20.000Z' }
  })
})
