/**
 * Strict emulators of four real streaming APIs, for tests and local runs:
 *
 * | kind           | path                     | the gateway is | audio                         |
 * |----------------|--------------------------|----------------|-------------------------------|
 * | `deepgram`     | `/v1/listen`             | client         | binary (mulaw / linear16)     |
 * | `assemblyai`   | `/v3/ws`                 | client         | binary (pcm_mulaw / pcm_s16le)|
 * | `twilio-media` | `/media`                 | Twilio's side  | JSON `media.payload` base64   |
 * | `audiohook`    | `/api/v1/audiohook/ws`   | AudioHook client (Genesys' side) | binary PCMU |
 *
 * Every frame is checked against the vendor's documented shape; each violation is appended to the
 * session's `errors` (a conforming client leaves it empty). Where the real service answers a
 * violation (an `Error` frame, a close code, an AudioHook `disconnect`), the emulator answers the
 * same way; where the documentation says nothing, it records the error and carries on.
 * Results are emitted on a fixed cadence of *audio time* received (`resultEveryMs`), so tests are
 * deterministic whatever the send rate.
 *
 * Session report counters: `frames` = audio-carrying messages (binary frames, or Twilio `media`
 * events), `bytes` = their size on the wire, `audioBytes` = audio payload bytes (equal to `bytes`
 * for binary kinds; base64-decoded for Twilio), `sha256` = hash of the audio payload bytes in order.
 * `texts` = every text message received, parsed, except Twilio `media` events (counted in frames).
 * Upgrades refused at the HTTP level also appear as (closed) sessions, with the reason in `errors`.
 *
 * Choices where the public documentation is silent are marked "(choice)" below.
 */
import { listenEmulator } from './emulator-server'
import { createHash, createHmac, randomUUID, timingSafeEqual, type Hash } from 'node:crypto'
import { STATUS_CODES, createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { WebSocket, WebSocketServer, type RawData } from 'ws'

export type RealVendorKind = 'deepgram' | 'assemblyai' | 'twilio-media' | 'audiohook'

export interface RealVendorOptions {
  kind: RealVendorKind
  /** 0 = ephemeral (default). */
  port?: number
  /** Default 127.0.0.1. */
  host?: string
  /**
   * Required credential; absent: none checked. deepgram: `Authorization: Token|Bearer <key>`
   * (or subprotocol `token, <key>`); assemblyai: `Authorization: <key>`; twilio-media:
   * `Authorization: Bearer <key>` or a valid `X-Twilio-Signature` made with this key as auth token;
   * audiohook: `X-API-KEY: <key>`.
   */
  apiKey?: string
  /** Results cadence, in milliseconds of audio received. Default 1000; 0 = never. */
  resultEveryMs?: number
  /**
   * deepgram: close 1011 (NET-0001) after this long with neither audio nor KeepAlive. Default
   * 10000, like the real service. assemblyai: inactivity timeout when the client did not ask for
   * one with `inactivity_timeout` (only if this option is given; the real service has none by default).
   */
  idleCloseMs?: number
  /** assemblyai: session cap (real: 3 h, close 3008). Default 3 h. */
  sessionMaxMs?: number
  /** Default: no logging. */
  log?: (line: string) => void
}

export interface RealVendorSession {
  id: number
  kind: RealVendorKind
  path: string
  query: Record<string, string>
  /** Upgrade request headers, lower-cased; credential values replaced by "[REDACTED]". */
  headers: Record<string, string>
  frames: number
  bytes: number
  /** Decoded payload bytes for JSON-base64 formats. */
  audioBytes: number
  /** Hex sha256 of the audio payload bytes in arrival order. */
  sha256: string
  texts: unknown[]
  errors: string[]
  /** deepgram/assemblyai: KeepAlive messages; audiohook: pings; twilio-media: 0. */
  keepalives: number
  /** audiohook: whether `Signature` and `Signature-Input` were both present (not verified); else null. */
  signed: boolean | null
  closed: boolean
  closeCode: number | null
  closeReason: string
  openedAt: number
  closedAt: number | null
}

export interface RealVendorEmulator {
  readonly kind: RealVendorKind
  readonly port: number
  /** ws://host:port/<vendor path> */
  readonly url: string
  readonly httpUrl: string
  sessions(): RealVendorSession[]
  /** Abruptly terminates every open session socket (TCP destroy, no close frame). */
  dropAll(): void
  /** Sends a close frame to every open session. */
  closeAll(code: number, reason?: string): void
  /** Stops listening, terminates sessions, clears every timer; resolves when fully closed. */
  close(): Promise<void>
}

/** WebSocket path of each emulated API. */
export const REAL_VENDOR_PATHS: Readonly<Record<RealVendorKind, string>> = Object.freeze({
  deepgram: '/v1/listen',
  assemblyai: '/v3/ws',
  'twilio-media': '/media',
  audiohook: '/api/v1/audiohook/ws'
})

/**
 * Twilio request signature for a WebSocket upgrade: base64 HMAC-SHA1 of the full `wss://` URL
 * (no POST parameters) keyed with the account auth token.
 */
export function twilioSignature(authToken: string, url: string): string {
  return createHmac('sha1', authToken).update(url).digest('base64')
}

const MAX_PAYLOAD = 4 * 1024 * 1024
const THREE_HOURS_MS = 3 * 60 * 60 * 1000
const UUID_RE =
  /^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-5][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$/
const DURATION_RE = /^PT(?:\d*\.)?\d+S$/
const DIGITS_RE = /^(?:0|[1-9]\d*)$/
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/
const REDACTED = '[REDACTED]'
const SECRET_HEADERS = new Set([
  'authorization',
  'x-api-key',
  'signature',
  'signature-input',
  'x-twilio-signature',
  'cookie',
  'proxy-authorization'
])
const SECRET_QUERY = new Set(['token', 'key', 'api_key', 'apikey', 'access_token'])

type Json = Record<string, unknown>

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function rawToBuffer(data: RawData): Buffer {
  if (Array.isArray(data)) return Buffer.concat(data)
  if (data instanceof ArrayBuffer) return Buffer.from(data)
  return data
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch {
    return { ok: false }
  }
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000
}

/** ISO-8601 duration in seconds, as AudioHook writes it ("PT1.23S"). */
function isoDuration(seconds: number): string {
  return `PT${round3(seconds)}S`
}

function parseIsoDuration(d: string): number {
  return Number(d.slice(2, -1))
}

/** Deterministic stand-in words for result number `n`. */
function phrase(n: number): string[] {
  return ['emulated', 'segment', String(n)]
}

function redactHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined) continue
    const value = Array.isArray(v) ? v.join(', ') : v
    const secret = SECRET_HEADERS.has(k) || (k === 'sec-websocket-protocol' && /(^|,)\s*token\s*,/i.test(value))
    out[k] = secret ? REDACTED : value
  }
  return out
}

function redactQuery(params: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of params) out[k] = SECRET_QUERY.has(k.toLowerCase()) ? REDACTED : v
  return out
}

function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name]
  return Array.isArray(v) ? v[0] : v
}

/**
 * Splits audio time into result boundaries: each `step` ms of audio crossed yields one tick.
 * `start` is where the current, not yet finalised, result segment begins.
 */
