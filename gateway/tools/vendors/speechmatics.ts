import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { Cadence, phrase, round3 } from './cadence'
import { Hearing } from './hearing'
import type { Context, Protocol, VendorSession, Verdict } from './session'
import { header, isObject, parseJson, safeEqual, type Json } from './wire'

// Speechmatics real-time ASR (wss://eu.rt.speechmatics.com/v2)
//
// Sources: the Realtime API reference (docs.speechmatics.com/api-ref/realtime-transcription-websocket: the
// protocol overview, handshake responses, "Websocket errors"), its AsyncAPI 3.0 file spec/realtime.yaml
// ("Speechmatics Realtime ASR API" 2.0.0, speechmatics/docs at 8783a7a), "Limits – Realtime", and the JS SDK
// (@speechmatics/real-time-client: EndOfStream carries the last seq_no).
//
// Upgrade: `Authorization: Bearer <key>` (or a temporary key in the `jwt` query parameter); missing or
// wrong → HTTP 401 (the reference: "401 Unauthorized - when the API key is not valid").
// On open: an Info {type: "concurrent_session_usage"} (the reference: sent right after the handshake).
// The first message must be StartRecognition: {message, audio_format {type: "raw", encoding pcm_f32le |
// pcm_s16le | mulaw, sample_rate integer} (or {type: "file"}), transcription_config {language, …}} with the
// schema's types and ranges (max_delay 0.7-4, enable_partials boolean, diarization and model enums,
// end_of_utterance_silence_trigger 0-2). Not JSON / not an object → Error invalid_message; another message
// first, or binary audio before RecognitionStarted → Error protocol_error ("messages sent in the wrong order");
// a bad configuration → Error invalid_config. "After any error, the transcription is terminated and the
// connection is closed": close 1003 for protocol_error (the reference's table), 1003 for invalid_message and
// invalid_config too (choice: the table lists no code for them). RecognitionStarted after `startDelayMs`
// (choice: default 0; the service can take seconds, up to 15 with a large additional_vocab).
// Every binary AddAudio is acknowledged with AudioAdded {seq_no} (1, 2, …). EndOfStream {last_seq_no} must
// name the last AddAudio sent (recorded when it does not: choice, the reference only types it); the answer:
// the final AddTranscript for pending audio, then EndOfTranscript; the client then closes (the emulator
// closes 1000 after 5 s otherwise). Audio after EndOfStream → Warning add_audio_after_eos, ignored.
// Other client messages (ForceEndOfUtterance, SetRecognitionConfig, GetSpeakers) are checked by type only.
// Results every resultEveryMs of audio: AddTranscript {format "2.9", metadata {start_time, end_time,
// transcript}, results [{type "word", start_time, end_time, alternatives [{content, confidence, language}]}]},
// and an AddPartialTranscript half-way when enable_partials. Audio faster than real time is taken (the
// reference: the server reads what it can and acknowledges later; it refuses nothing for it).
// Idle: no audio and no WebSocket ping for idleCloseMs (the service: 3 minutes) → Error idle_timeout,
// close 1008.

const ENCODINGS = ['pcm_f32le', 'pcm_s16le', 'mulaw']
const MODELS = ['standard', 'enhanced', 'melia-1']
const DIARIZATION = ['none', 'speaker', 'channel', 'channel_and_speaker']
const CLIENT_MESSAGES = [
  'StartRecognition',
  'EndOfStream',
  'ForceEndOfUtterance',
  'SetRecognitionConfig',
  'GetSpeakers'
]
export const SPEECHMATICS_IDLE_CLOSE_MS = 3 * 60 * 1000

export function speechmaticsUpgrade(req: IncomingMessage, q: URLSearchParams, apiKey: string | undefined): Verdict {
  if (apiKey === undefined) return { ok: true }
  const bearer = /^Bearer\s+(.+)$/i.exec(header(req, 'authorization') ?? '')?.[1] ?? q.get('jwt') ?? undefined
  if (bearer !== undefined && safeEqual(bearer, apiKey)) return { ok: true }
  return {
    ok: false,
    status: 401,
    error: bearer === undefined ? 'missing API key' : 'invalid API key',
    body: { message: 'Unauthorized' }
  }
}

