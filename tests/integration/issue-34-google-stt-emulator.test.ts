import t, { type Test } from 'tap'
import { generateKeyPairSync } from 'node:crypto'
import { Metadata, type ServiceError, status as Status } from '@grpc/grpc-js'
import { systemClock } from '../../gateway/clock'
import { type GoogleSttEmulator, startGoogleStt } from '../../gateway/tools/vendors/google-stt'
import { googleAuthHeaders } from '../../gateway/upstream/google-auth'
import { GrpcStream } from '../../gateway/upstream/grpc-leg'
import { toMessage } from '../../gateway/upstream/proto-json'
import { googleProtosDir, loadProtos } from '../../gateway/upstream/protos'
import { audioFrame } from '../../gateway/upstream/proto-json'
import { rawStreamCall } from '../helpers/grpc'

// The Speech-to-Text v2 emulator (gateway/tools/vendors/google-stt.ts), built from the official protos,
// refuses what the API refuses, each check following the section named in google-stt-checks.ts:
// cloud_speech.proto's StreamingRecognizeRequest comment ("The first message must contain a recognizer and
// optionally a streaming_config message and must not contain audio. All subsequent messages must contain
// audio and must not contain a streaming_config message"), the recognizer field (Required; the `_` implicit
// recognizer holds no configuration), ExplicitDecodingConfig (encoding required; sample_rate_hertz
// 8000-48000), the audio field's "Maximum size ... 15 KB per request", and "Service account authorization
// without OAuth" for self-signed JWTs. Each case is a real gRPC call from a client with the same protos.

const protos = loadProtos(['google/cloud/speech/v2/cloud_speech.proto'], [googleProtosDir()])
const METHOD = protos.method('google.cloud.speech.v2.Speech/StreamingRecognize')!
const REQUEST = 'google.cloud.speech.v2.StreamingRecognizeRequest'
const RECOGNIZER = 'projects/p/locations/global/recognizers/_'
const CONFIG = {
  config: {
    explicitDecodingConfig: { encoding: 'MULAW', sampleRateHertz: 8000, audioChannelCount: 1 },
    model: 'telephony',
    languageCodes: ['en-US']
  }
}

const encode = (json: unknown): Buffer => {
  const m = toMessage(protos, REQUEST, json)
  if (!m.ok) throw new Error(m.message)
  return METHOD.requestSerialize(m.value)
}
const audio = (n: number): Buffer => audioFrame(5, Buffer.alloc(n, 0xff), 0, n)

/** One call: these raw requests, then a half-close; the status it ended with. */
const call = (stt: GoogleSttEmulator, requests: Buffer[], metadata?: Metadata): Promise<ServiceError | null> =>
  rawStreamCall(stt.url, METHOD.path, requests, metadata)

async function emulator(t: Test, opts: Parameters<typeof startGoogleStt>[0] = {}): Promise<GoogleSttEmulator> {
  const e = await startGoogleStt(opts)
  t.teardown(() => e.close())
  return e
}

t.test('the emulator refuses what Speech-to-Text v2 refuses, with the API status', async t => {
  const stt = await emulator(t)
  const cases: [string, Buffer[], Status, RegExp][] = [
    [
      'a first request without the recognizer',
      [encode({ streamingConfig: CONFIG })],
      Status.INVALID_ARGUMENT,
      /recognizer/
    ],
    [
      'a first request without the config',
      [encode({ recognizer: RECOGNIZER })],
      Status.INVALID_ARGUMENT,
      /streaming_config/
    ],
    [
      'audio before the config',
      [encode({ recognizer: RECOGNIZER }), audio(800)],
      Status.INVALID_ARGUMENT,
      /streaming_config/
    ],
    [
      'audio in the first request',
      [encode({ recognizer: RECOGNIZER, audio: Buffer.alloc(8).toString('base64') })],
      Status.INVALID_ARGUMENT,
      /must not contain audio/
    ],
    [
      'an unknown field (number 9, not in StreamingRecognizeRequest)',
      [Buffer.concat([encode({ recognizer: RECOGNIZER, streamingConfig: CONFIG }), Buffer.from([0x48, 0x01])])],
      Status.INVALID_ARGUMENT,
      /unknown field/
    ],
    [
      'a wrong encoding (unspecified)',
      [
        encode({
          recognizer: RECOGNIZER,
          streamingConfig: { config: { ...CONFIG.config, explicitDecodingConfig: { sampleRateHertz: 8000 } } }
        })
      ],
      Status.INVALID_ARGUMENT,
      /encoding is required/
    ],
    [
      'a sample rate out of range',
      [
        encode({
          recognizer: RECOGNIZER,
          streamingConfig: {
            config: { ...CONFIG.config, explicitDecodingConfig: { encoding: 'MULAW', sampleRateHertz: 4000 } }
          }
        })
      ],
      Status.INVALID_ARGUMENT,
      /8000-48000/
    ],
    [
      'a config again after the first request',
      [encode({ recognizer: RECOGNIZER, streamingConfig: CONFIG }), encode({ streamingConfig: CONFIG })],
      Status.INVALID_ARGUMENT,
      /Only the first request/
    ],
    [
      'audio over the per-request limit',
      [encode({ recognizer: RECOGNIZER, streamingConfig: CONFIG }), audio(16_000)],
      Status.INVALID_ARGUMENT,
      /over the 15360 byte limit/
    ],
    [
      'a recognizer in another region than the endpoint',
      [encode({ recognizer: 'projects/p/locations/europe-west4/recognizers/_', streamingConfig: CONFIG })],
      Status.INVALID_ARGUMENT,
      /Expected resource location to be global/
    ]
  ]
  for (const [what, requests, code, details] of cases) {
    const err = await call(stt, requests)
    t.equal(err?.code, code, `${what}: ${Status[code]}`)
    t.match(err?.details ?? '', details, `${what}: says why`)
  }
  const ok = await call(stt, [encode({ recognizer: RECOGNIZER, streamingConfig: CONFIG }), audio(800), audio(800)])
  t.equal(ok, null, 'a conforming call ends OK')
})