class Cadence {
  audioMs = 0
  start = 0
  ticks = 0
  private next: number

  constructor(readonly step: number) {
    this.next = step
  }

  /** Adds audio; returns how many boundaries were crossed. */
  add(ms: number): number {
    this.audioMs += ms
    if (this.step <= 0) return 0
    let n = 0
    while (this.audioMs + 1e-9 >= this.next) {
      n++
      this.next += this.step
    }
    return n
  }

  /** Audio time of tick `i` counted from the last `add` (0-based among the ones it returned). */
  boundary(i: number, crossed: number): number {
    return this.next - this.step * (crossed - i)
  }
}

type Verdict =
  | { ok: true }
  | { ok: false; status: number; error: string; headers?: Record<string, string>; body?: unknown }

interface Protocol {
  open(): void
  binary(data: Buffer): void
  text(text: string, raw: Buffer): void
  /** The socket closed; `byUs` when the emulator started the close or dropped the socket. */
  closed(code: number, byUs: boolean): void
}

class Session {
  readonly openedAt = Date.now()
  frames = 0
  bytes = 0
  audioBytes = 0
  keepalives = 0
  signed: boolean | null = null
  readonly texts: unknown[] = []
  readonly errors: string[] = []
  closeCode: number | null = null
  closeReason = ''
  closedAt: number | null = null
  /** The emulator started the close (or dropped the socket). */
  closingByUs = false
  ws: WebSocket | null = null
  private readonly timers = new Set<NodeJS.Timeout>()
  private readonly hash: Hash = createHash('sha256')
  private finalDigest: string | null = null

  constructor(
    readonly id: number,
    readonly kind: RealVendorKind,
    readonly path: string,
    readonly query: Record<string, string>,
    readonly params: URLSearchParams,
    readonly headers: Record<string, string>,
    readonly req: IncomingMessage,
    private readonly log: ((line: string) => void) | undefined
  ) {}

  get isOpen(): boolean {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN
  }

  note(msg: string): void {
    this.errors.push(msg)
    this.log?.(`${this.kind} session ${this.id} error: ${msg}`)
  }

  addAudio(wireBytes: number, audio: Uint8Array): void {
    this.frames++
    this.bytes += wireBytes
    this.audioBytes += audio.length
    this.hash.update(audio)
  }

  digest(): string {
    return this.finalDigest ?? this.hash.copy().digest('hex')
  }

  send(msg: unknown): void {
    if (this.isOpen) this.ws?.send(JSON.stringify(msg))
  }

  /** Closes from our side (close frame). */
  close(code: number, reason = ''): void {
    this.closingByUs = true
    this.clearTimers()
    if (this.isOpen) this.ws?.close(code, reason)
  }

  terminate(): void {
    this.closingByUs = true
    this.clearTimers()
    this.ws?.terminate()
  }

  every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms)
    t.unref()
    this.timers.add(t)
  }

  after(ms: number, fn: () => void): NodeJS.Timeout {
    const t = setTimeout(() => {
      this.timers.delete(t)
      fn()
    }, ms)
    t.unref()
    this.timers.add(t)
    return t
  }

  cancel(t: NodeJS.Timeout | null): void {
    if (t === null) return
    clearTimeout(t)
    this.timers.delete(t)
  }

  clearTimers(): void {
    for (const t of this.timers) clearTimeout(t) // clearTimeout also clears intervals
    this.timers.clear()
  }

  markClosed(code: number, reason: string): void {
    this.clearTimers()
    this.closeCode = code
    this.closeReason = reason
    this.closedAt = Date.now()
    this.finalDigest = this.hash.digest('hex')
  }

  /** A refused upgrade: never opened. */
  markRejected(status: number, error: string): void {
    this.errors.push(error)
    this.closeReason = `upgrade refused: HTTP ${status}`
    this.closedAt = Date.now()
    this.finalDigest = this.hash.digest('hex')
  }

  report(): RealVendorSession {
    return {
      id: this.id,
      kind: this.kind,
      path: this.path,
      query: { ...this.query },
      headers: { ...this.headers },
      frames: this.frames,
      bytes: this.bytes,
      audioBytes: this.audioBytes,
      sha256: this.digest(),
      texts: [...this.texts],
      errors: [...this.errors],
      keepalives: this.keepalives,
      signed: this.signed,
      closed: this.closedAt !== null,
      closeCode: this.closeCode,
      closeReason: this.closeReason,
      openedAt: this.openedAt,
      closedAt: this.closedAt
    }
  }
}

interface Context {
  opts: RealVendorOptions
  resultEveryMs: number
}

// =============================================================================================
// Deepgram live streaming (/v1/listen)
// =============================================================================================
//
// Upgrade: query `encoding` (mulaw|linear16), `sample_rate` (8000|16000), `channels=1` required;
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
// idleCloseMs → recorded, close 1011 "NET-0001 …" (checked every 100–500 ms).

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

function deepgramUpgrade(req: IncomingMessage, q: URLSearchParams, opts: RealVendorOptions): Verdict {
  if (opts.apiKey !== undefined) {
    const auth = header(req, 'authorization') ?? ''
    const m = /^(?:Token|Bearer)\s+(.+)$/i.exec(auth)
    const proto = header(req, 'sec-websocket-protocol') ?? ''
    const pm = /^\s*token\s*,\s*([^,\s]+)\s*$/i.exec(proto)
    const key = m?.[1] ?? pm?.[1]
    if (key === undefined || !safeEqual(key, opts.apiKey)) {
      return {
        ok: false,
        status: 401,
        error: key === undefined ? 'missing credentials' : 'invalid credentials',
        headers: { 'dg-error': 'Invalid credentials.' },
        body: { err_code: 'INVALID_AUTH', err_msg: 'Invalid credentials.' }
      }
    }
  }
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
  if (channels === null) problems.push('query: channels is required (1)')
  else if (channels !== '1') problems.push(`query: channels must be 1 (got "${channels}")`)
  for (const name of DG_BOOLEAN_PARAMS) {
    const v = q.get(name)
    if (v !== null && v !== 'true' && v !== 'false') problems.push(`query: ${name} must be true or false (got "${v}")`)
  }
  const ep = q.get('endpointing')
  if (ep !== null && ep !== 'false' && !DIGITS_RE.test(ep))
    problems.push(`query: endpointing must be false or milliseconds (got "${ep}")`)
  const ue = q.get('utterance_end_ms')
  if (ue !== null && !DIGITS_RE.test(ue)) problems.push(`query: utterance_end_ms must be an integer (got "${ue}")`)
  if (problems.length > 0) {
    const msg = problems.join('; ')
    return {
      ok: false,
      status: 400,
      error: msg,
      headers: { 'dg-error': msg },
      body: { err_code: 'Bad Request', err_msg: msg }
    }
  }
  return { ok: true }
}

