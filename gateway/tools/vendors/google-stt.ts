import { createHash } from 'node:crypto'
import { createServer, type Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  type handleBidiStreamingCall,
  Server,
  ServerCredentials,
  type ServerDuplexStream,
  status as Status
} from '@grpc/grpc-js'
import { toMessage } from '../../upstream/proto-json'
import { googleProtosDir, loadProtos, type ProtoSet } from '../../upstream/protos'
import { Cadence, phrase } from './cadence'
import { Hearing } from './hearing'
import { configProblem, laterProblem, recognizerProblem, type Refusal } from './google-stt-checks'
import { EmulatedStream, type StreamReport } from './grpc-stream'

// An emulator of Google Cloud Speech-to-Text v2 streaming recognition
// (google.cloud.speech.v2.Speech/StreamingRecognize), a gRPC server built from the official protos (the
// google-proto-files package). It refuses what the API refuses (google-stt-checks.ts, each check with its
// reference) and answers what it hears: a final every `resultEveryMs` of audio (an interim half-way when
// streaming_features.interim_results is set), its transcript "frames A-B" with `transcribeFrames` (the
// numbered frames of tests/helpers/audio.ts), with words whose offsets and a resultEndOffset counted from
// the start of the stream's audio. A stream past `maxStreamAudioMs` of audio ends ABORTED [quotas: 5
// minutes]. A half-close gets the final for the pending audio, then OK. A request can never follow the
// half-close: HTTP/2 itself refuses DATA on a half-closed stream (RFC 9113 §5.1, STREAM_CLOSED).

const METHOD = 'google.cloud.speech.v2.Speech/StreamingRecognize'
const REQUEST = 'google.cloud.speech.v2.StreamingRecognizeRequest'
const RESPONSE = 'google.cloud.speech.v2.StreamingRecognizeResponse'

export interface GoogleSttOptions {
  port?: number
  host?: string
  /** The region this endpoint serves (recognizers must be in it). Default global. */
  location?: string
  /** Accepted API key (x-goog-api-key); with neither this nor `serviceAccount`, no credential is checked. */
  apiKey?: string
  /** The service account whose self-signed JWTs are accepted (its public key, PEM). */
  serviceAccount?: { email: string; publicKeyPem: string }
  /** Results cadence in ms of audio (default 1000; 0: none but at half-close). */
  resultEveryMs?: number
  transcribeFrames?: boolean
  /** Audio per stream before ABORTED (default 5 minutes, the API's). */
  maxStreamAudioMs?: number
  log?: (line: string) => void
}

/** What one stream did, as a test reads it. */
export interface SttStreamReport extends StreamReport {
  recognizer: string | null
  config: Record<string, unknown> | null
  requests: number
  maxAudioRequestBytes: number
  /** sha256 of the audio bytes, in order. */
  sha256: string
  finals: string[]
  interims: number
}

export interface GoogleSttEmulator {
  /** grpc://host:port */
  url: string
  port: number
  /** http://host:port/sessions (the reports as JSON). */
  httpUrl: string
  sessions: SttStreamReport[]
  close: () => Promise<void>
}

export async function startGoogleStt(opts: GoogleSttOptions = {}): Promise<GoogleSttEmulator> {
  const protos = loadProtos(['google/cloud/speech/v2/cloud_speech.proto'], [googleProtosDir()])
  const m = protos.method(METHOD)
  if (m === null) throw new Error(`${METHOD} is not in the protos`)
  const sessions: SttStreamReport[] = []
  const server = new Server()
  const handler: handleBidiStreamingCall<Buffer, object> = call => {
    const report = newReport(sessions.length + 1)
    sessions.push(report)
    new SttStream(call, protos, opts, report)
  }
  server.addService(
    {
      StreamingRecognize: {
        path: m.path,
        requestStream: true,
        responseStream: true,
        // Raw bytes in: the emulator walks them for unknown fields before decoding.
        requestSerialize: (b: Buffer) => b,
        requestDeserialize: (b: Buffer) => b,
        responseSerialize: m.responseSerialize,
        responseDeserialize: m.responseDeserialize,
        originalName: 'streamingRecognize'
      }
    },
    { StreamingRecognize: handler }
  )
  const host = opts.host ?? '127.0.0.1'
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${opts.port ?? 0}`, ServerCredentials.createInsecure(), (err, p) =>
      err === null ? resolve(p) : reject(err)
    )
  )
  const http = await reportServer(host, sessions)
  const httpPort = (http.address() as AddressInfo).port
  opts.log?.(`google-stt-v2 emulator on grpc://${host}:${port}`)
  return {
    url: `grpc://${host}:${port}`,
    port,
    httpUrl: `http://${host}:${httpPort}`,
    sessions,
    close: async () => {
      http.close()
      await new Promise<void>(resolve => server.tryShutdown(() => resolve()))
      server.forceShutdown()
    }
  }
}

async function reportServer(host: string, sessions: SttStreamReport[]): Promise<HttpServer> {
  const http = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify(sessions))
  })
  await new Promise<void>(resolve => http.listen(0, host, resolve))
  return http
}

