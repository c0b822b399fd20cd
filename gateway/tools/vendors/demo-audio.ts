import type { WebSocket } from 'ws'
import type { Clock } from '../../clock'
import type { EmulatorKind, SessionReport } from './demo-types'
import { SessionRecorder } from './recorder'
import { isObject, parseJson, REDACTED, type Json } from './wire'

// The audio side of the bundled demo vendors. passthrough: the platform's own protocol (the init
// message first, CONNECTED, binary audio, MESSAGE results). json-events: a start event
// {event:"start", streamId, start:{contactId, busNo, track, mediaFormat, customParameters?}} →
// {event:"started"}, binary audio, {event:"transcript"} results, stop → stopped and close 1000.

type Phase = 'awaiting-open' | 'opened' | 'ready' | 'finished'

/** What the demo audio protocol reads from the emulator's options. */
export interface DemoAudioConfig {
  kind: EmulatorKind
  resultEvery: number
  /**
   * Count `resultEvery` in 20 ms of µ-law audio received (160 bytes) instead of in messages, so results
   * keep their cadence however the gateway coalesces its writes (the `vendor` command and `emulators:`).
   */
  byAudio: boolean
  readyDelayMs: number
  /** passthrough: required authenticationToken. */
  token: string | undefined
  /** Results sent before the ready answer (see EmulatorOptions.earlyResults). */
  earlyResults: number
  /** Echo the upgrade request and open message into answers (see EmulatorOptions.echo). */
  echo: boolean
}

/** A copy without the credential field (audio: authenticationToken; text: authorizationHeader). */
export function redact(value: unknown, field = 'authenticationToken'): unknown {
  if (isObject(value) && field in value) return { ...value, [field]: REDACTED }
  return value
}

/** Returns the first problem with a json-events start message as "field path: what is wrong", or null. */
export function checkStartEvent(msg: unknown): string | null {
  if (!isObject(msg)) return 'message must be a JSON object'
  if (msg.event !== 'start') return 'event must be "start"'
  if (typeof msg.streamId !== 'string' || msg.streamId === '') return 'streamId must be a non-empty string'
  const start = msg.start
  if (!isObject(start)) return 'start must be an object'
  if (!Number.isInteger(start.contactId)) return 'start.contactId must be an integer'
  if (!Number.isInteger(start.busNo)) return 'start.busNo must be an integer'
  if (start.track !== 'inbound' && start.track !== 'outbound' && start.track !== 'both') {
    return 'start.track must be one of "inbound", "outbound", "both"'
  }
  const mf = start.mediaFormat
  if (!isObject(mf)) return 'start.mediaFormat must be an object'
  if (mf.encoding !== 'audio/x-mulaw') return 'start.mediaFormat.encoding must be "audio/x-mulaw"'
  if (mf.sampleRate !== 8000) return 'start.mediaFormat.sampleRate must be 8000'
  if (mf.channels !== 1) return 'start.mediaFormat.channels must be 1'
  if ('customParameters' in start && !isObject(start.customParameters)) {
    return 'start.customParameters must be an object when present'
  }
  return null
}

/** One demo-vendor audio session: the shared recorder and the demo protocol's state. */
export class DemoSession extends SessionRecorder {
  phase: Phase = 'awaiting-open'
  open: unknown = null
  /** json-events stream id, echoed in every event. */
  streamId = ''
  results = 0
  /** What `resultEvery` counts: messages, or 20 ms units of audio (DemoAudioConfig.byAudio). */
  heard = 0
  /** Early/late audio is recorded once, so a flood does not grow errors without bound. */
  earlyAudioNoted = false
  lateAudioNoted = false
  /** The ready answer (CONNECTED / started) was sent. */
  readySent = false
  /** The upgrade request as received (kept only for the echo option; never reported). */
  upgrade: { url: string; headers: Record<string, unknown> } | null = null
  /** The open message as received, credential included (kept only for the echo option; never reported). */
  rawOpen: unknown = null

  constructor(
    id: number,
    readonly kind: EmulatorKind,
    readonly path: string,
    ws: WebSocket,
    clock: Clock,
    log: ((line: string) => void) | undefined
  ) {
    super(id, `session ${id}`, clock, log)
    this.ws = ws
  }

  /** Ends the session from our side; later frames are ignored. */
  reject(code: number, reason: string, answer: unknown): void {
    this.phase = 'finished'
    this.send(answer)
    this.close(code, reason)
  }

  report(): SessionReport {
    return {
      id: this.id,
      kind: this.kind,
      path: this.path,
      open: this.open,
      ready: this.readySent,
      ...this.recorded(),
      firstFrameAt: this.firstFrameAt,
      lastFrameAt: this.lastFrameAt
    }
  }
}

/** The demo vendors' audio protocol: one instance per emulator, handed each session's socket events. */
export class DemoAudio {
  constructor(private readonly cfg: DemoAudioConfig) {}

  binary(s: DemoSession, data: Buffer): void {
    const passthrough = this.cfg.kind === 'passthrough'
    if (s.phase === 'awaiting-open') return this.audioBeforeOpen(s)
    if (s.phase === 'finished') {
      if (s.lateAudioNoted) return
      s.lateAudioNoted = true
      s.note(passthrough ? 'audio after session end' : 'audio after stop')
      return
    }
    s.addAudio(data.length, data)
    if (s.phase === 'opened' && !s.earlyAudioNoted) {
      s.earlyAudioNoted = true
      s.note(passthrough ? 'audio before CONNECTED' : 'audio before started')
    }
    // Results go only to a ready session, as a real vendor would not answer before its handshake.
    const every = this.cfg.resultEvery
    const before = s.heard
    s.heard += this.cfg.byAudio ? Math.max(1, Math.floor(data.length / 160)) : 1
    if (every > 0 && Math.floor(s.heard / every) > Math.floor(before / every) && s.phase === 'ready') this.result(s)
  }

