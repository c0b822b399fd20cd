import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { Cadence, phrase, round3 } from './cadence'
import type { Context, Protocol, VendorSession, Verdict } from './session'
import { Hearing } from './hearing'
import { ChannelSplit } from './stereo'
import { DIGITS_RE, header, isObject, parseJson, safeEqual, type Json } from './wire'

// Deepgram live streaming (/v1/listen)
//
// Upgrade: query `encoding` (mulaw|linear16), `sample_rate` (8000|16000), `channels` 1, or 2 with
// `multichannel=true` (choice: each channel on its own, interleaved; Results per channel with
// channel_index [c, 2], their words ending "channel c"; the audio deinterleaved in the report);
// known boolean options must be true|false, `endpointing` false or an integer, `utterance_end_ms`
// an integer; other parameters pass. Failure: HTTP 400 with `dg-error` header and a JSON body.
// Credentials: `Authorization: Token <key>` or `Bearer <key>` (or subprotocol `token, <key>`);
// failure: HTTP 401 `dg-error: Invalid credentials.`. Every upgrade answer carries `dg-request-id`.
// Frames: binary audio, a whole number of samples; text must be exactly {"type":"KeepAlive"},
// {"type":"Finalize"[, "channel": n]} or {"type":"CloseStream"}. Anything else is recorded and
// ignored (choice: listen v1 documents no error message for it). An empty binary frame is
// recorded and ends the stream like CloseStream (the docs warn that it closes the stream).
// Results every resultEveryMs of audio (with interim_results=true, an interim half-way);
// Finalize → a Results with from_finalize=true for the pending audio; CloseStream → final
// Results for pending audio, Metadata, close 1000. Idle: neither audio nor KeepAlive for
// idleCloseMs (default 10 s, the real service's) → recorded, close 1011 "NET-0001 …" (checked
// every 100–500 ms).

const DG_BOOLEAN_PARAMS = [
  'interim_results',
  'punctuate',
  'smart_format',
  'diarize',
  'vad_events',
  'multichannel',
  'profanity_filter',
  'numerals',
  'filler_words',
  'dictation',
  'measurements',
  'detect_entities',
  'mip_opt_out',
  'no_delay'
]

/** The real service's idle timeout (NET-0001). */
export const DEEPGRAM_IDLE_CLOSE_MS = 10000

export function deepgramUpgrade(req: IncomingMessage, q: URLSearchParams, apiKey: string | undefined): Verdict {
  if (apiKey !== undefined) {
    const auth = header(req, 'authorization') ?? ''
    const m = /^(?:Token|Bearer)\s+(.+)$/i.exec(auth)
    const proto = header(req, 'sec-websocket-protocol') ?? ''
    const pm = /^\s*token\s*,\s*([^,\s]+)\s*$/i.exec(proto)
    const key = m?.[1] ?? pm?.[1]
    if (key === undefined || !safeEqual(key, apiKey)) {
      return {
        ok: false,
        status: 401,
        error: key === undefined ? 'missing credentials' : 'invalid credentials',
        headers: { 'dg-error': 'Invalid credentials.' },
        body: { err_code: 'INVALID_AUTH', err_msg: 'Invalid credentials.' }
      }
    }
  }
  const problems = queryProblems(q)
  if (problems.length === 0) return { ok: true }
  const msg = problems.join('; ')
  return {
    ok: false,
    status: 400,
    error: msg,
    headers: { 'dg-error': msg },
    body: { err_code: 'Bad Request', err_msg: msg }
  }
}