function deepgramProtocol(s: Session, ctx: Context, requestId: string): Protocol {
  const q = s.params
  const encoding = q.get('encoding') === 'linear16' ? 'linear16' : 'mulaw'
  const rate = Number(q.get('sample_rate'))
  const bytesPerSample = encoding === 'linear16' ? 2 : 1
  const interim = q.get('interim_results') === 'true'
  const model = q.get('model') ?? 'nova-3'
  const modelUuid = randomUUID()
  const idleMs = ctx.opts.idleCloseMs ?? 10000
  const cadence = new Cadence(interim ? ctx.resultEveryMs / 2 : ctx.resultEveryMs)
  let results = 0
  let lastActivity = Date.now()
  let ended = false
  let lateNoted = false

  function result(startMs: number, endMs: number, isFinal: boolean, fromFinalize: boolean): void {
    const n = isFinal ? ++results : results + 1
    const durMs = endMs - startMs
    const words = durMs > 0 ? phrase(n) : []
    const step = words.length > 0 ? durMs / words.length : 0
    s.send({
      type: 'Results',
      channel_index: [0, 1],
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
        request_id: requestId,
        model_info: { name: model, version: 'emulator', arch: 'emulator' },
        model_uuid: modelUuid
      }
    })
    if (isFinal) cadence.start = endMs
  }

  function finish(): void {
    ended = true
    if (cadence.audioMs > cadence.start + 1e-9) result(cadence.start, cadence.audioMs, true, false)
    s.send({
      type: 'Metadata',
      transaction_key: 'deprecated',
      request_id: requestId,
      sha256: s.digest(),
      created: new Date(s.openedAt).toISOString(),
      duration: round3(cadence.audioMs / 1000),
      channels: 1
    })
    s.close(1000)
  }

  function late(what: string): void {
    if (lateNoted) return
    lateNoted = true
    s.note(`${what} after CloseStream`)
  }

  return {
    open() {
      const every = Math.max(100, Math.min(500, Math.floor(idleMs / 4)))
      s.every(every, () => {
        if (ended || Date.now() - lastActivity < idleMs) return
        ended = true
        s.note(`no audio or KeepAlive for ${idleMs} ms: closed 1011 NET-0001`)
        s.close(1011, 'NET-0001: Deepgram did not receive audio data or a text message within the timeout window.')
      })
    },
    binary(data) {
      if (ended) return late('audio')
      if (data.length === 0) {
        s.note('empty binary frame (Deepgram ends the stream on a zero-length frame)')
        finish()
        return
      }
      if (data.length % bytesPerSample !== 0) {
        s.note(
          `binary frame of ${data.length} bytes is not a whole number of ${encoding} samples (${bytesPerSample} bytes each)`
        )
      }
      s.addAudio(data.length, data)
      lastActivity = Date.now()
      const crossed = cadence.add((data.length / bytesPerSample / rate) * 1000)
      for (let i = 0; i < crossed; i++) {
        const at = cadence.boundary(i, crossed)
        const tick = ++cadence.ticks
        result(cadence.start, at, !interim || tick % 2 === 0, false)
      }
    },
    text(text) {
      const parsed = parseJson(text)
      s.texts.push(parsed.ok ? parsed.value : { unparsed: text })
      if (ended) return late('text message')
      if (!parsed.ok || !isObject(parsed.value)) {
        s.note('text frame is not a JSON object (only KeepAlive, Finalize and CloseStream are accepted)')
        return
      }
      const msg = parsed.value
      const extra = Object.keys(msg).filter(k => k !== 'type' && !(msg.type === 'Finalize' && k === 'channel'))
      if (extra.length > 0) s.note(`${String(msg.type)}: unexpected field(s) ${extra.join(', ')}`)
      switch (msg.type) {
        case 'KeepAlive':
          s.keepalives++
          lastActivity = Date.now()
          return
        case 'Finalize':
          if ('channel' in msg && (!Number.isInteger(msg.channel) || (msg.channel as number) !== 0)) {
            s.note('Finalize: channel must be 0 on a one-channel stream')
          }
          result(cadence.start, cadence.audioMs, true, true)
          return
        case 'CloseStream':
          finish()
          return
        default:
          s.note(
            typeof msg.type === 'string' ? `unknown message type "${msg.type}"` : 'text message has no string "type"'
          )
      }
    },
    closed() {
      ended = true
    }
  }
}

// =============================================================================================
// AssemblyAI Universal-Streaming v3 (/v3/ws)
// =============================================================================================
//
// Checked after the upgrade, answered as the service documents: an `Error` frame
// {"type":"Error","error_code":N,"error":"…"} then close N.
// Credentials: `Authorization: <key>`; missing/wrong → 1008 "Unauthorized Connection: …".
// Query: `sample_rate` (8000|16000) and `encoding` (pcm_s16le|pcm_mulaw) required (the real
// service defaults encoding; this emulator wants it explicit); optional numeric/boolean options
// typed. Bad query → 3006 (choice: the docs list no code for it; 3006 is their bad-input code).
// On open: {"type":"Begin","id":uuid,"expires_at":unix s}. Binary audio; each chunk MUST be 50–1000
// ms → else 3007 "Input duration violation: <ms> ms. Expected between 50 and 1000 ms".
// Text: Terminate | ForceEndpoint | KeepAlive | UpdateConfiguration; invalid JSON / not an object /
// unknown type → 3006. UpdateConfiguration fields are type-checked (unknown field: recorded only).
// Turns: a partial (end_of_turn=false) half-way through each resultEveryMs of audio and a final
// (end_of_turn=true) at its end, plus a formatted copy with format_turns=true. ForceEndpoint ends
// the current turn now. Terminate → final Turn for pending audio, Termination, close 1000.
// sessionMaxMs → 3008 "Session Expired: Maximum session duration exceeded" (not recorded as a
// client error). Inactivity (query inactivity_timeout s, else idleCloseMs if given): neither audio
// nor KeepAlive → recorded, close 3005 (choice: the v3 docs list no inactivity code).

const AAI_CONFIG_NUMBERS = [
  'end_of_turn_confidence_threshold',
  'min_end_of_turn_silence_when_confident',
  'max_turn_silence',
  'vad_threshold'
]

