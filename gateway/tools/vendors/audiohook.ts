import { ChannelSplit } from './stereo'
import { randomUUID } from 'node:crypto'
import {
  AH_CLOSE_REASONS,
  AH_ERROR_CODES,
  AH_LANG_RE,
  checkOpenParams,
  headerProblems,
  isClientMessage,
  isDuration,
  isoDuration,
  markConnectionProbe,
  parseIsoDuration
} from './audiohook-checks'
import { AudioHookMoves, type ServerMove } from './audiohook-moves'
import { Cadence, phrase } from './cadence'
import { Hearing } from './hearing'
import type { Context, Protocol, VendorSession } from './session'
import { header, parseJson, type Json } from './wire'

// Genesys AudioHook v2 (/api/v1/audiohook/ws): the client plays Genesys
//
// Upgrade: `X-API-KEY` must equal apiKey when set (else HTTP 401, the reference's `request` auth strategy).
// Then, as the reference server's createAudioHookSession (app/src/create-audiohook-session.ts, 2871b01) does
// after the upgrade: `Audiohook-Session-Id`, `Audiohook-Correlation-Id` and `Audiohook-Organization-Id` must
// each be a UUID (its uuidRegex: version 1-5, variant 8-b, or the null UUID); else it throws and the socket is
// cut without a close frame (the client sees 1006): recorded, then terminated.
// Signatures are not verified; `signed` records whether both were present.
// Client messages (as the reference server validates them): text ≤ 65535 chars, JSON object,
// version "2", id = the session id, type, seq = previous + 1 from 1, serverseq ≤ the server's seq
// and never decreasing, position a "PT…S" duration equal to the audio received (samples / 8000,
// plus reported discards; ±0.5 ms), parameters valid for the type. Types: open (first, once:
// organizationId = header, conversationId, participant{id,ani,aniName,dnis}, media[]), ping → pong,
// paused / resumed{start,discarded}, discarded{start,discarded}, update{language} → updated,
// error{code,message}, close{reason} → closed. Binary audio only while ACTIVE (after opened, not
// paused), a whole number of samples for the selected media. The server picks the first offered
// PCMU 8000 Hz single-channel media (else the first PCMU); none → disconnect. Two-channel media
// (external, internal: interleaved, channel 0 first) is deinterleaved and reported per channel, with
// one transcript per channel (channelId 0, 1; words ending "channel c"). Each violation is
// recorded and, like the reference server, answered once with disconnect {reason:"error"}
// (counting then resumes from the seq seen). Server messages carry version, id, type, seq,
// clientseq, parameters. Every resultEveryMs of audio: event {entities:[{type:"transcript",
// data:{id, channelId, isFinal, offset, duration, alternatives:[{confidence, interpretations:
// [{type:"display", transcript}]}]}}]}. A client close before `closed` is recorded.
// Server moves (options.audiohook, audiohook-moves.ts): opened {startPaused}, a refusal (disconnect
// instead of opened), and scripted pause / resume / disconnect / reconnect / event. After `pause`, audio
// is allowed until the client's `paused` (counted), then is an error until `resumed`, whose `start`
// must be the stream position (its `discarded` then moves the position on). After `disconnect`, audio
// until `close` is counted (report.framesAfterDisconnect); after `close` it is an error.
// opened {startPaused}: ACTIVE until the client's `paused`, as the reference server (serversessionimpl.ts
// onOpenMessage, onPausedMessage); a `resumed` before it is an error, and so is audio (stricter than that
// server, but the reference client never sends any: clientsessionimpl.ts onOpenedMessage,
// client/src/mediasource-tone.ts startStreaming). A scripted `resume` also goes while `paused` is awaited.

type AhState = 'PREPARING' | 'ACTIVE' | 'PAUSED' | 'CLOSED'

/** One AudioHook session after the upgrade; the client plays Genesys. */
export class AudioHookSession implements Protocol {
  private readonly sessionId: string
  private readonly orgId: string
  private state: AhState = 'PREPARING'
  private serverSeq = 0
  private clientSeq = 0
  private lastServerseq = 0
  private signaled = false
  private samples = 0
  private discardedSec = 0
  private channels = 1
  private language: string | null = null
  /** opened {startPaused: true} went out and the client's `paused` has not come yet. */
  private awaitingPaused = false
  private readonly cadence: Cadence
  private readonly moves: AudioHookMoves
  /** `transcribeFrames`: the platform frames heard per channel (made at the first audio: channels are opened by then). */
  private hearing: Hearing | null = null
  private readonly transcribeFrames: boolean

  constructor(
    private readonly s: VendorSession,
    ctx: Context
  ) {
    this.transcribeFrames = ctx.opts.transcribeFrames === true
    this.sessionId = header(s.req, 'audiohook-session-id') ?? ''
    this.orgId = header(s.req, 'audiohook-organization-id') ?? ''
    this.cadence = new Cadence(ctx.resultEveryMs)
    this.moves = new AudioHookMoves(s, ctx.opts.audiohook)
  }

