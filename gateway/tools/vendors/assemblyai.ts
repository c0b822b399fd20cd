import { randomUUID } from 'node:crypto'
import type { Timer } from '../../clock'
import { Cadence, phrase, round3 } from './cadence'
import { Hearing } from './hearing'
import type { Context, Protocol, VendorSession } from './session'
import { DIGITS_RE, header, isObject, parseJson, safeEqual, type Json } from './wire'

// AssemblyAI Universal-Streaming v3 (/v3/ws)
//
// Checked after the upgrade, answered as the service documents: an `Error` frame
// {"type":"Error","error_code":N,"error":"…"} then close N.
// Credentials: `Authorization: <key>`; missing/wrong → 1008 "Unauthorized Connection: …".
// Query: `sample_rate` (8000|16000) and `encoding` (pcm_s16le|pcm_mulaw) required (the real
// service defaults encoding; this emulator wants it explicit); optional numeric/boolean options
// typed. Bad query → 3006 (choice: the docs list no code for it; 3006 is their bad-input code).
// `min_end_of_turn_silence_when_confident` was renamed `min_turn_silence` (public spec, 2026-03): the
// old name is refused (3006) in the query and recorded as unknown in UpdateConfiguration, so a mapping
// still sending it is caught.
// On open: {"type":"Begin","id":uuid,"expires_at":unix s}. Binary audio; each chunk MUST be 50–1000
// ms → else 3007 "Input duration violation: <ms> ms. Expected between 50 and 1000 ms"; audio faster than
// real time → 3007 "Audio Transmission Rate Exceeded: Received <x> sec. audio in <y> sec" (common-errors.mdx;
// choice: more than 2 s of audio ahead of the time since Begin, the threshold is not published).
// Text (the published AsyncAPI file usm-streaming.yml, AssemblyAI/assemblyai-api-spec at 3fcf678): Terminate |
// ForceEndpoint | UpdateConfiguration, nothing else - no KeepAlive; invalid JSON / not an object / another
// type → 3006 "Invalid Message Type: <type>" (common-errors.mdx). UpdateConfiguration fields are
// type-checked (unknown field: recorded only).
// Turns: a partial (end_of_turn=false) half-way through each resultEveryMs of audio and a final
// (end_of_turn=true) at its end, plus a formatted copy with format_turns=true. ForceEndpoint ends
// the current turn now. Terminate → final Turn for pending audio, Termination, close 1000.
// sessionMaxMs → 3008 "Session Expired: Maximum session duration exceeded" (not recorded as a
// client error). Inactivity (query inactivity_timeout s, or inactivityTimeoutMs when given; else
// idleCloseMs if given): no audio → recorded, close 3005 (choice: the v3 docs list no inactivity code).

/**
 * `GET /v3/token?expires_in_seconds=1..600` (the streaming host's temporary-token endpoint, free and
 * billed nothing): the same credential rule as a session, answered in HTTP. What the gateway's AssemblyAI
 * health probe asks for.
 */
export function assemblyaiToken(
  auth: string | undefined,
  q: URLSearchParams,
  apiKey: string | undefined
): { status: number; body: Json } {
  if (apiKey !== undefined && (auth === undefined || !safeEqual(auth, apiKey)))
    return { status: 401, body: { error: auth === undefined ? 'Missing Authorization header' : 'Invalid API key' } }
  const expires = Number(q.get('expires_in_seconds'))
  if (!Number.isInteger(expires) || expires < 1 || expires > 600)
    return { status: 400, body: { error: 'expires_in_seconds must be an integer from 1 to 600' } }
  return { status: 200, body: { token: randomUUID(), expires_in_seconds: expires } }
}

const AAI_CONFIG_NUMBERS = ['end_of_turn_confidence_threshold', 'min_turn_silence', 'max_turn_silence', 'vad_threshold']
/** Names the service no longer takes, with the name that replaced each. */
const AAI_RENAMED: Readonly<Record<string, string>> = { min_end_of_turn_silence_when_confident: 'min_turn_silence' }
const THREE_HOURS_MS = 3 * 60 * 60 * 1000