function newReport(id: number): SttStreamReport {
  return {
    id,
    recognizer: null,
    config: null,
    requests: 0,
    audioRequests: 0,
    audioBytes: 0,
    maxAudioRequestBytes: 0,
    audioMs: 0,
    sha256: '',
    finals: [],
    interims: 0,
    refusal: null,
    ended: null
  }
}

/** One StreamingRecognize call (what every emulated stream does: grpc-stream.ts). */
class SttStream extends EmulatedStream<SttStreamReport> {
  private readonly hash = createHash('sha256')
  /** Channels transcribed apart (features.multiChannelMode SEPARATE_RECOGNITION_PER_CHANNEL), else 1. */
  private separate = 1

  constructor(
    call: ServerDuplexStream<Buffer, object>,
    protos: ProtoSet,
    private readonly opts: GoogleSttOptions,
    report: SttStreamReport
  ) {
    super(call, protos, REQUEST, buf => decode(protos, buf), opts, report)
  }

  protected override received(): void {
    this.report.requests++
  }

  protected later(req: Record<string, any>): void {
    const audio = typeof req.audio === 'string' ? Buffer.from(req.audio, 'base64') : Buffer.alloc(0)
    const problem = laterProblem(req, audio.length)
    if (problem !== null) return this.refuse(problem)
    this.audio(audio)
  }

  protected first(req: Record<string, any>): void {
    const problem = recognizerProblem(req.recognizer, this.opts.location ?? 'global') ?? configProblem(req)
    if (problem !== null) return this.refuse(problem)
    const config = req.streamingConfig.config as Record<string, any>
    const d = config.explicitDecodingConfig as { encoding: string; sampleRateHertz: number; audioChannelCount?: number }
    this.report.recognizer = req.recognizer
    this.report.config = req.streamingConfig
    const bytesPerSample = d.encoding === 'LINEAR16' ? 2 : 1
    const channels = d.audioChannelCount ?? 1
    this.bytesPerMs = (bytesPerSample * d.sampleRateHertz * channels) / 1000
    // [proto RecognitionFeatures.MultiChannelMode]: unspecified, only the first channel is transcribed;
    // SEPARATE_RECOGNITION_PER_CHANNEL, each on its own, results tagged with channel_tag 1..N.
    this.separate = config.features?.multiChannelMode === 'SEPARATE_RECOGNITION_PER_CHANNEL' ? channels : 1
    this.heard = this.opts.transcribeFrames === true ? new Hearing(channels) : null
    this.interim = req.streamingConfig.streamingFeatures?.interimResults === true
    const every = this.opts.resultEveryMs ?? 1000
    this.cadence = new Cadence(this.interim ? every / 2 : every)
    this.state = 'STREAMING'
  }

  protected override audio(data: Buffer): void {
    const r = this.report
    r.maxAudioRequestBytes = Math.max(r.maxAudioRequestBytes, data.length)
    this.hash.update(data)
    r.sha256 = this.hash.copy().digest('hex')
    super.audio(data)
  }

  protected overLimit(audioMs: number): Refusal | null {
    return audioMs > (this.opts.maxStreamAudioMs ?? 300_000)
      ? { code: Status.ABORTED, details: 'Max duration of 5 minutes reached for stream.' }
      : null
  }

  protected result(startMs: number, endMs: number, isFinal: boolean): void {
    for (let ch = 0; ch < this.separate; ch++) this.channelResult(startMs, endMs, isFinal, ch)
    if (isFinal) this.cadence.start = endMs
  }

  /** One channel's result (`channel_tag` ch + 1 when channels are transcribed apart); none without words. */
  private channelResult(startMs: number, endMs: number, isFinal: boolean, ch: number): void {
    const n = this.report.finals.length + 1
    const words = this.heard !== null ? this.heard.words(startMs, endMs, ch) : phrase(n)
    if (words.length === 0) return
    const step = (endMs - startMs) / words.length
    const offset = (ms: number): string => `${(ms / 1000).toFixed(3)}s`
    const transcript = words.join(' ')
    const response = {
      results: [
        {
          alternatives: [
            {
              transcript,
              confidence: isFinal ? 0.93 : 0,
              words: words.map((word, i) => ({
                word,
                startOffset: offset(startMs + i * step),
                endOffset: offset(startMs + (i + 1) * step)
              }))
            }
          ],
          isFinal,
          stability: isFinal ? 0 : 0.5,
          resultEndOffset: offset(endMs),
          ...(this.separate > 1 ? { channelTag: ch + 1 } : {}),
          languageCode: String((this.report.config as any)?.config?.languageCodes?.[0] ?? 'en-US').toLowerCase()
        }
      ]
    }
    if (isFinal) this.report.finals.push(transcript)
    else this.report.interims++
    this.send(response)
  }

  private send(json: unknown): void {
    const out = toMessage(this.protos, RESPONSE, json)
    if (!out.ok) throw new Error(`the emulator built a bad response: ${out.path}: ${out.message}`)
    this.call.write(out.value)
  }
}

function decode(protos: ProtoSet, buf: Buffer): unknown {
  const m = protos.method(METHOD)
  return m === null ? {} : m.requestDeserialize(buf)
}
