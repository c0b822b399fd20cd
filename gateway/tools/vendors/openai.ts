import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { Cadence, phrase } from './cadence'
import type { Context, Protocol, VendorSession, Verdict } from './session'
import { header, isObject, parseJson, safeEqual, type Json } from './wire'

// OpenAI: the Realtime API's transcription sessions (wss://api.openai.com/v1/realtime?intent=transcription)
// and Chat Completions (POST /v1/chat/completions), one host as at OpenAI.
//
// Sources: the OpenAPI description openai/openai-openapi openapi.yaml (f85dbe2, 2026-08-21): the GA realtime
// client events (RealtimeClientEvent: session.update with a RealtimeTranscriptionSessionCreateRequestGA
// session, input_audio_buffer.append / .commit / .clear) and server events (session.created / .updated,
// input_audio_buffer.committed, conversation.item.input_audio_transcription.delta / .completed, error), the
// audio formats (RealtimeAudioFormats: audio/pcm at 24000 only, audio/pcmu, audio/pcma), and
// CreateChatCompletionRequest / Response; the "Realtime transcription" guide.
//
// Realtime upgrade: `Authorization: Bearer <key>`, missing or wrong → HTTP 401 with an invalid_api_key error
// body (choice: the upgrade's answer is not in the OpenAPI description); the query must say
// intent=transcription (choice: only transcription sessions are emulated; else 400).
// On open: session.created {session: {type: "transcription", …, audio.input.format audio/pcm 24000}}.
// session.update must carry a transcription session (type "transcription"; audio.input.format one of the
// formats above; transcription {model string, language, prompt}; turn_detection server_vad | semantic_vad |
// null); it is answered with session.updated, the effective session. A bad one → an error event
// (invalid_request_error), the session goes on as it was. Errors never close the session (choice, as the
// API's `error` event is informational): invalid JSON → error invalid_json; an unknown type → error
// unknown_event (choice of codes).
// input_audio_buffer.append {audio: base64 in the session's format}: before session.updated it would be read
// as the default 24 kHz PCM: recorded as a protocol error (no error event: the service cannot tell).
// Not base64, or not whole samples → error invalid_audio. input_audio_buffer.commit with less than 100 ms →
// error input_audio_buffer_commit_empty ("buffer too small"); else the buffer is committed and transcribed.
// Server VAD, emulated on the audio clock: every resultEveryMs of audio, input_audio_buffer.committed, one
// conversation.item.input_audio_transcription.delta per word, then .completed {transcript, usage}.
// Sessions end after sessionMaxMs (default 30 minutes, choice: the beta's cap) with an error
// session_expired and close 1000 (choice). Audio faster than real time is taken.
//
// The HTTP API lives under `basePath` (default /v1). Any other path: 404 with an invalid_request_error "Invalid
// URL (<method> <path>)" (choice: the wording api.openai.com answers an unknown path with).
// GET /v1/models with the Bearer key lists models (401 for a wrong key). Chat Completions: Bearer key
// (401 invalid_api_key), a JSON object with a string `model` and a non-empty
// `messages` array of {role: system|developer|user|assistant|tool, content} (else 400
// invalid_request_error), answered with a chat.completion whose first choice says "Suggested reply to:
// <the last user message>". `chatRateLimit` answers the first N requests 429 rate_limit_exceeded with
// `retry-after` (seconds) and x-ratelimit-* headers, as the service does when a limit is reached.
// `stream: true` (or the `chatEventStream` option, a proxy that forces streaming) is answered as the API reference's
// "Streaming" section of Chat Completions says: `text/event-stream`, one `data: <chat.completion.chunk>` event per
// piece of the reply (the role first, then the words, then the finish reason), then `data: [DONE]`.

const FORMATS = ['audio/pcm', 'audio/pcmu', 'audio/pcma']
const ROLES = ['system', 'developer', 'user', 'assistant', 'tool']
const THIRTY_MINUTES = 30 * 60 * 1000

function error(status: number, type: string, code: string, message: string): { status: number; body: Json } {
  return { status, body: { error: { message, type, param: null, code } } }
}

function bearerOk(req: IncomingMessage, apiKey: string | undefined): boolean {
  if (apiKey === undefined) return true
  const key = /^Bearer\s+(.+)$/i.exec(header(req, 'authorization') ?? '')?.[1]
  return key !== undefined && safeEqual(key, apiKey)
}

