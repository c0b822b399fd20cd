import { createHmac } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { Cadence, phrase } from './cadence'
import type { Context, Protocol, VendorSession, Verdict } from './session'
import { DIGITS_RE, header, isObject, parseJson, safeEqual, type Json } from './wire'

// Twilio Media Streams (/media): the client plays Twilio
//
// Credentials (when apiKey set): `Authorization: Bearer <key>` or `X-Twilio-Signature` =
// twilioSignature(key, "wss://" + Host + path?query) (the ws:// form is accepted too); else HTTP 401.
// Text frames only. Order: connected {protocol:"Call", version:"1.0.0"} → start → media/mark/dtmf
// → stop. Every message after connected: `sequenceNumber` a decimal string, start = "1", +1 per
// message (a gap is recorded, then counting resumes from the value seen); `streamSid` equal to the
// start's. start: SIDs shaped like Twilio's (MZ/AC/CA + 32 hex), tracks ⊆ {inbound, outbound},
// customParameters an object of strings, mediaFormat exactly audio/x-mulaw, 8000, 1 channel.
// media: track one of the started tracks, `chunk` a decimal string +1 per message per track from
// "1", `timestamp` a decimal string: Twilio's "presentation timestamp in milliseconds from the start
// of the stream", per track: the first chunk of a track within the stream's first second, each next
// chunk exactly the previous one's timestamp plus its audio ms (± 1 for rounding), later than that
// only after a lost chunk (a `chunk` gap); so stamps counted in chunks or bytes, over both tracks, or
// carried over from another stream are recorded. `payload` non-empty canonical base64 (decoded into
// sha256/audioBytes). Twilio defines no transcript message; this emulated
// assist vendor sends its own {"event":"transcript","streamSid","text","isFinal":true} every
// resultEveryMs of audio. stop {accountSid, callSid} as in start → final transcript for pending
// audio, close 1000 "stream stopped" (choice). Violations are recorded only: Twilio's format has no
// error message. A client close before stop is recorded.

const SID_RE: Record<'MZ' | 'AC' | 'CA', RegExp> = {
  MZ: /^MZ[0-9a-fA-F]{32}$/,
  AC: /^AC[0-9a-fA-F]{32}$/,
  CA: /^CA[0-9a-fA-F]{32}$/
}
const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/**
 * Twilio request signature for a WebSocket upgrade: base64 HMAC-SHA1 of the full `wss://` URL
 * (no POST parameters) keyed with the account auth token.
 */
export function twilioSignature(authToken: string, url: string): string {
  return createHmac('sha1', authToken).update(url).digest('base64')
}

export function twilioUpgrade(req: IncomingMessage, apiKey: string | undefined): Verdict {
  if (apiKey === undefined) return { ok: true }
  const auth = header(req, 'authorization')
  if (auth !== undefined) {
    const m = /^Bearer\s+(.+)$/i.exec(auth)
    if (m !== null && safeEqual(m[1], apiKey)) return { ok: true }
    return { ok: false, status: 401, error: 'invalid credentials' }
  }
  const sig = header(req, 'x-twilio-signature')
  if (sig === undefined)
    return { ok: false, status: 401, error: 'missing credentials (Authorization or X-Twilio-Signature)' }
  const host = header(req, 'host') ?? ''
  const path = req.url ?? '/'
  const ok = ['wss', 'ws'].some(scheme => safeEqual(sig, twilioSignature(apiKey, `${scheme}://${host}${path}`)))
  return ok ? { ok: true } : { ok: false, status: 401, error: 'X-Twilio-Signature does not match' }
}

/** Every problem with a start event's `start` object (SIDs, tracks, custom parameters, media format). */
function startProblems(st: Json, streamSid: string): string[] {
  const problems: string[] = []
  if (typeof st.accountSid !== 'string' || !SID_RE.AC.test(st.accountSid))
    problems.push('start.accountSid must be "AC" + 32 hex digits')
  if (typeof st.callSid !== 'string' || !SID_RE.CA.test(st.callSid))
    problems.push('start.callSid must be "CA" + 32 hex digits')
  if (st.streamSid !== streamSid) problems.push('start.streamSid must equal streamSid')
  const tr: unknown[] = Array.isArray(st.tracks) ? st.tracks : []
  if (tr.length === 0 || !tr.every(x => x === 'inbound' || x === 'outbound') || new Set(tr).size !== tr.length)
    problems.push('start.tracks must be a non-empty list of distinct "inbound" / "outbound"')
  if (!isObject(st.customParameters)) problems.push('start.customParameters must be an object')
  else if (!Object.values(st.customParameters).every(v => typeof v === 'string'))
    problems.push('start.customParameters values must be strings')
  const mf = st.mediaFormat
  if (!isObject(mf)) problems.push('start.mediaFormat must be an object')
  else {
    if (mf.encoding !== 'audio/x-mulaw') problems.push('start.mediaFormat.encoding must be "audio/x-mulaw"')
    if (mf.sampleRate !== 8000) problems.push('start.mediaFormat.sampleRate must be 8000 (a number)')
    if (mf.channels !== 1) problems.push('start.mediaFormat.channels must be 1 (a number)')
  }
  return problems
}