function queryProblems(q: URLSearchParams): string[] {
  const problems: string[] = []
  const encoding = q.get('encoding')
  if (encoding === null) problems.push('query: encoding is required for raw audio (mulaw or linear16)')
  else if (encoding !== 'mulaw' && encoding !== 'linear16')
    problems.push(`query: encoding must be mulaw or linear16 (got "${encoding}")`)
  const rate = q.get('sample_rate')
  if (rate === null) problems.push('query: sample_rate is required with encoding')
  else if (rate !== '8000' && rate !== '16000')
    problems.push(`query: sample_rate must be 8000 or 16000 (got "${rate}")`)
  const channels = q.get('channels')
  if (channels === null) problems.push('query: channels is required (1, or 2 with multichannel=true)')
  else if (channels === '2' && q.get('multichannel') !== 'true')
    problems.push('query: channels=2 needs multichannel=true (each channel transcribed on its own)')
  else if (channels !== '1' && channels !== '2') problems.push(`query: channels must be 1 or 2 (got "${channels}")`)
  for (const name of DG_BOOLEAN_PARAMS) {
    const v = q.get(name)
    if (v !== null && v !== 'true' && v !== 'false') problems.push(`query: ${name} must be true or false (got "${v}")`)
  }
  const ep = q.get('endpointing')
  if (ep !== null && ep !== 'false' && !DIGITS_RE.test(ep))
    problems.push(`query: endpointing must be false or milliseconds (got "${ep}")`)
  const ue = q.get('utterance_end_ms')
  if (ue !== null && !DIGITS_RE.test(ue)) problems.push(`query: utterance_end_ms must be an integer (got "${ue}")`)
  return problems
}

/** One Deepgram stream after the upgrade. */
export class DeepgramStream implements Protocol {
  private readonly encoding: 'linear16' | 'mulaw'
  private readonly rate: number
  private readonly bytesPerSample: number
  /** 2: multichannel, interleaved; results per channel (channel_index [c, 2]). */
  private readonly channels: number
  private readonly interim: boolean
  private readonly model: string
  private readonly modelUuid = randomUUID()
  private readonly idleMs: number
  private readonly cadence: Cadence
  private results = 0
  private lastActivity: number
  private ended = false
  private lateNoted = false
  /** `transcribeFrames`: the platform frames heard, per channel (µ-law; results name them). */
  private readonly hearing: Hearing | null

  constructor(
    private readonly s: VendorSession,
    private readonly ctx: Context,
    private readonly requestId: string
  ) {
    const q = s.params
    this.encoding = q.get('encoding') === 'linear16' ? 'linear16' : 'mulaw'
    this.rate = Number(q.get('sample_rate'))
    this.bytesPerSample = this.encoding === 'linear16' ? 2 : 1
    this.channels = q.get('channels') === '2' ? 2 : 1
    if (this.channels === 2) s.stereo = new ChannelSplit(2, this.encoding === 'linear16' ? 2 : 1)
    this.interim = q.get('interim_results') === 'true'
    this.model = q.get('model') ?? 'nova-3'
    this.idleMs = ctx.opts.idleCloseMs ?? DEEPGRAM_IDLE_CLOSE_MS
    this.cadence = new Cadence(this.interim ? ctx.resultEveryMs / 2 : ctx.resultEveryMs)
    this.lastActivity = ctx.clock.now()
    this.hearing = ctx.opts.transcribeFrames === true && this.encoding === 'mulaw' ? new Hearing(this.channels) : null
  }

  open(): void {
    const every = Math.max(100, Math.min(500, Math.floor(this.idleMs / 4)))
    this.s.every(every, () => {
      if (this.ended || this.ctx.clock.now() - this.lastActivity < this.idleMs) return
      this.ended = true
      this.s.note(`no audio or KeepAlive for ${this.idleMs} ms: closed 1011 NET-0001`)
      this.s.close(1011, 'NET-0001: Deepgram did not receive audio data or a text message within the timeout window.')
    })
  }

  binary(data: Buffer): void {
    if (this.ended) return this.late('audio')
    if (data.length === 0) {
      this.s.note('empty binary frame (Deepgram ends the stream on a zero-length frame)')
      this.finish()
      return
    }
    const bps = this.bytesPerSample * this.channels
    if (data.length % bps !== 0)
      this.s.note(
        `binary frame of ${data.length} bytes is not a whole number of ${this.encoding} samples (${bps} bytes each` +
          `${this.channels > 1 ? `: ${this.channels} channels` : ''})`
      )
    this.s.addAudio(data.length, data)
    this.s.stereo?.add(data)
    this.hearing?.add(data)
    this.lastActivity = this.ctx.clock.now()
    const cadence = this.cadence
    const crossed = cadence.add((data.length / bps / this.rate) * 1000)
    for (let i = 0; i < crossed; i++) {
      const at = cadence.boundary(i, crossed)
      const tick = ++cadence.ticks
      this.resultsAll(cadence.start, at, !this.interim || tick % 2 === 0, false)
    }
  }