export function openaiUpgrade(req: IncomingMessage, q: URLSearchParams, apiKey: string | undefined): Verdict {
  if (!bearerOk(req, apiKey)) {
    const e = error(401, 'invalid_request_error', 'invalid_api_key', 'Incorrect API key provided.')
    return { ok: false, status: 401, error: 'invalid_api_key', body: e.body }
  }
  if (q.get('intent') !== 'transcription') {
    const e = error(400, 'invalid_request_error', 'invalid_intent', 'this emulator serves ?intent=transcription only')
    return { ok: false, status: 400, error: 'intent must be transcription', body: e.body }
  }
  return { ok: true }
}

/** `GET /v1/models`: the key's models (what the gateway's probe asks: free, and 401 for a wrong key). */
export function openaiModels(req: IncomingMessage, ctx: Context): { status: number; body: Json } {
  if (!bearerOk(req, ctx.opts.apiKey))
    return error(401, 'invalid_request_error', 'invalid_api_key', 'Incorrect API key provided.')
  const models = ['gpt-4o-transcribe', 'gpt-4o-mini-transcribe', 'gpt-4o-mini', 'gpt-4.1-mini']
  return {
    status: 200,
    body: { object: 'list', data: models.map(id => ({ id, object: 'model', created: 1700000000, owned_by: 'system' })) }
  }
}

type HttpAnswer = { status: number; body: Json | string; headers?: Record<string, string> }

/**
 * The HTTP API under `basePath`: chat completions and the models list; any other path 404 (recorded by the
 * server like every answer). null: the emulator's own report endpoints (/sessions, /healthz).
 */
export function openaiHttp(
  req: IncomingMessage,
  path: string,
  body: Buffer,
  ctx: Context,
  n: number
): HttpAnswer | null {
  if (path === '/sessions' || path === '/healthz') return null
  const base = (ctx.opts.basePath ?? '/v1').replace(/\/+$/, '')
  if (req.method === 'POST' && path === `${base}/chat/completions`) return openaiChat(req, body, ctx, n)
  if (req.method === 'GET' && path === `${base}/models`) return openaiModels(req, ctx)
  return error(404, 'invalid_request_error', 'unknown_url', `Invalid URL (${req.method ?? ''} ${path})`)
}