type Phase = 'await-connected' | 'await-start' | 'streaming' | 'stopped'

/** A socket closed 1000 before any message: a connection (health) check, no stream was started. */
function isConnectionCheck(phase: Phase, code: number): boolean {
  return phase === 'await-connected' && code === 1000
}

/** One Twilio Media Stream after the upgrade; the client plays Twilio. */
export class TwilioMediaStream implements Protocol {
  private phase: Phase = 'await-connected'
  private expectSeq = 1
  private streamSid = ''
  private accountSid = ''
  private callSid = ''
  private tracks: string[] = []
  private readonly chunks = new Map<string, number>()
  /** Per track: the last chunk's number, timestamp and audio ms (µ-law 8 kHz: 8 bytes a ms). */
  private readonly lastChunk = new Map<string, { chunk: number; ts: number; ms: number }>()
  private readonly cadence: Cadence
  private results = 0
  private lateNoted = false

  constructor(
    private readonly s: VendorSession,
    ctx: Context
  ) {
    this.cadence = new Cadence(ctx.resultEveryMs)
  }

  open(): void {}

  binary(data: Buffer): void {
    this.s.note(`binary frame of ${data.length} bytes: Twilio Media Streams send JSON text frames only`)
  }

  text(text: string, raw: Buffer): void {
    const s = this.s
    const parsed = parseJson(text)
    const msg = parsed.ok && isObject(parsed.value) ? parsed.value : null
    if (msg === null || msg.event !== 'media') s.texts.push(parsed.ok ? parsed.value : { unparsed: text })
    if (msg === null) return s.note('text frame is not a JSON object')
    if (this.phase === 'stopped' && msg.event !== 'stop') {
      if (!this.lateNoted) s.note(`${String(msg.event)} after stop`)
      this.lateNoted = true
      return
    }
    switch (msg.event) {
      case 'connected':
        return this.onConnected(msg)
      case 'start':
        return this.onStart(msg)
      case 'media':
        return this.onMedia(msg, raw.length)
      case 'mark':
        return this.onMark(msg)
      case 'dtmf':
        return this.onDtmf(msg)
      case 'stop':
        return this.onStop(msg)
      default:
        s.note(typeof msg.event === 'string' ? `unknown event "${msg.event}"` : 'message has no string "event"')
    }
  }

  closed(code: number, byUs: boolean): void {
    if (!byUs && this.phase !== 'stopped' && !isConnectionCheck(this.phase, code))
      this.s.note('socket closed by the client before a stop event')
  }

  private transcript(): void {
    this.s.send({
      event: 'transcript',
      streamSid: this.streamSid,
      text: phrase(++this.results).join(' '),
      isFinal: true
    })
  }

  /** sequenceNumber and streamSid of every message after start. */
  private checkSeq(msg: Json, what: string): void {
    const seq = msg.sequenceNumber
    if (typeof seq !== 'string' || !DIGITS_RE.test(seq)) {
      this.s.note(`${what}: sequenceNumber must be a decimal string (got ${JSON.stringify(seq ?? null)})`)
      this.expectSeq++
    } else {
      const n = Number(seq)
      const want = this.expectSeq
      if (n !== want)
        this.s.note(`${what}: sequenceNumber ${n}, expected ${want} (${n > want ? 'gap' : 'repeat or reorder'})`)
      this.expectSeq = n + 1
    }
    if (msg.streamSid !== this.streamSid)
      this.s.note(`${what}: streamSid ${JSON.stringify(msg.streamSid ?? null)} does not match the start's`)
  }

  private onConnected(msg: Json): void {
    if (this.phase !== 'await-connected') return this.s.note('connected must be the first message, once')
    this.phase = 'await-start'
    if (msg.protocol !== 'Call') this.s.note('connected.protocol must be "Call"')
    if (msg.version !== '1.0.0') this.s.note('connected.version must be "1.0.0"')
  }

  private onStart(msg: Json): void {
    const s = this.s
    if (this.phase === 'await-connected') s.note('start before connected')
    else if (this.phase !== 'await-start') return s.note('second start event')
    this.phase = 'streaming'
    if (msg.sequenceNumber !== '1')
      s.note(`start: sequenceNumber must be "1" (got ${JSON.stringify(msg.sequenceNumber ?? null)})`)
    this.expectSeq = 2
    if (typeof msg.streamSid !== 'string' || !SID_RE.MZ.test(msg.streamSid))
      s.note('start: streamSid must be "MZ" + 32 hex digits')
    this.streamSid = typeof msg.streamSid === 'string' ? msg.streamSid : ''
    const st = msg.start
    if (!isObject(st)) return s.note('start: start must be an object')
    for (const problem of startProblems(st, this.streamSid)) s.note(problem)
    this.accountSid = typeof st.accountSid === 'string' ? st.accountSid : ''
    this.callSid = typeof st.callSid === 'string' ? st.callSid : ''
    this.tracks = (Array.isArray(st.tracks) ? (st.tracks as unknown[]) : []).filter(
      (x): x is string => typeof x === 'string'
    )
  }