function assemblyaiProtocol(s: Session, ctx: Context): Protocol {
  const q = s.params
  const rate = Number(q.get('sample_rate'))
  const encoding = q.get('encoding')
  const bytesPerSample = encoding === 'pcm_s16le' ? 2 : 1
  const formatTurns = q.get('format_turns') === 'true'
  const cadence = new Cadence(ctx.resultEveryMs / 2)
  const sessionMaxMs = ctx.opts.sessionMaxMs ?? THREE_HOURS_MS
  let inactivityMs = 0
  let inactivityTimer: NodeJS.Timeout | null = null
  let turnOrder = 0
  let ended = false
  let lateNoted = false

  function fail(code: number, error: string, record = true): void {
    if (record) s.note(error)
    ended = true
    s.send({ type: 'Error', error_code: code, error })
    // Close reasons are limited to 123 bytes; the docs use this fixed text when it does not fit.
    s.close(code, Buffer.byteLength(error) <= 123 ? error : 'See Error message for details')
  }

  function touch(): void {
    if (inactivityMs <= 0) return
    s.cancel(inactivityTimer)
    inactivityTimer = s.after(inactivityMs, () => {
      if (ended) return
      fail(3005, `Session Cancelled: no audio or KeepAlive for ${inactivityMs} ms (inactivity timeout)`)
    })
  }

  function turn(startMs: number, endMs: number, endOfTurn: boolean): void {
    const words = phrase(turnOrder + 1)
    const step = (endMs - startMs) / words.length
    const base = {
      type: 'Turn',
      turn_order: turnOrder,
      end_of_turn_confidence: endOfTurn ? 0.91 : 0.08,
      words: words.map((text, i) => ({
        start: Math.round(startMs + i * step),
        end: Math.round(startMs + (i + 1) * step),
        text,
        confidence: 0.93,
        word_is_final: endOfTurn || i < words.length - 1
      }))
    }
    const transcript = words.join(' ')
    s.send({
      ...base,
      turn_is_formatted: false,
      end_of_turn: endOfTurn,
      transcript,
      utterance: endOfTurn ? transcript : ''
    })
    if (!endOfTurn) return
    if (formatTurns) {
      const formatted = `${transcript[0].toUpperCase()}${transcript.slice(1)}.`
      s.send({ ...base, turn_is_formatted: true, end_of_turn: true, transcript: formatted, utterance: formatted })
    }
    turnOrder++
    cadence.start = endMs
  }

  function late(what: string): void {
    if (lateNoted) return
    lateNoted = true
    s.note(`${what} after Terminate`)
  }

  function checkQuery(): string | null {
    const sr = q.get('sample_rate')
    if (sr === null) return 'Invalid Configuration: sample_rate is required'
    if (sr !== '8000' && sr !== '16000') return `Invalid Configuration: sample_rate must be 8000 or 16000 (got ${sr})`
    if (encoding === null) return 'Invalid Configuration: encoding is required (pcm_s16le or pcm_mulaw)'
    if (encoding !== 'pcm_s16le' && encoding !== 'pcm_mulaw')
      return `Invalid Configuration: encoding must be pcm_s16le or pcm_mulaw (got ${encoding})`
    const ft = q.get('format_turns')
    if (ft !== null && ft !== 'true' && ft !== 'false')
      return 'Invalid Configuration: format_turns must be true or false'
    for (const name of AAI_CONFIG_NUMBERS) {
      const v = q.get(name)
      if (v !== null && !(v.trim() !== '' && Number.isFinite(Number(v)) && Number(v) >= 0))
        return `Invalid Configuration: ${name} must be a non-negative number`
    }
    const it = q.get('inactivity_timeout')
    if (it !== null && !(DIGITS_RE.test(it) && Number(it) >= 5 && Number(it) <= 3600))
      return 'Invalid Configuration: inactivity_timeout must be 5..3600 seconds'
    return null
  }

  return {
    open() {
      if (ctx.opts.apiKey !== undefined) {
        const auth = header(s.req, 'authorization')
        if (auth === undefined || auth === '')
          return fail(1008, 'Unauthorized Connection: Missing Authorization header')
        if (!safeEqual(auth, ctx.opts.apiKey)) return fail(1008, 'Unauthorized Connection: Invalid API key')
      }
      const bad = checkQuery()
      if (bad !== null) return fail(3006, bad)
      const it = q.get('inactivity_timeout')
      inactivityMs = it !== null ? Number(it) * 1000 : (ctx.opts.idleCloseMs ?? 0)
      s.send({ type: 'Begin', id: randomUUID(), expires_at: Math.floor((Date.now() + sessionMaxMs) / 1000) })
      s.after(sessionMaxMs, () => {
        if (ended) return
        fail(3008, 'Session Expired: Maximum session duration exceeded', false)
      })
      touch()
    },
    binary(data) {
      if (ended) return late('audio')
      if (data.length % bytesPerSample !== 0)
        s.note(`audio chunk of ${data.length} bytes is not a whole number of ${encoding} samples`)
      const ms = (data.length / bytesPerSample / rate) * 1000
      s.addAudio(data.length, data)
      if (ms < 50 - 1e-6 || ms > 1000 + 1e-6) {
        return fail(3007, `Input duration violation: ${round3(ms)} ms. Expected between 50 and 1000 ms`)
      }
      touch()
      const crossed = cadence.add(ms)
      for (let i = 0; i < crossed; i++) {
        const at = cadence.boundary(i, crossed)
        const tick = ++cadence.ticks
        turn(cadence.start, at, tick % 2 === 0)
      }
    },
    text(text) {
      const parsed = parseJson(text)
      s.texts.push(parsed.ok ? parsed.value : { unparsed: text })
      if (ended) return late('text message')
      if (!parsed.ok) return fail(3006, `Invalid JSON: ${text.slice(0, 60)}`)
      const msg = parsed.value
      if (!isObject(msg)) return fail(3006, `Invalid Message: ${text.slice(0, 60)}`)
      switch (msg.type) {
        case 'KeepAlive':
          s.keepalives++
          touch()
          return
        case 'ForceEndpoint':
          if (cadence.audioMs > cadence.start + 1e-9) turn(cadence.start, cadence.audioMs, true)
          return
        case 'UpdateConfiguration':
          for (const [k, v] of Object.entries(msg)) {
            if (k === 'type') continue
            if (AAI_CONFIG_NUMBERS.includes(k)) {
              if (typeof v !== 'number' || !(v >= 0) || (k === 'end_of_turn_confidence_threshold' && v > 1))
                s.note(
                  `UpdateConfiguration: ${k} must be a non-negative number${k === 'end_of_turn_confidence_threshold' ? ' ≤ 1' : ''}`
                )
            } else if (k === 'keyterms_prompt') {
              if (!Array.isArray(v) || !(v as unknown[]).every(x => typeof x === 'string'))
                s.note('UpdateConfiguration: keyterms_prompt must be an array of strings')
            } else if (k === 'format_turns') {
              if (typeof v !== 'boolean') s.note('UpdateConfiguration: format_turns must be a boolean')
            } else {
              s.note(`UpdateConfiguration: unknown field "${k}"`)
            }
          }
          return
        case 'Terminate': {
          ended = true
          if (cadence.audioMs > cadence.start + 1e-9) turn(cadence.start, cadence.audioMs, true)
          s.send({
            type: 'Termination',
            audio_duration_seconds: Math.round(cadence.audioMs / 1000),
            session_duration_seconds: Math.round((Date.now() - s.openedAt) / 1000)
          })
          s.close(1000)
          return
        }
        default:
          return fail(
            3006,
            `Invalid Message Type: ${typeof msg.type === 'string' ? msg.type : JSON.stringify(msg.type ?? null)}`
          )
      }
    },
    closed() {
      ended = true
    }
  }
}

// =============================================================================================
// Twilio Media Streams (/media): the client plays Twilio
// =============================================================================================
//
// Credentials (when apiKey set): `Authorization: Bearer <key>` or `X-Twilio-Signature` =
// twilioSignature(key, "wss://" + Host + path?query) (the ws:// form is accepted too); else HTTP 401.
// Text frames only. Order: connected {protocol:"Call", version:"1.0.0"} → start → media/mark/dtmf
// → stop. Every message after connected: `sequenceNumber` a decimal string, start = "1", +1 per
// message (a gap is recorded, then counting resumes from the value seen); `streamSid` equal to the
// start's. start: SIDs shaped like Twilio's (MZ/AC/CA + 32 hex), tracks ⊆ {inbound, outbound},
// customParameters an object of strings, mediaFormat exactly audio/x-mulaw, 8000, 1 channel.
// media: track one of the started tracks, `chunk` a decimal string +1 per message per track from
// "1", `timestamp` a decimal string (ms) never decreasing per track, `payload` non-empty canonical
// base64 (decoded into sha256/audioBytes). Twilio defines no transcript message; this emulated
// assist vendor sends its own {"event":"transcript","streamSid","text","isFinal":true} every
// resultEveryMs of audio. stop {accountSid, callSid} as in start → final transcript for pending
// audio, close 1000 "stream stopped" (choice). Violations are recorded only: Twilio's format has no
// error message. A client close before stop is recorded.