  open(): void {
    this.s.signed = header(this.s.req, 'signature') !== undefined && header(this.s.req, 'signature-input') !== undefined
    const bad = headerProblems(this.s.req)
    if (bad.length === 0) return
    for (const p of bad) this.s.note(p)
    this.state = 'CLOSED'
    this.s.terminate()
  }

  binary(data: Buffer): void {
    this.moves.audio()
    if (this.awaitingPaused)
      return this.violation("Received audio after opened {startPaused: true}, before the client's paused")
    if (this.state !== 'ACTIVE') return this.violation(`Received audio in state ${this.state}`)
    const channels = this.channels
    if (data.length % channels !== 0)
      this.s.note(`audio frame of ${data.length} bytes is not a whole number of ${channels}-channel PCMU samples`)
    this.s.addAudio(data.length, data)
    this.s.stereo?.add(data)
    if (this.transcribeFrames) {
      if (this.hearing === null) this.hearing = new Hearing(channels)
      this.hearing.add(data)
    }
    const frameSamples = Math.floor(data.length / channels)
    this.samples += frameSamples
    // Offsets are on the stream timeline, which includes audio the client reported discarded.
    const cadence = this.cadence
    const crossed = cadence.add(frameSamples / 8)
    for (let i = 0; i < crossed; i++) {
      const at = cadence.boundary(i, crossed)
      const n = ++cadence.ticks
      // Stereo: one transcript per channel (channelId 0 = external, 1 = internal, as opened).
      for (let ch = 0; ch < channels; ch++)
        this.transcriptEvent(this.discardedSec + cadence.start / 1000, this.discardedSec + at / 1000, n, ch, [
          cadence.start,
          at
        ])
      cadence.start = at
    }
  }

  text(text: string): void {
    const parsed = parseJson(text)
    this.s.texts.push(parsed.ok ? parsed.value : { unparsed: text.slice(0, 200) })
    if (text.length > 65535) return this.violation(`Text message too large (>64K). Length: ${text.length}`)
    if (!parsed.ok) return this.violation('Text message not valid JSON')
    const m = parsed.value
    if (!isClientMessage(m))
      return this.violation(
        'Message not a well-formed client message (version "2", id, type, seq, serverseq, position, parameters)'
      )
    this.checkEnvelope(m)
    const type = m.type
    if (this.state === 'PREPARING' && type !== 'open' && type !== 'close' && type !== 'error')
      return this.violation(`${type} before open`)
    if (this.state === 'CLOSED') return this.violation(`${type} after closed`)
    this.dispatch(type, m.parameters as Json)
  }

  closed(_code: number, byUs: boolean): void {
    if (!byUs && this.state !== 'CLOSED')
      this.s.note(`socket closed by the client in state ${this.state}, before the close/closed transaction`)
  }

  /** seq, serverseq, id and position of every client message. */
  private checkEnvelope(m: { type: string; seq: number; serverseq: number; position: string; id: string }): void {
    const type = m.type
    if (m.seq !== this.clientSeq + 1)
      this.violation(`${type}: seq ${m.seq}, expected ${this.clientSeq + 1} (not monotonically increasing)`)
    this.clientSeq = m.seq
    if (m.serverseq > this.serverSeq)
      this.violation(`${type}: serverseq ${m.serverseq} is higher than the server's seq ${this.serverSeq}`)
    else if (m.serverseq < this.lastServerseq)
      this.violation(`${type}: serverseq went backwards (${this.lastServerseq} → ${m.serverseq})`)
    this.lastServerseq = Math.max(this.lastServerseq, m.serverseq)
    if (m.id.toLowerCase() !== this.sessionId.toLowerCase())
      this.violation(`${type}: id does not match the Audiohook-Session-Id header`)
    const position = this.samples / 8000 + this.discardedSec
    if (Math.abs(parseIsoDuration(m.position) - position) > 0.0005)
      this.violation(`${type}: position ${m.position} does not match the audio received (${isoDuration(position)})`)
  }

  private dispatch(type: string, p: Json): void {
    switch (type) {
      case 'open':
        return this.onOpen(p)
      case 'ping':
        if ('rtt' in p && !isDuration(p.rtt)) this.violation('ping: rtt must be a duration')
        this.s.keepalives++
        this.sendMsg('pong', {})
        return
      case 'paused':
        if (this.state !== 'ACTIVE') return this.violation(`paused in state ${this.state}`)
        this.state = 'PAUSED'
        this.moves.pausing = false
        this.awaitingPaused = false
        return
      case 'resumed':
        if (this.state !== 'PAUSED') return this.violation(`resumed in state ${this.state}`)
        // (choice) The discarded stretch starts where audio stopped: `start` is the stream position.
        if (
          isDuration(p.start) &&
          Math.abs(parseIsoDuration(p.start) - (this.samples / 8000 + this.discardedSec)) > 0.0005
        )
          this.violation(`resumed: start ${p.start} is not the stream position`)
        this.addDiscarded(p, 'resumed')
        this.state = 'ACTIVE'
        return
      case 'discarded':
        this.addDiscarded(p, 'discarded')
        return
      case 'update':
        if (typeof p.language !== 'string' || !AH_LANG_RE.test(p.language))
          return this.violation('update: language must look like "en-US"')
        this.language = p.language
        this.sendMsg('updated', {})
        return
      case 'error':
        if (!AH_ERROR_CODES.includes(p.code as number) || typeof p.message !== 'string')
          this.violation('error: parameters must be {code: 400|405|408|409|413|415|429|500|503, message}')
        return
      case 'close':
        if (typeof p.reason !== 'string' || !AH_CLOSE_REASONS.includes(p.reason))
          this.violation('close: reason must be end, error, disconnect or reconnect')
        this.sendMsg('closed', {})
        this.state = 'CLOSED'
        this.moves.disconnecting = false
        return
      default:
        return this.violation(`Invalid Message: '${type}' is not a supported client message`)
    }
  }

