import t from 'tap'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { judge } from '../../../gateway/audio/session/failover'
import { GRPC_CLOSE_CODES } from '../../../gateway/mapping/grpc'
import { loadMapping } from '../../../gateway/mapping/compile'
import { grpcCloseCode } from '../../../gateway/upstream/grpc-leg'
import { fromMessage, toMessage } from '../../../gateway/upstream/proto-json'

// Issue 34 item 1: the protobuf JSON form of a gRPC mapping (https://protobuf.dev/programming-guides/json/)
// and what a call's status means to the gateway's failover (its error table).

const mapping = loadMapping(join(__dirname, '..', '..', '..', 'mappings', 'google-stt-v2.yaml'))
const grpc = mapping.audio!.grpc!

t.test(
  'requests in the JSON form: names in lowerCamelCase or as the proto writes them, an unknown field named by its path',
  async t => {
    const ok = toMessage(grpc.protos, grpc.request, {
      recognizer: 'r',
      streaming_config: { config: { explicitDecodingConfig: { encoding: 'MULAW', sample_rate_hertz: 8000 } } }
    })
    t.ok(ok.ok)
    t.same(ok.ok && ok.value, {
      recognizer: 'r',
      streamingConfig: { config: { explicitDecodingConfig: { encoding: 'MULAW', sampleRateHertz: 8000 } } }
    })
    const bad = toMessage(grpc.protos, grpc.request, { streamingConfig: { config: { model: 'x', lang: 'en' } } })
    t.match(bad, { ok: false, path: '/streamingConfig/config/lang', field: 'lang' })
    t.match(
      toMessage(grpc.protos, grpc.request, {
        streamingConfig: { config: { explicitDecodingConfig: { encoding: 'WAV' } } }
      }),
      {
        ok: false,
        message: /encoding must be one of/
      }
    )
  }
)

t.test('responses in the JSON form: Durations as "1.5s"', async t => {
  const out = fromMessage(grpc.protos, grpc.response, {
    results: [
      { isFinal: true, resultEndOffset: { seconds: '7', nanos: 970000000 }, alternatives: [{ transcript: 'x' }] }
    ]
  })
  t.same(out, { results: [{ isFinal: true, resultEndOffset: '7.97s', alternatives: [{ transcript: 'x' }] }] })
  const back = toMessage(grpc.protos, grpc.response, out)
  t.match(back, { ok: true, value: { results: [{ resultEndOffset: { seconds: '7', nanos: 970000000 } }] } })
})

t.test(
  'a call status in the error table: credential refusals and bad requests end the leg, UNAVAILABLE and RESOURCE_EXHAUSTED fail over',
  async t => {
    const closed = (status: number, name: string) =>
      judge(
        { kind: 'closed', code: grpcCloseCode(status), reason: name, socket: { kind: 'grpc', status } },
        'lost',
        mapping.audio!.closeCodes
      )
    t.equal(grpcCloseCode(0), 1000, 'OK is a graceful close')
    for (const [status, name] of [
      [16, 'UNAUTHENTICATED'],
      [7, 'PERMISSION_DENIED']
    ] as const) {
      const j = closed(status, name)
      t.match(j, { final: true, closeClass: 'auth', gatewaySide: false }, `${name}: a refused credential, never walked`)
      t.equal(j.error.code, 'UPSTREAM_REFUSED')
    }
    t.match(
      closed(3, 'INVALID_ARGUMENT'),
      { final: true, closeClass: 'bad-request' },
      'INVALID_ARGUMENT: a refused request'
    )
    t.match(
      closed(8, 'RESOURCE_EXHAUSTED'),
      { final: false, closeClass: 'rate-exceeded' },
      'RESOURCE_EXHAUSTED: fail over'
    )
    t.match(
      closed(10, 'ABORTED'),
      { final: false, closeClass: 'transient' },
      'ABORTED (a stream past its limit): fail over'
    )
    t.match(
      closed(14, 'UNAVAILABLE'),
      { final: false, closeClass: null, gatewaySide: true },
      'UNAVAILABLE: a replica gone, counted against its health and failed over'
    )
    t.equal(Object.keys(GRPC_CLOSE_CODES).length, 11)
  }
)

t.test('audio.setup and audio.teardown without audio.grpc: a problem at each, with its line and column', async t => {
  // Their steps are unary calls on the replica of the leg's stream (docs/reference/mapping.md "Unary gRPC calls"):
  // a WebSocket mapping has no gRPC replica to make them on. The shipped Dialogflow mapping without its audio.grpc.
  const shipped = readFileSync(join(__dirname, '..', '..', '..', 'mappings', 'dialogflow-agent-assist.yaml'), 'utf8')
  const section =
    /\n {2}grpc:\n {4}method: google\.cloud\.dialogflow\.v2\.Participants\/StreamingAnalyzeContent\n(?: {4}.*\n)+/
  t.match(shipped, section)
  const file = join(t.testdir({}), 'no-audio-grpc.yaml')
  writeFileSync(file, shipped.replace(section, '\n'))
  t.throws(() => loadMapping(file), {
    message:
      /no-audio-grpc\.yaml:\d+:3: \/audio\/setup: needs audio\.grpc[\s\S]*no-audio-grpc\.yaml:\d+:3: \/audio\/teardown: needs audio\.grpc/
  })
})