const SID_RE: Record<'MZ' | 'AC' | 'CA', RegExp> = {
  MZ: /^MZ[0-9a-fA-F]{32}$/,
  AC: /^AC[0-9a-fA-F]{32}$/,
  CA: /^CA[0-9a-fA-F]{32}$/
}

function twilioUpgrade(req: IncomingMessage, opts: RealVendorOptions): Verdict {
  if (opts.apiKey === undefined) return { ok: true }
  const auth = header(req, 'authorization')
  if (auth !== undefined) {
    const m = /^Bearer\s+(.+)$/i.exec(auth)
    if (m !== null && safeEqual(m[1], opts.apiKey)) return { ok: true }
    return { ok: false, status: 401, error: 'invalid credentials' }
  }
  const sig = header(req, 'x-twilio-signature')
  if (sig === undefined)
    return { ok: false, status: 401, error: 'missing credentials (Authorization or X-Twilio-Signature)' }
  const host = header(req, 'host') ?? ''
  const path = req.url ?? '/'
  const ok = ['wss', 'ws'].some(scheme =>
    safeEqual(sig, twilioSignature(opts.apiKey as string, `${scheme}://${host}${path}`))
  )
  return ok ? { ok: true } : { ok: false, status: 401, error: 'X-Twilio-Signature does not match' }
}