/** The first problem with a StartRecognition, or null (its schema in the AsyncAPI file). */
function startProblem(msg: Json): string | null {
  const f = msg.audio_format
  if (!isObject(f)) return 'audio_format is required'
  if (f.type === 'raw') {
    if (!ENCODINGS.includes(f.encoding as string)) return `audio_format.encoding must be one of ${ENCODINGS.join(', ')}`
    if (!Number.isInteger(f.sample_rate) || (f.sample_rate as number) <= 0)
      return 'audio_format.sample_rate must be an integer'
  } else if (f.type !== 'file') return 'audio_format.type must be raw or file'
  const c = msg.transcription_config
  if (!isObject(c)) return 'transcription_config is required'
  if (typeof c.language !== 'string' || c.language === '') return 'transcription_config.language is required'
  if (c.max_delay !== undefined && !(typeof c.max_delay === 'number' && c.max_delay >= 0.7 && c.max_delay <= 4))
    return 'transcription_config.max_delay must be 0.7-4'
  for (const k of ['enable_partials', 'enable_entities'])
    if (c[k] !== undefined && typeof c[k] !== 'boolean') return `transcription_config.${k} must be a boolean`
  for (const [k, allowed] of [
    ['model', MODELS],
    ['operating_point', MODELS],
    ['diarization', DIARIZATION],
    ['max_delay_mode', ['flexible', 'fixed']]
  ] as const)
    if (c[k] !== undefined && !(allowed as readonly unknown[]).includes(c[k]))
      return `transcription_config.${k} must be one of ${allowed.join(', ')}`
  if (c.additional_vocab !== undefined && !Array.isArray(c.additional_vocab))
    return 'transcription_config.additional_vocab must be an array'
  const eou = isObject(c.conversation_config) ? c.conversation_config.end_of_utterance_silence_trigger : undefined
  if (eou !== undefined && !(typeof eou === 'number' && eou >= 0 && eou <= 2))
    return 'conversation_config.end_of_utterance_silence_trigger must be 0-2'
  return null
}

/** One Speechmatics real-time session after the upgrade. */
export class SpeechmaticsSession implements Protocol {
  private state: 'awaiting-start' | 'starting' | 'started' | 'ending' | 'ended' = 'awaiting-start'
  private bytesPerSample = 1
  private rate = 8000
  private partials = false
  private language = 'en'
  private seqNo = 0
  private cadence: Cadence
  private lastActivity: number
  private results = 0
  /** `transcribeFrames`: the platform frames heard (µ-law; results name them). */
  private readonly hearing: Hearing | null

  constructor(
    private readonly s: VendorSession,
    private readonly ctx: Context
  ) {
    this.cadence = new Cadence(ctx.resultEveryMs)
    this.hearing = ctx.opts.transcribeFrames === true ? new Hearing() : null
    this.lastActivity = ctx.clock.now()
  }

  open(): void {
    this.s.send({
      message: 'Info',
      type: 'concurrent_session_usage',
      reason: '1 concurrent sessions active out of quota 50',
      usage: 1,
      quota: 50,
      last_updated: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
      region: 'eu'
    })
    const idle = this.ctx.opts.idleCloseMs ?? SPEECHMATICS_IDLE_CLOSE_MS
    this.s.ws?.on('ping', () => {
      this.lastActivity = this.ctx.clock.now()
    })
    this.s.every(Math.max(100, Math.min(1000, Math.floor(idle / 4))), () => {
      if (this.state === 'ended' || this.ctx.clock.now() - this.lastActivity < idle) return
      this.fail('idle_timeout', 'no audio or ping for the idle limit', 1008, false)
    })
  }

  text(text: string): void {
    const parsed = parseJson(text)
    this.s.texts.push(parsed.ok ? parsed.value : { unparsed: text.slice(0, 200) })
    if (this.state === 'ended') return
    if (!parsed.ok || !isObject(parsed.value))
      return this.fail('invalid_message', `not a JSON object: ${text.slice(0, 60)}`)
    const msg = parsed.value
    if (!CLIENT_MESSAGES.includes(msg.message as string))
      return this.fail('invalid_message', `unknown message ${JSON.stringify(msg.message ?? null)}`)
    if (this.state === 'awaiting-start') {
      if (msg.message !== 'StartRecognition')
        return this.fail('protocol_error', `${String(msg.message)} before StartRecognition`)
      return this.start(msg)
    }
    if (msg.message === 'StartRecognition') return this.fail('protocol_error', 'a second StartRecognition')
    if (msg.message === 'EndOfStream') return this.endOfStream(msg)
  }