/** Returns the first problem with the query, as the service words it, or null. */
function checkQuery(q: URLSearchParams): string | null {
  const sr = q.get('sample_rate')
  if (sr === null) return 'Invalid Configuration: sample_rate is required'
  if (sr !== '8000' && sr !== '16000') return `Invalid Configuration: sample_rate must be 8000 or 16000 (got ${sr})`
  const encoding = q.get('encoding')
  if (encoding === null) return 'Invalid Configuration: encoding is required (pcm_s16le or pcm_mulaw)'
  if (encoding !== 'pcm_s16le' && encoding !== 'pcm_mulaw')
    return `Invalid Configuration: encoding must be pcm_s16le or pcm_mulaw (got ${encoding})`
  for (const [old, now] of Object.entries(AAI_RENAMED))
    if (q.has(old)) return `Invalid Configuration: unknown parameter ${old} (renamed ${now})`
  const ft = q.get('format_turns')
  if (ft !== null && ft !== 'true' && ft !== 'false') return 'Invalid Configuration: format_turns must be true or false'
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

/** UpdateConfiguration: each field type-checked; problems are recorded only. */
function configProblems(msg: Json): string[] {
  const problems: string[] = []
  for (const [k, v] of Object.entries(msg)) {
    if (k === 'type') continue
    if (AAI_CONFIG_NUMBERS.includes(k)) {
      const threshold = k === 'end_of_turn_confidence_threshold'
      if (typeof v !== 'number' || !(v >= 0) || (threshold && v > 1))
        problems.push(`UpdateConfiguration: ${k} must be a non-negative number${threshold ? ' ≤ 1' : ''}`)
    } else if (k === 'keyterms_prompt') {
      if (!Array.isArray(v) || !(v as unknown[]).every(x => typeof x === 'string'))
        problems.push('UpdateConfiguration: keyterms_prompt must be an array of strings')
    } else if (k === 'format_turns') {
      if (typeof v !== 'boolean') problems.push('UpdateConfiguration: format_turns must be a boolean')
    } else {
      problems.push(`UpdateConfiguration: unknown field "${k}"`)
    }
  }
  return problems
}

/** One AssemblyAI v3 session after the upgrade. */
export class AssemblyAiStream implements Protocol {
  private readonly rate: number
  private readonly encoding: string | null
  private readonly bytesPerSample: number
  private readonly formatTurns: boolean
  private readonly cadence: Cadence
  private readonly sessionMaxMs: number
  private inactivityMs = 0
  private readonly inactivity: Timer
  private turnOrder = 0
  private begunAt = 0
  private ended = false
  private lateNoted = false
  /** `transcribeFrames`: the platform frames heard (turns name them, unformatted). */
  private readonly hearing: Hearing | null

  constructor(
    private readonly s: VendorSession,
    private readonly ctx: Context
  ) {
    const q = s.params
    this.rate = Number(q.get('sample_rate'))
    this.encoding = q.get('encoding')
    this.bytesPerSample = this.encoding === 'pcm_s16le' ? 2 : 1
    this.formatTurns = q.get('format_turns') === 'true'
    this.cadence = new Cadence(ctx.resultEveryMs / 2)
    this.sessionMaxMs = ctx.opts.sessionMaxMs ?? THREE_HOURS_MS
    this.inactivity = s.timer()
    this.hearing = ctx.opts.transcribeFrames === true && this.bytesPerSample === 1 ? new Hearing() : null
  }

  open(): void {
    const { s, ctx } = this
    const apiKey = ctx.opts.apiKey
    if (apiKey !== undefined) {
      const auth = header(s.req, 'authorization')
      if (auth === undefined || auth === '')
        return this.fail(1008, 'Unauthorized Connection: Missing Authorization header')
      if (!safeEqual(auth, apiKey)) return this.fail(1008, 'Unauthorized Connection: Invalid API key')
    }
    const bad = checkQuery(s.params)
    if (bad !== null) return this.fail(3006, bad)
    const it = s.params.get('inactivity_timeout')
    this.inactivityMs = it !== null ? (ctx.opts.inactivityTimeoutMs ?? Number(it) * 1000) : (ctx.opts.idleCloseMs ?? 0)
    this.begunAt = ctx.clock.now()
    s.send({ type: 'Begin', id: randomUUID(), expires_at: Math.floor((Date.now() + this.sessionMaxMs) / 1000) })
    s.after(this.sessionMaxMs, () => {
      if (this.ended) return
      this.fail(3008, 'Session Expired: Maximum session duration exceeded', false)
    })
    this.touch()
  }

  binary(data: Buffer): void {
    if (this.ended) return this.late('audio')
    if (data.length % this.bytesPerSample !== 0)
      this.s.note(`audio chunk of ${data.length} bytes is not a whole number of ${this.encoding} samples`)
    const ms = (data.length / this.bytesPerSample / this.rate) * 1000
    this.s.addAudio(data.length, data)
    this.hearing?.add(data)
    if (ms < 50 - 1e-6 || ms > 1000 + 1e-6)
      return this.fail(3007, `Input duration violation: ${round3(ms)} ms. Expected between 50 and 1000 ms`)
    const elapsed = this.ctx.clock.now() - this.begunAt
    const received = this.cadence.audioMs + ms
    if (received > elapsed + 2000)
      return this.fail(
        3007,
        `Audio Transmission Rate Exceeded: Received ${round3(received / 1000)} sec. audio in ${round3(elapsed / 1000)} sec`
      )
    this.touch()
    const cadence = this.cadence
    const crossed = cadence.add(ms)
    for (let i = 0; i < crossed; i++) {
      const at = cadence.boundary(i, crossed)
      const tick = ++cadence.ticks
      this.turn(cadence.start, at, tick % 2 === 0)
    }
  }

  text(text: string): void {
    const parsed = parseJson(text)
    this.s.texts.push(parsed.ok ? parsed.value : { unparsed: text })
    if (this.ended) return this.late('text message')
    if (!parsed.ok) return this.fail(3006, `Invalid JSON: ${text.slice(0, 60)}`)
    const msg = parsed.value
    if (!isObject(msg)) return this.fail(3006, `Invalid Message: ${text.slice(0, 60)}`)
    this.control(msg)
  }

  closed(): void {
    this.ended = true
  }

  private control(msg: Json): void {
    const cadence = this.cadence
    switch (msg.type) {
      case 'ForceEndpoint':
        if (cadence.pending) this.turn(cadence.start, cadence.audioMs, true)
        return
      case 'UpdateConfiguration':
        for (const problem of configProblems(msg)) this.s.note(problem)
        return
      case 'Terminate':
        this.ended = true
        if (cadence.pending) this.turn(cadence.start, cadence.audioMs, true)
        this.s.send({
          type: 'Termination',
          audio_duration_seconds: Math.round(cadence.audioMs / 1000),
          session_duration_seconds: Math.round((Date.now() - this.s.openedAt) / 1000)
        })
        this.s.close(1000)
        return
      default: {
        const type = typeof msg.type === 'string' ? msg.type : JSON.stringify(msg.type ?? null)
        return this.fail(3006, `Invalid Message Type: ${type}`)
      }
    }
  }

  private fail(code: number, error: string, record = true): void {
    if (record) this.s.note(error)
    this.ended = true
    this.s.send({ type: 'Error', error_code: code, error })
    // Close reasons are limited to 123 bytes; the docs use this fixed text when it does not fit.
    this.s.close(code, Buffer.byteLength(error) <= 123 ? error : 'See Error message for details')
  }

  /** Audio: the inactivity timer starts over. */
  private touch(): void {
    const ms = this.inactivityMs
    if (ms <= 0) return
    this.inactivity.set(ms, () => {
      if (this.ended) return
      this.fail(3005, `Session Cancelled: no audio for ${ms} ms (inactivity timeout)`)
    })
  }

  private turn(startMs: number, endMs: number, endOfTurn: boolean): void {
    const words = this.hearing !== null ? this.hearing.words(startMs, endMs) : phrase(this.turnOrder + 1)
    const step = words.length > 0 ? (endMs - startMs) / words.length : 0
    const base = {
      type: 'Turn',
      turn_order: this.turnOrder,
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
    this.s.send({
      ...base,
      turn_is_formatted: false,
      end_of_turn: endOfTurn,
      transcript,
      utterance: endOfTurn ? transcript : ''
    })
    if (!endOfTurn) return
    if (this.formatTurns) {
      // Frames heard are named as they are (tests read "frames A-B"); words get a capital and a full stop.
      const formatted =
        this.hearing !== null || transcript === ''
          ? transcript
          : `${transcript[0].toUpperCase()}${transcript.slice(1)}.`
      this.s.send({ ...base, turn_is_formatted: true, end_of_turn: true, transcript: formatted, utterance: formatted })
    }
    this.turnOrder++
    this.cadence.start = endMs
  }

  private late(what: string): void {
    if (this.lateNoted) return
    this.lateNoted = true
    this.s.note(`${what} after Terminate`)
  }
}