t.test('the stream limit: past it the call ends ABORTED, as the API does after 5 minutes of audio', async t => {
  const stt = await emulator(t, { maxStreamAudioMs: 1000 })
  const err = await call(stt, [
    encode({ recognizer: RECOGNIZER, streamingConfig: CONFIG }),
    ...Array.from({ length: 11 }, () => audio(800))
  ])
  t.equal(err?.code, Status.ABORTED)
})

t.test(
  'the gateway writes nothing after its half-close (HTTP/2 would refuse a DATA frame on the half-closed stream)',
  async t => {
    const stt = await emulator(t)
    const method = {
      protos,
      definition: METHOD,
      name: 'google.cloud.speech.v2.Speech/StreamingRecognize',
      request: REQUEST,
      response: 'google.cloud.speech.v2.StreamingRecognizeResponse',
      audioField: 5,
      maxAudioBytes: 15000,
      deadlineMs: null,
      auth: 'none' as const
    }
    const closed = await new Promise<{ code: number; reason: string }>(resolve => {
      const s = new GrpcStream(stt.url, { method, headers: {}, connectTimeoutMs: 2000 }, systemClock, {
        onOpen: () => {
          s.sendText(JSON.stringify({ recognizer: RECOGNIZER, streamingConfig: CONFIG }))
          s.sendBinary(Buffer.alloc(40_000, 0xff))
          s.close(1000, 'done')
          s.sendBinary(Buffer.alloc(800, 0xff))
          s.sendText(JSON.stringify({ recognizer: RECOGNIZER }))
        },
        onText: () => {},
        onBinary: () => {},
        onClose: (code, reason) => resolve({ code, reason })
      })
    })
    t.equal(closed.code, 1000, 'the call ended OK')
    const r = stt.sessions[0]!
    t.equal(r.refusal, null)
    t.equal(r.audioBytes, 40_000, 'the audio before the half-close, and nothing after it')
    t.equal(r.audioRequests, 3, 'a 40,000-byte write went as three requests within the limit')
    t.ok(r.maxAudioRequestBytes <= 15_000)
  }
)

t.test(
  'Google credentials: a service account signs its own tokens (google-auth-library), an API key goes as x-goog-api-key; neither refused, others are',
  async t => {
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
    const email = 'gateway@demo-project.iam.gserviceaccount.com'
    const stt = await emulator(t, {
      apiKey: 'AIza-test-key',
      serviceAccount: { email, publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString() }
    })
    const key = JSON.stringify({
      type: 'service_account',
      client_email: email,
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      private_key_id: 'k1'
    })
    const conforming = [encode({ recognizer: RECOGNIZER, streamingConfig: CONFIG }), audio(800)]
    const md = (h: Record<string, string>): Metadata => {
      const m = new Metadata()
      for (const [k, v] of Object.entries(h)) m.set(k, v)
      return m
    }
    const headers = await googleAuthHeaders(key, 'us-central1-speech.googleapis.com:443')()
    t.match(headers.authorization, /^Bearer [\w-]+\.[\w-]+\.[\w-]+$/, 'a bearer token from the service account key')
    t.notMatch(JSON.stringify(headers), /PRIVATE KEY/, 'the key itself is never sent')
    t.equal(await call(stt, conforming, md(headers)), null, 'the self-signed token is accepted')
    t.same(
      await googleAuthHeaders(key, 'us-central1-speech.googleapis.com:443')(),
      headers,
      'the token is reused until near its expiry'
    )
    t.equal(
      await call(stt, conforming, md(await googleAuthHeaders('AIza-test-key', 'speech.googleapis.com:443')())),
      null,
      'the API key is accepted'
    )
    t.equal((await call(stt, conforming))?.code, Status.UNAUTHENTICATED, 'no credential: UNAUTHENTICATED')
    t.equal(
      (await call(stt, conforming, md({ authorization: 'Bearer a.b.c' })))?.code,
      Status.UNAUTHENTICATED,
      'a token not signed by the service account: UNAUTHENTICATED'
    )
    t.equal(
      (await call(stt, conforming, md({ 'x-goog-api-key': 'wrong' })))?.code,
      Status.INVALID_ARGUMENT,
      'a wrong API key: INVALID_ARGUMENT (API_KEY_INVALID), as the API answers it'
    )
  }
)