  private sendMsg(type: string, parameters: Json): void {
    this.moves.sent(type)
    this.s.send({
      version: '2',
      id: this.sessionId,
      type,
      seq: ++this.serverSeq,
      clientseq: this.clientSeq,
      parameters
    })
  }

  /** Records a violation and, once per session, answers it like the reference server. */
  private violation(info: string): void {
    this.s.note(info)
    if (this.signaled || this.state === 'CLOSED') return
    this.signaled = true
    this.sendMsg('disconnect', { reason: 'error', info: `Client Error: ${info}` })
  }

  /** resumed / discarded: {start, discarded} durations; the discarded time moves the stream position on. */
  private addDiscarded(p: Json, what: string): void {
    if (!isDuration(p.start) || !isDuration(p.discarded))
      return this.violation(`${what}: parameters must be {start, discarded} durations`)
    this.discardedSec += parseIsoDuration(p.discarded)
  }

  private onOpen(p: Json): void {
    if (this.state !== 'PREPARING') return this.violation(`open in state ${this.state}`)
    const bad = checkOpenParams(p, this.orgId)
    if (bad !== null) return this.violation(bad)
    this.language = typeof p.language === 'string' ? p.language : null
    const offers = p.media as Json[]
    const selected =
      offers.find(m => m.format === 'PCMU' && (m.channels as unknown[]).length === 1) ??
      offers.find(m => m.format === 'PCMU')
    if (selected === undefined) return this.violation('open: no PCMU 8000 Hz media offered')
    this.channels = (selected.channels as unknown[]).length
    if (this.channels === 2) this.s.stereo = new ChannelSplit(2, 1)
    const refusal = this.moves.refusal
    if (refusal !== null) {
      this.signaled = true
      return this.sendMsg('disconnect', refusal)
    }
    const startPaused = this.moves.startPaused
    this.sendMsg('opened', { media: [selected], startPaused })
    this.state = 'ACTIVE'
    this.awaitingPaused = startPaused
    markConnectionProbe(this.s, p)
    this.moves.arm((type, params) => this.serverMove(type, params))
  }

  /** A scripted server message (options.audiohook.steps), when the session is in a state to send it. */
  private serverMove(type: ServerMove, p: Json): void {
    if (this.state === 'CLOSED' || !this.s.isOpen) return
    if (type === 'pause' && this.state !== 'ACTIVE') return this.s.say(`pause skipped in state ${this.state}`)
    if (type === 'resume' && this.state !== 'PAUSED' && !this.awaitingPaused)
      return this.s.say(`resume skipped in state ${this.state}`)
    if (type === 'disconnect') {
      this.signaled = true
      return this.sendMsg('disconnect', { reason: 'completed', ...p })
    }
    this.sendMsg(type, p)
  }

  /** `heardMs`: the stretch of the audio received (not the stream timeline) that the words name, when transcribing frames. */
  private transcriptEvent(
    startSec: number,
    endSec: number,
    n: number,
    channel: number,
    heardMs: [number, number]
  ): void {
    const words =
      this.hearing !== null
        ? this.hearing.words(heardMs[0], heardMs[1], channel)
        : this.channels > 1
          ? [...phrase(n), 'channel', String(channel)]
          : phrase(n)
    const step = words.length > 0 ? (endSec - startSec) / words.length : 0
    const tokens = words.map((value, i) => ({
      type: 'word',
      value,
      confidence: 0.9,
      offset: isoDuration(startSec + i * step),
      duration: isoDuration(step)
    }))
    const alternative = {
      confidence: 0.9,
      ...(this.language === null ? {} : { languages: [this.language] }),
      interpretations: [{ type: 'display', transcript: words.join(' '), tokens }]
    }
    const data = {
      id: randomUUID(),
      channelId: channel,
      isFinal: true,
      offset: isoDuration(startSec),
      duration: isoDuration(endSec - startSec),
      alternatives: [alternative]
    }
    this.sendMsg('event', { entities: [{ type: 'transcript', data }] })
  }
}