function twilioProtocol(s: Session, ctx: Context): Protocol {
  type Phase = 'await-connected' | 'await-start' | 'streaming' | 'stopped'
  let phase: Phase = 'await-connected'
  let expectSeq = 1
  let streamSid = ''
  let accountSid = ''
  let callSid = ''
  let tracks: string[] = []
  const chunks = new Map<string, number>()
  const stamps = new Map<string, number>()
  const cadence = new Cadence(ctx.resultEveryMs)
  let results = 0
  let lateNoted = false

  function transcript(): void {
    s.send({ event: 'transcript', streamSid, text: phrase(++results).join(' '), isFinal: true })
  }

  function checkSeq(msg: Json, what: string): void {
    const seq = msg.sequenceNumber
    if (typeof seq !== 'string' || !DIGITS_RE.test(seq)) {
      s.note(`${what}: sequenceNumber must be a decimal string (got ${JSON.stringify(seq ?? null)})`)
      expectSeq++
      return
    }
    const n = Number(seq)
    if (n !== expectSeq)
      s.note(`${what}: sequenceNumber ${n}, expected ${expectSeq} (${n > expectSeq ? 'gap' : 'repeat or reorder'})`)
    expectSeq = n + 1
  }

  function checkStreamSid(msg: Json, what: string): void {
    if (msg.streamSid !== streamSid)
      s.note(`${what}: streamSid ${JSON.stringify(msg.streamSid ?? null)} does not match the start's`)
  }

  function onStart(msg: Json): void {
    if (phase === 'await-connected') s.note('start before connected')
    else if (phase !== 'await-start') return s.note('second start event')
    phase = 'streaming'
    if (msg.sequenceNumber !== '1')
      s.note(`start: sequenceNumber must be "1" (got ${JSON.stringify(msg.sequenceNumber ?? null)})`)
    expectSeq = 2
    if (typeof msg.streamSid !== 'string' || !SID_RE.MZ.test(msg.streamSid))
      s.note('start: streamSid must be "MZ" + 32 hex digits')
    streamSid = typeof msg.streamSid === 'string' ? msg.streamSid : ''
    const st = msg.start
    if (!isObject(st)) return s.note('start: start must be an object')
    if (typeof st.accountSid !== 'string' || !SID_RE.AC.test(st.accountSid))
      s.note('start.accountSid must be "AC" + 32 hex digits')
    if (typeof st.callSid !== 'string' || !SID_RE.CA.test(st.callSid))
      s.note('start.callSid must be "CA" + 32 hex digits')
    if (st.streamSid !== streamSid) s.note('start.streamSid must equal streamSid')
    accountSid = typeof st.accountSid === 'string' ? st.accountSid : ''
    callSid = typeof st.callSid === 'string' ? st.callSid : ''
    const tr: unknown[] = Array.isArray(st.tracks) ? st.tracks : []
    if (tr.length === 0 || !tr.every(x => x === 'inbound' || x === 'outbound') || new Set(tr).size !== tr.length) {
      s.note('start.tracks must be a non-empty list of distinct "inbound" / "outbound"')
    }
    tracks = tr.filter((x): x is string => typeof x === 'string')
    if (!isObject(st.customParameters)) s.note('start.customParameters must be an object')
    else if (!Object.values(st.customParameters).every(v => typeof v === 'string'))
      s.note('start.customParameters values must be strings')
    const mf = st.mediaFormat
    if (!isObject(mf)) s.note('start.mediaFormat must be an object')
    else {
      if (mf.encoding !== 'audio/x-mulaw') s.note('start.mediaFormat.encoding must be "audio/x-mulaw"')
      if (mf.sampleRate !== 8000) s.note('start.mediaFormat.sampleRate must be 8000 (a number)')
      if (mf.channels !== 1) s.note('start.mediaFormat.channels must be 1 (a number)')
    }
  }

  function onMedia(msg: Json, wire: number): void {
    if (phase !== 'streaming') s.note(phase === 'stopped' ? 'media after stop' : 'media before start')
    checkSeq(msg, 'media')
    checkStreamSid(msg, 'media')
    const m = msg.media
    if (!isObject(m)) return s.note('media: media must be an object')
    const track = typeof m.track === 'string' ? m.track : ''
    if (!tracks.includes(track))
      s.note(`media.track ${JSON.stringify(m.track ?? null)} is not one of the started tracks`)
    if (typeof m.chunk !== 'string' || !DIGITS_RE.test(m.chunk)) s.note('media.chunk must be a decimal string')
    else {
      const want = (chunks.get(track) ?? 0) + 1
      const got = Number(m.chunk)
      if (got !== want) s.note(`media.chunk ${got} on ${track}, expected ${want}`)
      chunks.set(track, got)
    }
    if (typeof m.timestamp !== 'string' || !DIGITS_RE.test(m.timestamp))
      s.note('media.timestamp must be a decimal string (ms)')
    else {
      const ts = Number(m.timestamp)
      const prev = stamps.get(track)
      if (prev !== undefined && ts < prev) s.note(`media.timestamp went backwards on ${track}: ${prev} → ${ts}`)
      stamps.set(track, ts)
    }
    if (typeof m.payload !== 'string' || m.payload === '' || !BASE64_RE.test(m.payload)) {
      s.note('media.payload must be non-empty base64')
      return
    }
    const audio = Buffer.from(m.payload, 'base64')
    s.addAudio(wire, audio)
    if (phase !== 'streaming') return
    const crossed = cadence.add(audio.length / 8)
    for (let i = 0; i < crossed; i++) {
      cadence.start = cadence.boundary(i, crossed)
      transcript()
    }
  }

  function onStop(msg: Json): void {
    if (phase !== 'streaming') s.note(phase === 'stopped' ? 'second stop' : 'stop before start')
    checkSeq(msg, 'stop')
    checkStreamSid(msg, 'stop')
    const st = msg.stop
    if (!isObject(st)) s.note('stop: stop must be an object')
    else {
      if (st.accountSid !== accountSid) s.note('stop.accountSid must equal start.accountSid')
      if (st.callSid !== callSid) s.note('stop.callSid must equal start.callSid')
    }
    phase = 'stopped'
    if (cadence.audioMs > cadence.start + 1e-9) {
      cadence.start = cadence.audioMs
      transcript()
    }
    s.close(1000, 'stream stopped')
  }

  return {
    open() {},
    binary(data) {
      s.note(`binary frame of ${data.length} bytes: Twilio Media Streams send JSON text frames only`)
    },
    text(text, raw) {
      const parsed = parseJson(text)
      const msg = parsed.ok && isObject(parsed.value) ? parsed.value : null
      if (msg === null || msg.event !== 'media') s.texts.push(parsed.ok ? parsed.value : { unparsed: text })
      if (msg === null) return s.note('text frame is not a JSON object')
      if (phase === 'stopped' && msg.event !== 'stop') {
        if (!lateNoted) s.note(`${String(msg.event)} after stop`)
        lateNoted = true
        return
      }
      switch (msg.event) {
        case 'connected':
          if (phase !== 'await-connected') return s.note('connected must be the first message, once')
          phase = 'await-start'
          if (msg.protocol !== 'Call') s.note('connected.protocol must be "Call"')
          if (msg.version !== '1.0.0') s.note('connected.version must be "1.0.0"')
          return
        case 'start':
          return onStart(msg)
        case 'media':
          return onMedia(msg, raw.length)
        case 'mark':
          if (phase !== 'streaming') s.note('mark before start')
          checkSeq(msg, 'mark')
          checkStreamSid(msg, 'mark')
          if (!isObject(msg.mark) || typeof msg.mark.name !== 'string') s.note('mark.name must be a string')
          return
        case 'dtmf':
          if (phase !== 'streaming') s.note('dtmf before start')
          checkSeq(msg, 'dtmf')
          checkStreamSid(msg, 'dtmf')
          if (
            !isObject(msg.dtmf) ||
            msg.dtmf.track !== 'inbound_track' ||
            typeof msg.dtmf.digit !== 'string' ||
            !/^[0-9*#A-D]$/.test(msg.dtmf.digit)
          ) {
            s.note('dtmf must be {track:"inbound_track", digit: one of 0-9 * # A-D}')
          }
          return
        case 'stop':
          return onStop(msg)
        default:
          s.note(typeof msg.event === 'string' ? `unknown event "${msg.event}"` : 'message has no string "event"')
      }
    },
    closed(_code, byUs) {
      if (!byUs && phase !== 'stopped') s.note('socket closed by the client before a stop event')
    }
  }
}

// =============================================================================================
// Genesys AudioHook v2 (/api/v1/audiohook/ws): the client plays Genesys
// =============================================================================================
//
// Upgrade: `Audiohook-Organization-Id` and `Audiohook-Session-Id` must be UUIDs,
// `Audiohook-Correlation-Id` non-empty (else HTTP 400); `X-API-KEY` must equal apiKey when set
// (else HTTP 401). Signatures are not verified; `signed` records whether both were present.
// Client messages (as the reference server validates them): text ≤ 65535 chars, JSON object,
// version "2", id = the session id, type, seq = previous + 1 from 1, serverseq ≤ the server's seq
// and never decreasing, position a "PT…S" duration equal to the audio received (samples / 8000,
// plus reported discards; ±0.5 ms), parameters valid for the type. Types: open (first, once:
// organizationId = header, conversationId, participant{id,ani,aniName,dnis}, media[]), ping → pong,
// paused / resumed{start,discarded}, discarded{start,discarded}, update{language} → updated,
// error{code,message}, close{reason} → closed. Binary audio only while ACTIVE (after opened, not
// paused), a whole number of samples for the selected media. The server picks the first offered
// PCMU 8000 Hz single-channel media (else the first PCMU); none → disconnect. Each violation is
// recorded and, like the reference server, answered once with disconnect {reason:"error"}
// (counting then resumes from the seq seen). Server messages carry version, id, type, seq,
// clientseq, parameters. Every resultEveryMs of audio: event {entities:[{type:"transcript",
// data:{id, channelId, isFinal, offset, duration, alternatives:[{confidence, interpretations:
// [{type:"display", transcript}]}]}}]}. A client close before `closed` is recorded.

const AH_LANG_RE = /^[a-z]{2,3}-[A-Za-z]{2,3}$/
const AH_CLOSE_REASONS = ['end', 'error', 'disconnect', 'reconnect']
const AH_ERROR_CODES = [400, 405, 408, 409, 413, 415, 429, 500, 503]

function audiohookUpgrade(req: IncomingMessage, opts: RealVendorOptions): Verdict {
  if (opts.apiKey !== undefined) {
    const key = header(req, 'x-api-key')
    if (key === undefined || !safeEqual(key, opts.apiKey)) {
      return { ok: false, status: 401, error: key === undefined ? 'X-API-KEY missing' : 'X-API-KEY invalid' }
    }
  }
  const problems: string[] = []
  const org = header(req, 'audiohook-organization-id')
  if (org === undefined || !UUID_RE.test(org)) problems.push('Audiohook-Organization-Id must be a UUID')
  const sid = header(req, 'audiohook-session-id')
  if (sid === undefined || !UUID_RE.test(sid)) problems.push('Audiohook-Session-Id must be a UUID')
  const corr = header(req, 'audiohook-correlation-id')
  if (corr === undefined || corr.trim() === '') problems.push('Audiohook-Correlation-Id is required')
  return problems.length > 0 ? { ok: false, status: 400, error: problems.join('; ') } : { ok: true }
}

type AhState = 'PREPARING' | 'ACTIVE' | 'PAUSED' | 'CLOSED'

function isDuration(v: unknown): v is string {
  return typeof v === 'string' && DURATION_RE.test(v)
}

function isSeq(v: unknown): v is number {
  return Number.isInteger(v) && (v as number) >= 0
}

/** Returns the first problem with `open` parameters, or null. */
function checkOpenParams(p: Json, orgId: string): string | null {
  if (typeof p.organizationId !== 'string' || !UUID_RE.test(p.organizationId))
    return 'open: organizationId must be a UUID'
  if (p.organizationId.toLowerCase() !== orgId.toLowerCase())
    return 'open: organizationId does not match the Audiohook-Organization-Id header'
  if (typeof p.conversationId !== 'string' || !UUID_RE.test(p.conversationId))
    return 'open: conversationId must be a UUID'
  const part = p.participant
  if (!isObject(part)) return 'open: participant must be an object'
  if (typeof part.id !== 'string' || !UUID_RE.test(part.id)) return 'open: participant.id must be a UUID'
  for (const k of ['ani', 'aniName', 'dnis'])
    if (typeof part[k] !== 'string') return `open: participant.${k} must be a string`
  if (!Array.isArray(p.media)) return 'open: media must be an array'
  for (const [i, m] of (p.media as unknown[]).entries()) {
    if (!isObject(m)) return `open: media[${i}] must be an object`
    if (m.type !== 'audio') return `open: media[${i}].type must be "audio"`
    if (m.format !== 'PCMU' && m.format !== 'L16') return `open: media[${i}].format must be PCMU or L16`
    if (m.rate !== 8000) return `open: media[${i}].rate must be 8000`
    const ch = m.channels
    if (
      !Array.isArray(ch) ||
      ch.length < 1 ||
      ch.length > 2 ||
      !(ch as unknown[]).every(c => c === 'external' || c === 'internal')
    ) {
      return `open: media[${i}].channels must be 1–2 of "external" / "internal"`
    }
  }
  if ('language' in p && (typeof p.language !== 'string' || !AH_LANG_RE.test(p.language)))
    return 'open: language must look like "en-US"'
  if ('supportedLanguages' in p && typeof p.supportedLanguages !== 'boolean')
    return 'open: supportedLanguages must be a boolean'
  if ('customConfig' in p && !isObject(p.customConfig)) return 'open: customConfig must be an object'
  if ('continuedSessions' in p) {
    const cs = p.continuedSessions
    if (
      !Array.isArray(cs) ||
      !(cs as unknown[]).every(
        c => isObject(c) && typeof c.id === 'string' && UUID_RE.test(c.id) && isSeq(c.serverseq) && isSeq(c.clientseq)
      )
    ) {
      return 'open: continuedSessions must be [{id, serverseq, clientseq}]'
    }
  }
  return null
}

function audiohookProtocol(s: Session, ctx: Context): Protocol {
  const sessionId = header(s.req, 'audiohook-session-id') ?? ''
  const orgId = header(s.req, 'audiohook-organization-id') ?? ''
  let state: AhState = 'PREPARING'
  let serverSeq = 0
  let clientSeq = 0
  let lastServerseq = 0
  let signaled = false
  let samples = 0
  let discardedSec = 0
  let channels = 1
  let language: string | null = null
  const cadence = new Cadence(ctx.resultEveryMs)

  function sendMsg(type: string, parameters: Json): void {
    s.send({ version: '2', id: sessionId, type, seq: ++serverSeq, clientseq: clientSeq, parameters })
  }

  /** Records a violation and, once per session, answers it like the reference server. */
  function violation(info: string): void {
    s.note(info)
    if (signaled || state === 'CLOSED') return
    signaled = true
    sendMsg('disconnect', { reason: 'error', info: `Client Error: ${info}` })
  }

  function positionSec(): number {
    return samples / 8000 + discardedSec
  }

  function transcriptEvent(startSec: number, endSec: number, n: number): void {
    const words = phrase(n)
    const step = (endSec - startSec) / words.length
    sendMsg('event', {
      entities: [
        {
          type: 'transcript',
          data: {
            id: randomUUID(),
            channelId: 0,
            isFinal: true,
            offset: isoDuration(startSec),
            duration: isoDuration(endSec - startSec),
            alternatives: [
              {
                confidence: 0.9,
                ...(language === null ? {} : { languages: [language] }),
                interpretations: [
                  {
                    type: 'display',
                    transcript: words.join(' '),
                    tokens: words.map((value, i) => ({
                      type: 'word',
                      value,
                      confidence: 0.9,
                      offset: isoDuration(startSec + i * step),
                      duration: isoDuration(step)
                    }))
                  }
                ]
              }
            ]
          }
        }
      ]
    })
  }

  function checkTwoDurations(p: Json, what: string): boolean {
    if (!isDuration(p.start) || !isDuration(p.discarded)) {
      violation(`${what}: parameters must be {start, discarded} durations`)
      return false
    }
    return true
  }

  function onOpen(p: Json): void {
    if (state !== 'PREPARING') return violation(`open in state ${state}`)
    const bad = checkOpenParams(p, orgId)
    if (bad !== null) return violation(bad)
    language = typeof p.language === 'string' ? p.language : null
    const offers = p.media as Json[]
    const selected =
      offers.find(m => m.format === 'PCMU' && (m.channels as unknown[]).length === 1) ??
      offers.find(m => m.format === 'PCMU')
    if (selected === undefined) return violation('open: no PCMU 8000 Hz media offered')
    channels = (selected.channels as unknown[]).length
    sendMsg('opened', { media: [selected], startPaused: false })
    state = 'ACTIVE'
  }

  return {
    open() {
      s.signed = header(s.req, 'signature') !== undefined && header(s.req, 'signature-input') !== undefined
    },
    binary(data) {
      if (state !== 'ACTIVE') return violation(`Received audio in state ${state}`)
      if (data.length % channels !== 0)
        s.note(`audio frame of ${data.length} bytes is not a whole number of ${channels}-channel PCMU samples`)
      s.addAudio(data.length, data)
      const frameSamples = Math.floor(data.length / channels)
      samples += frameSamples
      // Offsets are on the stream timeline, which includes audio the client reported discarded.
      const crossed = cadence.add(frameSamples / 8)
      for (let i = 0; i < crossed; i++) {
        const at = cadence.boundary(i, crossed)
        transcriptEvent(discardedSec + cadence.start / 1000, discardedSec + at / 1000, ++cadence.ticks)
        cadence.start = at
      }
    },
    text(text) {
      const parsed = parseJson(text)
      s.texts.push(parsed.ok ? parsed.value : { unparsed: text.slice(0, 200) })
      if (text.length > 65535) return violation(`Text message too large (>64K). Length: ${text.length}`)
      if (!parsed.ok) return violation('Text message not valid JSON')
      const m = parsed.value
      if (
        !isObject(m) ||
        m.version !== '2' ||
        typeof m.id !== 'string' ||
        !UUID_RE.test(m.id) ||
        typeof m.type !== 'string' ||
        !isSeq(m.seq) ||
        !isObject(m.parameters) ||
        !isDuration(m.position) ||
        !isSeq(m.serverseq)
      ) {
        return violation(
          'Message not a well-formed client message (version "2", id, type, seq, serverseq, position, parameters)'
        )
      }
      const type = m.type
      const p = m.parameters
      if (m.seq !== clientSeq + 1)
        violation(`${type}: seq ${m.seq}, expected ${clientSeq + 1} (not monotonically increasing)`)
      clientSeq = m.seq
      if (m.serverseq > serverSeq)
        violation(`${type}: serverseq ${m.serverseq} is higher than the server's seq ${serverSeq}`)
      else if (m.serverseq < lastServerseq)
        violation(`${type}: serverseq went backwards (${lastServerseq} → ${m.serverseq})`)
      lastServerseq = Math.max(lastServerseq, m.serverseq)
      if (m.id.toLowerCase() !== sessionId.toLowerCase())
        violation(`${type}: id does not match the Audiohook-Session-Id header`)
      const pos = parseIsoDuration(m.position)
      if (Math.abs(pos - positionSec()) > 0.0005)
        violation(`${type}: position ${m.position} does not match the audio received (${isoDuration(positionSec())})`)
      if (state === 'PREPARING' && type !== 'open' && type !== 'close' && type !== 'error')
        return violation(`${type} before open`)
      if (state === 'CLOSED') return violation(`${type} after closed`)
      switch (type) {
        case 'open':
          return onOpen(p)
        case 'ping':
          if ('rtt' in p && !isDuration(p.rtt)) violation('ping: rtt must be a duration')
          s.keepalives++
          sendMsg('pong', {})
          return
        case 'paused':
          if (state !== 'ACTIVE') return violation(`paused in state ${state}`)
          state = 'PAUSED'
          return
        case 'resumed':
          if (state !== 'PAUSED') return violation(`resumed in state ${state}`)
          if (checkTwoDurations(p, 'resumed')) discardedSec += parseIsoDuration(p.discarded as string)
          state = 'ACTIVE'
          return
        case 'discarded':
          if (checkTwoDurations(p, 'discarded')) discardedSec += parseIsoDuration(p.discarded as string)
          return
        case 'update':
          if (typeof p.language !== 'string' || !AH_LANG_RE.test(p.language))
            return violation('update: language must look like "en-US"')
          language = p.language
          sendMsg('updated', {})
          return
        case 'error':
          if (!AH_ERROR_CODES.includes(p.code as number) || typeof p.message !== 'string')
            violation('error: parameters must be {code: 400|405|408|409|413|415|429|500|503, message}')
          return
        case 'close':
          if (typeof p.reason !== 'string' || !AH_CLOSE_REASONS.includes(p.reason))
            violation('close: reason must be end, error, disconnect or reconnect')
          sendMsg('closed', {})
          state = 'CLOSED'
          return
        default:
          return violation(`Invalid Message: '${type}' is not a supported client message`)
      }
    },
    closed(_code, byUs) {
      if (!byUs && state !== 'CLOSED')
        s.note(`socket closed by the client in state ${state}, before the close/closed transaction`)
    }
  }
}

// =============================================================================================
// Server
// =============================================================================================

export async function startRealVendor(opts: RealVendorOptions): Promise<RealVendorEmulator> {
  const kind = opts.kind
  if (!(kind in REAL_VENDOR_PATHS)) return Promise.reject(new TypeError(`unknown real vendor kind: ${String(kind)}`))
  const resultEveryMs = opts.resultEveryMs ?? 1000
  if (!(resultEveryMs >= 0)) return Promise.reject(new TypeError('resultEveryMs must be ≥ 0'))
  if (opts.idleCloseMs !== undefined && !(opts.idleCloseMs > 0))
    return Promise.reject(new TypeError('idleCloseMs must be > 0'))
  const host = opts.host ?? '127.0.0.1'
  const vendorPath = REAL_VENDOR_PATHS[kind]
  const log = opts.log
  const ctx: Context = { opts, resultEveryMs }
  const all: Session[] = []
  const live = new Set<Session>()
  /** Deepgram request ids, set at upgrade so the 101 answer can carry them. */
  const requestIds = new WeakMap<IncomingMessage, string>()
  let nextId = 1

  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_PAYLOAD })
  wss.on('headers', (headers: string[], req: IncomingMessage) => {
    const rid = requestIds.get(req)
    if (rid !== undefined) headers.push(`dg-request-id: ${rid}`)
  })

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0]
    if (req.method === 'GET' && path === '/sessions')
      reply(
        res,
        200,
        all.map(s => s.report())
      )
    else if (req.method === 'GET' && path === '/healthz') reply(res, 200, { ok: true, kind })
    else reply(res, 404, { error: 'not found' })
  })

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy())
    const url = new URL(req.url ?? '/', 'http://emulator')
    if (url.pathname !== vendorPath) {
      refuse(socket, 404, {
        error: `no WebSocket endpoint at ${url.pathname}; this ${kind} emulator serves ${vendorPath}`
      })
      return
    }
    const s = new Session(
      nextId++,
      kind,
      url.pathname,
      redactQuery(url.searchParams),
      url.searchParams,
      redactHeaders(req),
      req,
      log
    )
    all.push(s)
    let verdict: Verdict = { ok: true }
    const extra: Record<string, string> = {}
    if (kind === 'deepgram') {
      const rid = randomUUID()
      requestIds.set(req, rid)
      extra['dg-request-id'] = rid
      verdict = deepgramUpgrade(req, url.searchParams, opts)
    } else if (kind === 'twilio-media') {
      verdict = twilioUpgrade(req, opts)
    } else if (kind === 'audiohook') {
      verdict = audiohookUpgrade(req, opts)
    }
    if (!verdict.ok) {
      s.markRejected(verdict.status, verdict.error)
      log?.(`${kind} session ${s.id} upgrade refused ${verdict.status}: ${verdict.error}`)
      const body =
        verdict.body === undefined
          ? { error: verdict.error }
          : { ...(verdict.body as Json), ...(extra['dg-request-id'] ? { request_id: extra['dg-request-id'] } : {}) }
      refuse(socket, verdict.status, body, { ...extra, ...verdict.headers })
      return
    }
    wss.handleUpgrade(req, socket, head, ws => accept(s, ws, requestIds.get(req) ?? ''))
  })

  function accept(s: Session, ws: WebSocket, requestId: string): void {
    s.ws = ws
    live.add(s)
    log?.(`${kind} session ${s.id} opened ${s.path}`)
    const protocol =
      kind === 'deepgram'
        ? deepgramProtocol(s, ctx, requestId)
        : kind === 'assemblyai'
          ? assemblyaiProtocol(s, ctx)
          : kind === 'twilio-media'
            ? twilioProtocol(s, ctx)
            : audiohookProtocol(s, ctx)
    ws.on('message', (data: RawData, isBinary: boolean) => {
      const buf = rawToBuffer(data)
      try {
        if (isBinary) protocol.binary(buf)
        else protocol.text(buf.toString('utf8'), buf)
      } catch (err) {
        s.note(`emulator bug: ${(err as Error).stack ?? String(err)}`)
      }
    })
    ws.on('error', (err: Error) => s.note(`socket error: ${err.message}`))
    ws.on('close', (code: number, reason: Buffer) => {
      live.delete(s)
      s.markClosed(code, reason.toString('utf8'))
      protocol.closed(code, s.closingByUs)
      log?.(
        `${kind} session ${s.id} closed ${code} ${s.closeReason} frames=${s.frames} audioBytes=${s.audioBytes} errors=${s.errors.length}`
      )
    })
    protocol.open()
  }

  const l = await listenEmulator(server, wss, host, opts.port ?? 0, () => {
    for (const s of live) s.terminate()
    for (const s of all) s.clearTimers()
  })
  return {
    kind,
    port: l.port,
    url: `${l.wsBase}${vendorPath}`,
    httpUrl: l.httpUrl,
    sessions: () => all.map(s => s.report()),
    dropAll: () => {
      for (const s of live) s.terminate()
    },
    closeAll: (code: number, reason?: string) => {
      for (const s of live) s.close(code, reason)
    },
    close: l.close
  }
}

function refuse(socket: Duplex, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body)
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Connection: close',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(text)}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v.replace(/[\r\n]+/g, ' ')}`)
  ]
  socket.end(`${lines.join('\r\n')}\r\n\r\n${text}`)
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}