/** `POST /v1/chat/completions`. `n` counts the requests so far (for the scripted rate limit). */
export function openaiChat(req: IncomingMessage, body: Buffer, ctx: Context, n: number): HttpAnswer {
  if (!bearerOk(req, ctx.opts.apiKey))
    return error(401, 'invalid_request_error', 'invalid_api_key', 'Incorrect API key provided.')
  const limit = ctx.opts.chatRateLimit
  if (limit !== undefined && n <= limit.first) {
    const e = error(429, 'requests', 'rate_limit_exceeded', 'Rate limit reached for requests. Please try again later.')
    return {
      ...e,
      headers: {
        'retry-after': String(limit.retryAfterSeconds),
        'x-ratelimit-limit-requests': '60',
        'x-ratelimit-remaining-requests': '0',
        'x-ratelimit-reset-requests': `${limit.retryAfterSeconds}s`
      }
    }
  }
  const parsed = parseJson(body.toString('utf8'))
  if (!parsed.ok || !isObject(parsed.value))
    return error(400, 'invalid_request_error', 'invalid_json', 'We could not parse the JSON body of your request.')
  const m = parsed.value
  if (typeof m.model !== 'string' || m.model === '')
    return error(400, 'invalid_request_error', 'missing_required_parameter', "Missing required parameter: 'model'.")
  const msgs = m.messages
  if (!Array.isArray(msgs) || msgs.length === 0)
    return error(400, 'invalid_request_error', 'missing_required_parameter', "Missing required parameter: 'messages'.")
  for (const [i, x] of msgs.entries())
    if (
      !isObject(x) ||
      !ROLES.includes(x.role as string) ||
      (typeof x.content !== 'string' && !Array.isArray(x.content))
    )
      return error(400, 'invalid_request_error', 'invalid_value', `Invalid value for 'messages[${i}]'.`)
  const user = [...msgs].reverse().find(x => (x as Json).role === 'user') as Json | undefined
  const content = `Suggested reply to: ${typeof user?.content === 'string' ? user.content : ''}`
  const id = `chatcmpl-${randomUUID().replace(/-/g, '')}`
  const created = Math.floor(Date.now() / 1000)
  if (m.stream === true || ctx.opts.chatEventStream === true) return eventStream(id, created, m.model, content)
  return {
    status: 200,
    body: {
      id,
      object: 'chat.completion',
      created,
      model: m.model,
      choices: [
        { index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' }
      ],
      usage: { prompt_tokens: 20, completion_tokens: 8, total_tokens: 28 },
      system_fingerprint: 'fp_emulator'
    }
  }
}

/** A streamed chat completion: chat.completion.chunk events (role, then each word, then finish_reason), then [DONE]. */
function eventStream(id: string, created: number, model: string, content: string): HttpAnswer {
  const chunk = (delta: Json, finish: string | null): string =>
    `data: ${JSON.stringify({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      system_fingerprint: 'fp_emulator',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }]
    })}\n\n`
  const words = content.split(' ').map((w, i) => chunk({ content: i === 0 ? w : ` ${w}` }, null))
  const body = [chunk({ role: 'assistant', content: '', refusal: null }, null), ...words, chunk({}, 'stop')].join('')
  return {
    status: 200,
    body: `${body}data: [DONE]\n\n`,
    headers: { 'content-type': 'text/event-stream; charset=utf-8' }
  }
}

/** The first problem with a session.update's session (a transcription session, GA), or null. */
function sessionProblem(s: unknown): string | null {
  if (!isObject(s)) return 'session must be an object'
  if (s.type !== 'transcription') return 'session.type must be "transcription" in a transcription session'
  const input = isObject(s.audio) && isObject(s.audio.input) ? s.audio.input : {}
  const f = input.format
  if (f !== undefined) {
    if (!isObject(f) || !FORMATS.includes(f.type as string))
      return `audio.input.format.type must be one of ${FORMATS.join(', ')}`
    if (f.type === 'audio/pcm' && f.rate !== undefined && f.rate !== 24000) return 'audio/pcm is 24000 Hz only'
  }
  const tr = input.transcription
  if (tr !== undefined && tr !== null && (!isObject(tr) || typeof tr.model !== 'string'))
    return 'audio.input.transcription.model must be a string'
  const td = input.turn_detection
  if (td !== undefined && td !== null && (!isObject(td) || !['server_vad', 'semantic_vad'].includes(td.type as string)))
    return 'audio.input.turn_detection.type must be server_vad or semantic_vad'
  return null
}

/** One Realtime transcription session after the upgrade. */
export class OpenAiRealtimeSession implements Protocol {
  private readonly id = `sess_${randomUUID().replace(/-/g, '').slice(0, 24)}`
  private session: Json = {
    type: 'transcription',
    id: this.id,
    object: 'realtime.transcription_session',
    audio: {
      input: {
        format: { type: 'audio/pcm', rate: 24000 },
        transcription: null,
        noise_reduction: null,
        turn_detection: { type: 'server_vad', threshold: 0.5, prefix_padding_ms: 300, silence_duration_ms: 500 }
      }
    },
    include: null
  }
  private updated = false
  private bytesPerMs = 48
  private bytesPerSample = 2
  private readonly cadence: Cadence
  private bufferedMs = 0
  private item = 0
  private events = 0

  constructor(
    private readonly s: VendorSession,
    private readonly ctx: Context
  ) {
    this.cadence = new Cadence(ctx.resultEveryMs)
  }

  open(): void {
    this.send({ type: 'session.created', session: this.session })
    this.s.after(this.ctx.opts.sessionMaxMs ?? THIRTY_MINUTES, () => {
      this.error('invalid_request_error', 'session_expired', 'Your session hit the maximum duration.')
      this.s.close(1000)
    })
  }

  text(text: string): void {
    const parsed = parseJson(text)
    const msg = parsed.ok && isObject(parsed.value) ? parsed.value : null
    if (msg?.type === 'input_audio_buffer.append') return this.append(msg)
    this.s.texts.push(parsed.ok ? parsed.value : { unparsed: text.slice(0, 200) })
    if (msg === null) return this.error('invalid_request_error', 'invalid_json', 'The event is not a JSON object.')
    switch (msg.type) {
      case 'session.update': {
        const bad = sessionProblem(msg.session)
        if (bad !== null) {
          this.s.note(`session.update: ${bad}`)
          return this.error('invalid_request_error', 'invalid_value', bad, msg.event_id)
        }
        this.apply(msg.session as Json)
        this.updated = true
        return this.send({ type: 'session.updated', session: this.session })
      }
      case 'input_audio_buffer.commit':
        if (this.bufferedMs < 100)
          return this.error(
            'invalid_request_error',
            'input_audio_buffer_commit_empty',
            'Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, ' +
              `but buffer only has ${this.bufferedMs.toFixed(2)}ms of audio.`,
            msg.event_id
          )
        return this.transcribe(this.cadence.start, this.cadence.audioMs)
      case 'input_audio_buffer.clear':
        this.bufferedMs = 0
        return this.send({ type: 'input_audio_buffer.cleared' })
      default:
        this.s.note(`unknown event type ${JSON.stringify(msg.type ?? null)}`)
        return this.error(
          'invalid_request_error',
          'unknown_event',
          `Invalid value: '${String(msg.type)}'.`,
          msg.event_id
        )
    }
  }

  binary(): void {
    this.s.note('a binary frame: the Realtime API takes JSON events only')
    this.error('invalid_request_error', 'invalid_event', 'Binary frames are not supported.')
  }

  closed(): void {}

  private apply(update: Json): void {
    const input = (isObject(update.audio) && isObject(update.audio.input) ? update.audio.input : {}) as Json
    const cur = (this.session.audio as Json).input as Json
    ;(this.session.audio as Json).input = { ...cur, ...input }
    if (update.include !== undefined) this.session.include = update.include
    const f = ((this.session.audio as Json).input as Json).format as Json
    this.bytesPerSample = f.type === 'audio/pcm' ? 2 : 1
    this.bytesPerMs = f.type === 'audio/pcm' ? 48 : 8
  }

  private append(msg: Json): void {
    if (typeof msg.audio !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(msg.audio) || msg.audio.length % 4 !== 0) {
      this.s.note('input_audio_buffer.append: audio is not base64')
      return this.error('invalid_request_error', 'invalid_audio', 'audio must be base64', msg.event_id)
    }
    const audio = Buffer.from(msg.audio, 'base64')
    if (this.s.rawFrames !== null && this.s.rawFrames.length < (this.ctx.opts.recordFrames ?? 0))
      this.s.rawFrames.push(JSON.stringify(msg))
    if (!this.updated) this.s.note('audio appended before session.updated: the service would read it as 24 kHz PCM')
    if (audio.length % this.bytesPerSample !== 0) this.s.note(`an append of ${audio.length} bytes: not whole samples`)
    this.s.addAudio(msg.audio.length, audio)
    const ms = audio.length / this.bytesPerMs
    this.bufferedMs += ms
    const turn = (((this.session.audio as Json).input as Json).turn_detection ?? null) !== null
    const crossed = this.cadence.add(ms)
    for (let i = 0; turn && i < crossed; i++) this.transcribe(this.cadence.start, this.cadence.boundary(i, crossed))
  }

  /** A committed item and its transcription: one delta per word, then completed. */
  private transcribe(startMs: number, endMs: number): void {
    if (endMs <= startMs) return
    const item = `item_${String(++this.item).padStart(6, '0')}`
    const words = phrase(this.item)
    this.send({
      type: 'input_audio_buffer.committed',
      previous_item_id: this.item > 1 ? `item_${String(this.item - 1).padStart(6, '0')}` : null,
      item_id: item
    })
    for (const [i, w] of words.entries())
      this.send({
        type: 'conversation.item.input_audio_transcription.delta',
        item_id: item,
        content_index: 0,
        delta: i === 0 ? w : ` ${w}`
      })
    this.send({
      type: 'conversation.item.input_audio_transcription.completed',
      item_id: item,
      content_index: 0,
      transcript: words.join(' '),
      usage: { type: 'duration', seconds: Math.round((endMs - startMs) / 100) / 10 }
    })
    this.cadence.start = endMs
    this.bufferedMs = 0
  }

  private error(type: string, code: string, message: string, eventId?: unknown): void {
    this.send({
      type: 'error',
      error: { type, code, message, param: null, event_id: typeof eventId === 'string' ? eventId : null }
    })
  }

  private send(event: Json): void {
    this.s.send({ event_id: `event_${++this.events}`, ...event })
  }
}