  text(s: DemoSession, text: string): void {
    if (s.phase === 'finished') return
    const parsed = parseJson(text)
    if (s.phase === 'awaiting-open') {
      if (this.cfg.kind === 'passthrough') this.openPassthrough(s, parsed, text.length)
      else this.openJsonEvents(s, parsed)
      return
    }
    const value = parsed.ok ? parsed.value : { unparsed: text }
    s.texts.push(value)
    if (this.cfg.kind === 'passthrough') return
    if (parsed.ok && isObject(parsed.value) && parsed.value.event === 'stop') return this.stop(s, parsed.value)
    const what = !parsed.ok
      ? 'text message is not JSON'
      : isObject(parsed.value) && typeof parsed.value.event === 'string'
        ? `unknown event "${parsed.value.event}"`
        : 'text message has no event field'
    s.note(what)
    s.send({ event: 'error', code: 'unknown_event', message: what })
  }

  private audioBeforeOpen(s: DemoSession): void {
    if (this.cfg.kind === 'passthrough') {
      s.note('binary frame before init message')
      s.reject(1007, 'init message expected', {
        command: 'ERROR',
        messageType: 'INVALID_MESSAGE',
        message: 'first message must be the JSON init message',
        parameters: {}
      })
    } else {
      s.note('audio before start')
      s.reject(1008, 'audio before start', {
        event: 'error',
        code: 'audio_before_start',
        message: 'first message must be the start event'
      })
    }
  }

  /** What the session received, unredacted: the echo option reflects it into answers. */
  private echoOf(s: DemoSession): string {
    return JSON.stringify({ upgrade: s.upgrade, open: s.rawOpen })
  }

  private result(s: DemoSession, text = `heard ${s.heard} frames`): void {
    const seq = ++s.results
    if (this.cfg.kind === 'passthrough') {
      s.send({
        command: 'MESSAGE',
        messageType: 'TRANSCRIPT',
        message: text,
        parameters: { seq, frames: s.frames, bytes: s.bytes, isFinal: true }
      })
    } else {
      s.send({ event: 'transcript', streamId: s.streamId, seq, text, isFinal: true, frames: s.frames, bytes: s.bytes })
    }
  }

  private stop(s: DemoSession, stop: Json): void {
    if (stop.streamId !== s.streamId) s.note('stop: streamId does not match the start event')
    if (!isObject(stop.stop) || typeof stop.stop.reason !== 'string') s.note('stop: stop.reason must be a string')
    s.phase = 'finished'
    s.send({ event: 'stopped', streamId: s.streamId, frames: s.frames, bytes: s.bytes })
    s.close(1000, 'stopped')
  }

  private openPassthrough(s: DemoSession, parsed: ReturnType<typeof parseJson>, length: number): void {
    if (!parsed.ok || !isObject(parsed.value)) {
      // The raw text is not kept: it may hold a token.
      const what = parsed.ok ? 'init message is not a JSON object' : `init message is not JSON (${length} chars)`
      s.note(what)
      s.reject(1007, 'invalid init message', {
        command: 'ERROR',
        messageType: 'INVALID_MESSAGE',
        message: what,
        parameters: {}
      })
      return
    }
    const init = parsed.value
    s.open = redact(init)
    s.rawOpen = init
    if (this.cfg.token !== undefined && init.authenticationToken !== this.cfg.token) {
      s.note('invalid token')
      s.reject(1008, 'invalid token', {
        command: 'ERROR',
        messageType: 'AUTH_INVALID',
        message: this.cfg.echo ? `invalid token in ${this.echoOf(s)}` : 'invalid token',
        parameters: {}
      })
      return
    }
    s.phase = 'opened'
    const parameters: Json = { vendor: 'passthrough-emulator', session: s.id }
    if (this.cfg.echo) parameters.echo = this.echoOf(s)
    this.becomeReady(s, { command: 'CONNECTED', messageType: 'COMMAND', message: 'BEGIN AUDIO STREAM', parameters })
  }

  private openJsonEvents(s: DemoSession, parsed: ReturnType<typeof parseJson>): void {
    const problem = parsed.ok ? checkStartEvent(parsed.value) : 'message is not JSON'
    if (parsed.ok) {
      s.open = redact(parsed.value)
      s.rawOpen = parsed.value
    }
    if (problem !== null) {
      s.note(`bad start: ${problem}`)
      const message = this.cfg.echo ? `${problem} in ${this.echoOf(s)}` : problem
      s.reject(1008, 'bad start', { event: 'error', code: 'bad_start', message })
      return
    }
    s.streamId = (parsed as { ok: true; value: Json }).value.streamId as string
    s.phase = 'opened'
    this.becomeReady(s, { event: 'started', streamId: s.streamId })
  }

  /** The ready answer, after readyDelayMs on the emulator's clock (at once without one). */
  private becomeReady(s: DemoSession, answer: unknown): void {
    for (let i = 1; i <= this.cfg.earlyResults; i++) this.result(s, `early ${i}`)
    const go = (): void => {
      if (s.phase !== 'opened') return
      s.phase = 'ready'
      s.readySent = true
      s.send(answer)
      if (this.cfg.echo) this.result(s, this.echoOf(s))
    }
    if (this.cfg.readyDelayMs > 0) s.after(this.cfg.readyDelayMs, go)
    else go()
  }
}
