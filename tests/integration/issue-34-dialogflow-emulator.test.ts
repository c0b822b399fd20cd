import t from 'tap'
import { Client, credentials, type ServiceError, status as Status } from '@grpc/grpc-js'
import { type DialogflowEmulator, DIALOGFLOW_PROTOS, startDialogflow } from '../../gateway/tools/vendors/dialogflow'
import { toMessage } from '../../gateway/upstream/proto-json'
import { googleProtosDir, loadProtos } from '../../gateway/upstream/protos'
import { rawStreamCall } from '../helpers/grpc'

// The Dialogflow emulator (gateway/tools/vendors/dialogflow.ts), built from the official protos, refuses what
// the API refuses, each check following the section named in dialogflow-checks.ts: participant.proto's
// StreamingAnalyzeContentRequest comment ("The first message must contain participant, config ... The message
// must not contain input"; after audio_config "all subsequent messages must contain input_audio"), its
// enable_extended_streaming field (LINEAR_16 and MULAW only, "InvalidArgument Error will be returned"),
// CreateParticipantRequest and Participant.Role, and conversation.proto's CreateConversationRequest. An unknown
// field is INVALID_ARGUMENT. Each case is a real gRPC call from a client with the same protos; the requests
// the gateway sends pass (issue-34-dialogflow.test).

const protos = loadProtos(DIALOGFLOW_PROTOS, [googleProtosDir()])
const PKG = 'google.cloud.dialogflow.v2'
const STREAM = protos.method(`${PKG}.Participants/StreamingAnalyzeContent`)!

function client(df: DialogflowEmulator): Client {
  return new Client(df.url.replace('grpc://', ''), credentials.createInsecure())
}

async function unary(df: DialogflowEmulator, method: string, req: unknown): Promise<[ServiceError | null, any]> {
  const m = protos.method(`${PKG}.${method}`)!
  const json = toMessage(protos, protos.typesOf(m).request, req)
  if (!json.ok) throw new Error(json.message)
  const c = client(df)
  try {
    return await new Promise(resolve =>
      c.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, json.value, (err, v) =>
        resolve([err ?? null, v])
      )
    )
  } finally {
    c.close()
  }
}

/** One stream: these requests (raw bytes), then a half-close; the status it ended with. */
const stream = (df: DialogflowEmulator, requests: Buffer[]): Promise<ServiceError | null> =>
  rawStreamCall(df.url, STREAM.path, requests)

const req = (json: unknown): Buffer => {
  const m = toMessage(protos, `${PKG}.StreamingAnalyzeContentRequest`, json)
  if (!m.ok) throw new Error(m.message)
  return STREAM.requestSerialize(m.value)
}

t.test('the emulator refuses what the API refuses, and takes a well-formed call', async t => {
  const df = await startDialogflow({ resultEveryMs: 1000 })
  t.teardown(() => df.close())
  const parent = 'projects/p/locations/global'
  let [err, conv] = await unary(df, 'Conversations/CreateConversation', { parent, conversation: {} })
  t.equal(err?.code, Status.INVALID_ARGUMENT, 'a conversation without its profile [CreateConversationRequest]')
  ;[err, conv] = await unary(df, 'Conversations/CreateConversation', {
    parent,
    conversation: { conversationProfile: `${parent}/conversationProfiles/x` }
  })
  t.equal(err, null, 'a conversation from a profile')
  let part: any
  ;[err, part] = await unary(df, 'Participants/CreateParticipant', { parent: conv.name, participant: {} })
  t.equal(err?.code, Status.INVALID_ARGUMENT, 'a participant without a role [Participant.Role]')
  ;[err, part] = await unary(df, 'Participants/CreateParticipant', {
    parent: conv.name,
    participant: { role: 'END_USER' }
  })
  t.equal(err, null, 'an END_USER participant')
  const config = {
    participant: part.name,
    audioConfig: { audioEncoding: 'AUDIO_ENCODING_MULAW', sampleRateHertz: 8000, languageCode: 'en-US' },
    enableExtendedStreaming: true
  }
  const audio = req({ inputAudio: Buffer.alloc(800, 0xff).toString('base64') })
  t.equal((await stream(df, [audio]))?.code, Status.INVALID_ARGUMENT, 'audio before config (no participant, no config)')
  t.equal(
    (await stream(df, [req({ participant: part.name }), audio]))?.code,
    Status.INVALID_ARGUMENT,
    'a first request without the config'
  )
  t.equal(
    (await stream(df, [req({ ...config, inputAudio: 'AAAA' })]))?.code,
    Status.INVALID_ARGUMENT,
    'a first request that carries input as well'
  )
  const flac = { ...config, audioConfig: { ...config.audioConfig, audioEncoding: 'AUDIO_ENCODING_FLAC' } }
  t.equal(
    (await stream(df, [req(flac), audio]))?.code,
    Status.INVALID_ARGUMENT,
    'a wrong encoding for extended streaming (FLAC)'
  )
  // An unknown field: number 99 (length-delimited) in the first request.
  const unknown = Buffer.concat([req(config), Buffer.from([0x9a, 0x06, 0x01, 0x41])])
  t.equal((await stream(df, [unknown]))?.code, Status.INVALID_ARGUMENT, 'an unknown field')
  t.equal(
    (await stream(df, [req(config), audio, req(config)]))?.code,
    Status.INVALID_ARGUMENT,
    'a config again after audio'
  )
  t.equal(await stream(df, [req(config), audio, audio]), null, 'a well-formed stream ends OK at its half-close')
  ;[err] = await unary(df, 'Participants/AnalyzeContent', { participant: part.name, textInput: { text: 'hi' } })
  t.equal(err?.code, Status.INVALID_ARGUMENT, 'chat without its language code [TextInput]')
  ;[err] = await unary(df, 'Conversations/CompleteConversation', { name: conv.name })
  t.equal(err, null, 'completed')
  ;[err] = await unary(df, 'Participants/AnalyzeContent', {
    participant: part.name,
    textInput: { text: 'hi', languageCode: 'en-US' }
  })
  t.equal(err?.code, Status.FAILED_PRECONDITION, 'nothing goes into a completed conversation')
  // A request after the half-close cannot be sent: HTTP/2 refuses DATA on a half-closed stream (RFC 9113 §5.1),
  // and the client library refuses the write; the emulator ends such a stream with its half-close.
  const c = client(df)
  const s = c.makeBidiStreamRequest(
    STREAM.path,
    (b: Buffer) => b,
    (b: Buffer) => b
  )
  s.on('data', () => {})
  const refused = new Promise<string>(resolve => s.on('error', (e: { code?: unknown }) => resolve(String(e.code))))
  s.write(req(config))
  s.end()
  s.write(audio)
  t.equal(
    await refused,
    'ERR_STREAM_WRITE_AFTER_END',
    'a request after the half-close is refused by the client library'
  )
  c.close()
})