  private onMedia(msg: Json, wire: number): void {
    const s = this.s
    if (this.phase !== 'streaming') s.note(this.phase === 'stopped' ? 'media after stop' : 'media before start')
    this.checkSeq(msg, 'media')
    const m = msg.media
    if (!isObject(m)) return s.note('media: media must be an object')
    const track = typeof m.track === 'string' ? m.track : ''
    if (!this.tracks.includes(track))
      s.note(`media.track ${JSON.stringify(m.track ?? null)} is not one of the started tracks`)
    this.checkChunk(m, track)
    if (typeof m.payload !== 'string' || m.payload === '' || !BASE64_RE.test(m.payload)) {
      s.note('media.payload must be non-empty base64')
      return
    }
    const audio = Buffer.from(m.payload, 'base64')
    this.checkTimestamp(m, track, audio.length)
    s.addAudio(wire, audio)
    if (this.phase !== 'streaming') return
    const cadence = this.cadence
    const crossed = cadence.add(audio.length / 8)
    for (let i = 0; i < crossed; i++) {
      cadence.start = cadence.boundary(i, crossed)
      this.transcript()
    }
  }

  /** media.chunk counts up from 1 per track. */
  private checkChunk(m: Json, track: string): void {
    const s = this.s
    if (typeof m.chunk !== 'string' || !DIGITS_RE.test(m.chunk)) s.note('media.chunk must be a decimal string')
    else {
      const want = (this.chunks.get(track) ?? 0) + 1
      const got = Number(m.chunk)
      if (got !== want) s.note(`media.chunk ${got} on ${track}, expected ${want}`)
      this.chunks.set(track, got)
    }
  }

  /** media.timestamp: ms since the stream's start, per track, advancing with the audio (see the header). */
  private checkTimestamp(m: Json, track: string, bytes: number): void {
    if (typeof m.timestamp !== 'string' || !DIGITS_RE.test(m.timestamp)) {
      this.s.note('media.timestamp must be a decimal string (ms)')
      return
    }
    const ts = Number(m.timestamp)
    const chunk = typeof m.chunk === 'string' && DIGITS_RE.test(m.chunk) ? Number(m.chunk) : Number.NaN
    const prev = this.lastChunk.get(track)
    this.lastChunk.set(track, { chunk, ts, ms: bytes / 8 })
    const where = `media.timestamp ${ts} on ${track}`
    if (prev === undefined) {
      if (ts >= 1000) this.s.note(`${where}: the first chunk of a stream is stamped within its first second`)
      return
    }
    const due = prev.ts + prev.ms
    if (chunk === prev.chunk + 1 ? Math.abs(ts - due) > 1 : ts < due - 1)
      this.s.note(`${where}, expected ${Math.round(due)} (the previous chunk's timestamp plus its ms of audio)`)
  }

  private onMark(msg: Json): void {
    if (this.phase !== 'streaming') this.s.note('mark before start')
    this.checkSeq(msg, 'mark')
    if (!isObject(msg.mark) || typeof msg.mark.name !== 'string') this.s.note('mark.name must be a string')
  }

  private onDtmf(msg: Json): void {
    if (this.phase !== 'streaming') this.s.note('dtmf before start')
    this.checkSeq(msg, 'dtmf')
    const d = msg.dtmf
    if (!isObject(d) || d.track !== 'inbound_track' || typeof d.digit !== 'string' || !/^[0-9*#A-D]$/.test(d.digit))
      this.s.note('dtmf must be {track:"inbound_track", digit: one of 0-9 * # A-D}')
  }

  private onStop(msg: Json): void {
    const s = this.s
    if (this.phase !== 'streaming') s.note(this.phase === 'stopped' ? 'second stop' : 'stop before start')
    this.checkSeq(msg, 'stop')
    const st = msg.stop
    if (!isObject(st)) s.note('stop: stop must be an object')
    else {
      if (st.accountSid !== this.accountSid) s.note('stop.accountSid must equal start.accountSid')
      if (st.callSid !== this.callSid) s.note('stop.callSid must equal start.callSid')
    }
    this.phase = 'stopped'
    if (this.cadence.pending) {
      this.cadence.start = this.cadence.audioMs
      this.transcript()
    }
    s.close(1000, 'stream stopped')
  }
}