  text(text: string): void {
    const parsed = parseJson(text)
    this.s.texts.push(parsed.ok ? parsed.value : { unparsed: text })
    if (this.ended) return this.late('text message')
    if (!parsed.ok || !isObject(parsed.value)) {
      this.s.note('text frame is not a JSON object (only KeepAlive, Finalize and CloseStream are accepted)')
      return
    }
    this.control(parsed.value)
  }

  closed(): void {
    this.ended = true
  }

  private control(msg: Json): void {
    const s = this.s
    const extra = Object.keys(msg).filter(k => k !== 'type' && !(msg.type === 'Finalize' && k === 'channel'))
    if (extra.length > 0) s.note(`${String(msg.type)}: unexpected field(s) ${extra.join(', ')}`)
    switch (msg.type) {
      case 'KeepAlive':
        s.keepalives++
        this.lastActivity = this.ctx.clock.now()
        return
      case 'Finalize':
        if (
          'channel' in msg &&
          (!Number.isInteger(msg.channel) || (msg.channel as number) < 0 || (msg.channel as number) >= this.channels)
        )
          s.note(`Finalize: channel must be below ${this.channels}`)
        this.resultsAll(this.cadence.start, this.cadence.audioMs, true, true)
        return
      case 'CloseStream':
        this.finish()
        return
      default:
        s.note(
          typeof msg.type === 'string' ? `unknown message type "${msg.type}"` : 'text message has no string "type"'
        )
    }
  }

  /** One result per channel (multichannel: each channel on its own, channel_index [c, channels]). */
  private resultsAll(startMs: number, endMs: number, isFinal: boolean, fromFinalize: boolean): void {
    const n = isFinal ? ++this.results : this.results + 1
    for (let ch = 0; ch < this.channels; ch++) this.result(startMs, endMs, isFinal, fromFinalize, n, ch)
    if (isFinal) this.cadence.start = endMs
  }

  private result(startMs: number, endMs: number, isFinal: boolean, fromFinalize: boolean, n: number, ch: number): void {
    const durMs = endMs - startMs
    // Stereo: each channel's words say which channel they came from.
    const words =
      durMs <= 0
        ? []
        : this.hearing !== null
          ? this.hearing.words(startMs, endMs, ch)
          : [...phrase(n), ...(this.channels > 1 ? ['channel', String(ch)] : [])]
    const step = words.length > 0 ? durMs / words.length : 0
    this.s.send({
      type: 'Results',
      channel_index: [ch, this.channels],
      duration: round3(durMs / 1000),
      start: round3(startMs / 1000),
      is_final: isFinal,
      speech_final: isFinal && !fromFinalize,
      from_finalize: fromFinalize,
      channel: {
        alternatives: [
          {
            transcript: words.join(' '),
            confidence: 0.98,
            words: words.map((word, i) => ({
              word,
              start: round3((startMs + i * step) / 1000),
              end: round3((startMs + (i + 1) * step) / 1000),
              confidence: 0.98,
              punctuated_word: i === 0 ? word[0].toUpperCase() + word.slice(1) : word
            }))
          }
        ]
      },
      metadata: {
        request_id: this.requestId,
        model_info: { name: this.model, version: 'emulator', arch: 'emulator' },
        model_uuid: this.modelUuid
      }
    })
  }

  private finish(): void {
    this.ended = true
    const cadence = this.cadence
    if (cadence.pending) this.resultsAll(cadence.start, cadence.audioMs, true, false)
    this.s.send({
      type: 'Metadata',
      transaction_key: 'deprecated',
      request_id: this.requestId,
      sha256: this.s.digest(),
      created: new Date(this.s.openedAt).toISOString(),
      duration: round3(cadence.audioMs / 1000),
      channels: this.channels
    })
    this.s.close(1000)
  }

  private late(what: string): void {
    if (this.lateNoted) return
    this.lateNoted = true
    this.s.note(`${what} after CloseStream`)
  }
}