  binary(data: Buffer): void {
    if (this.state === 'ended') return
    if (this.state === 'awaiting-start' || this.state === 'starting')
      return this.fail('protocol_error', 'AddAudio before RecognitionStarted')
    if (this.state === 'ending') {
      this.s.send({ message: 'Warning', type: 'add_audio_after_eos', reason: 'AddAudio after EndOfStream is ignored' })
      return
    }
    if (data.length % this.bytesPerSample !== 0) this.s.note(`AddAudio of ${data.length} bytes: not whole samples`)
    this.s.addAudio(data.length, data)
    if (this.bytesPerSample === 1) this.hearing?.add(data)
    this.lastActivity = this.ctx.clock.now()
    this.s.send({ message: 'AudioAdded', seq_no: ++this.seqNo })
    const failAfter = this.ctx.opts.failAfterAudioMs
    if (
      failAfter !== undefined &&
      this.cadence.audioMs + (data.length / this.bytesPerSample / this.rate) * 1000 >= failAfter
    )
      return this.fail('internal_error', 'emulated server fault', 1011)
    const crossed = this.cadence.add((data.length / this.bytesPerSample / this.rate) * 1000)
    for (let i = 0; i < crossed; i++) {
      const at = this.cadence.boundary(i, crossed)
      if (this.partials) this.transcript('AddPartialTranscript', this.cadence.start, (this.cadence.start + at) / 2)
      this.transcript('AddTranscript', this.cadence.start, at)
    }
  }

  closed(): void {
    this.state = 'ended'
  }

  private start(msg: Json): void {
    const bad = startProblem(msg)
    if (bad !== null) return this.fail('invalid_config', bad)
    const f = msg.audio_format as Json
    const c = msg.transcription_config as Json
    this.rate = f.type === 'raw' ? (f.sample_rate as number) : 16000
    this.bytesPerSample = f.encoding === 'mulaw' ? 1 : f.encoding === 'pcm_s16le' ? 2 : 4
    this.partials = c.enable_partials === true
    this.language = c.language as string
    this.state = 'starting'
    this.s.after(this.ctx.opts.startDelayMs ?? 0, () => {
      if (this.state !== 'starting') return
      this.state = 'started'
      this.s.send({
        message: 'RecognitionStarted',
        orchestrator_version: 'emulator',
        id: randomUUID(),
        language_pack_info: {
          adapted: false,
          itn: true,
          language_description: 'English',
          word_delimiter: ' ',
          writing_direction: 'left-to-right'
        }
      })
    })
  }

  private endOfStream(msg: Json): void {
    if (!Number.isInteger(msg.last_seq_no))
      return this.fail('invalid_message', 'EndOfStream needs an integer last_seq_no')
    if (this.state !== 'started') return this.fail('protocol_error', 'EndOfStream before RecognitionStarted')
    if (msg.last_seq_no !== this.seqNo)
      this.s.note(`EndOfStream last_seq_no ${String(msg.last_seq_no)}, but ${this.seqNo} AddAudio were sent`)
    this.state = 'ending'
    if (this.cadence.pending) this.transcript('AddTranscript', this.cadence.start, this.cadence.audioMs)
    this.s.send({ message: 'EndOfTranscript' })
    this.s.after(5000, () => this.s.close(1000))
  }

  private transcript(message: 'AddTranscript' | 'AddPartialTranscript', startMs: number, endMs: number): void {
    const final = message === 'AddTranscript'
    const n = final ? ++this.results : this.results + 1
    const words = this.hearing !== null ? this.hearing.words(startMs, endMs) : phrase(n)
    if (words.length === 0) words.push('')
    const step = (endMs - startMs) / words.length
    this.s.send({
      message,
      format: '2.9',
      metadata: { start_time: round3(startMs / 1000), end_time: round3(endMs / 1000), transcript: words.join(' ') },
      results: words.map((content, i) => ({
        type: 'word',
        start_time: round3((startMs + i * step) / 1000),
        end_time: round3((startMs + (i + 1) * step) / 1000),
        alternatives: [{ content, confidence: final ? 0.96 : 0, language: this.language }]
      }))
    })
    if (final) this.cadence.start = endMs
  }

  /** An in-band Error, then the close (1003 for client errors; the reference's table for the rest). */
  private fail(type: string, reason: string, code = 1003, record = true): void {
    if (record) this.s.note(`${type}: ${reason}`)
    this.state = 'ended'
    this.s.send({ message: 'Error', type, reason })
    this.s.close(code, type)
  }
}
