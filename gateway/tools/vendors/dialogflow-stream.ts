import type { MethodDefinition, ServerDuplexStream } from '@grpc/grpc-js'
import { status as Status } from '@grpc/grpc-js'
import { Cadence, phrase } from './cadence'
import { firstStreamingProblem, laterStreamingProblem } from './dialogflow-checks'
import { type DfConversation, type DfState, type DfStreamReport, suggestionsFor } from './dialogflow-state'
import { Hearing } from './hearing'
import { authProblem, type Refusal, unknownFields } from './google-stt-checks'

// One Participants/StreamingAnalyzeContent call of the Dialogflow emulator (dialogflow.ts). The first request
// names the participant and its audio config, the later ones carry input_audio [participant.proto
// StreamingAnalyzeContentRequest]. It transcribes on a cadence (a final every `resultEveryMs` of audio, an
// interim half-way; "frames A-B" with `transcribeFrames`), each final a message of the participant's
// conversation. With enable_extended_streaming each final is followed at once by a response with that
// message and, for an END_USER's message, the human agent's suggestions (articles, FAQ answers, smart
// replies); past `maxStreamAudioMs` (3 minutes [extended]) the stream ends DEADLINE_EXCEEDED. Without it,
// finals and suggestions wait for the half-close [participant.proto StreamingAnalyzeContentResponse], and more
// than a minute of audio is refused [participant.proto input_audio]. A request after the half-close cannot
// come: HTTP/2 refuses DATA on a half-closed stream (RFC 9113 §5.1).

const REQUEST = 'google.cloud.dialogflow.v2.StreamingAnalyzeContentRequest'
/** [participant.proto input_audio]: without extended streaming, "must not exceed 1 minute". */
const PLAIN_MAX_MS = 60_000

export class DialogflowStream {
  private state: 'FIRST' | 'STREAMING' | 'ENDED' = 'FIRST'
  private cadence = new Cadence(1000)
  private heard: Hearing | null = null
  private bytesPerMs = 8
  private conversation: DfConversation | null = null
  /** Without extended streaming: what is said after the half-close. */
  private readonly held: object[] = []
  readonly report: DfStreamReport

  constructor(
    private readonly call: ServerDuplexStream<Buffer, object>,
    private readonly s: DfState,
    private readonly m: MethodDefinition<object, object>
  ) {
    this.report = {
      id: s.report.streams.length + 1,
      participant: null,
      role: null,
      config: null,
      extended: false,
      audioRequests: 0,
      audioMs: 0,
      finals: [],
      suggestions: 0,
      refusal: null,
      ended: null
    }
    s.report.streams.push(this.report)
    const auth = authProblem(call.metadata, s.opts, Date.now())
    if (auth !== null) {
      this.refuse(auth)
      return
    }
    call.on('data', (b: Buffer) => this.request(b))
    call.on('end', () => this.halfClosed())
    call.on('cancelled', () => {
      if (this.state !== 'ENDED') this.report.ended = 'CANCELLED'
      this.state = 'ENDED'
    })
    call.on('error', () => {})
  }

  private request(buf: Buffer): void {
    if (this.state === 'ENDED') return
    const unknown = unknownFields(this.s.protos, REQUEST, buf)
    if (unknown.length > 0)
      return this.refuse({
        code: Status.INVALID_ARGUMENT,
        details: `Invalid request: unknown field(s) ${unknown.join(', ')} in ${REQUEST}.`
      })
    const req = this.m.requestDeserialize(buf) as Record<string, any>
    if (this.state === 'FIRST') return this.first(req)
    const problem = laterStreamingProblem(req)
    if (problem !== null) return this.refuse(problem)
    this.audio(Buffer.from(req.inputAudio as string, 'base64'))
  }

  private first(req: Record<string, any>): void {
    const problem = firstStreamingProblem(req)
    if (problem !== null) return this.refuse(problem)
    const p = this.s.participant(req.participant)
    if ('code' in p) return this.refuse(p)
    const r = this.report
    r.participant = req.participant
    r.role = p.role
    r.config = req.audioConfig ?? req.textConfig
    r.extended = req.enableExtendedStreaming === true
    this.conversation = p.c
    const c = req.audioConfig as { audioEncoding: string; sampleRateHertz: number }
    this.bytesPerMs = ((c.audioEncoding === 'AUDIO_ENCODING_LINEAR_16' ? 2 : 1) * c.sampleRateHertz) / 1000
    this.heard = this.s.opts.transcribeFrames === true ? new Hearing(1) : null
    this.cadence = new Cadence((this.s.opts.resultEveryMs ?? 1000) / 2)
    this.state = 'STREAMING'
  }

  private audio(data: Buffer): void {
    const r = this.report
    r.audioRequests++
    this.heard?.add(data)
    const ms = data.length / this.bytesPerMs
    r.audioMs += ms
    const max = r.extended ? (this.s.opts.maxStreamAudioMs ?? 180_000) : PLAIN_MAX_MS
    if (r.audioMs > max)
      return this.refuse(
        r.extended
          ? { code: Status.DEADLINE_EXCEEDED, details: 'Extended streaming timed out after 3 minutes of audio.' }
          : { code: Status.INVALID_ARGUMENT, details: 'The audio of one stream must not exceed 1 minute.' }
      )
    const c = this.cadence
    const crossed = c.add(ms)
    for (let i = 0; i < crossed; i++) {
      const at = c.boundary(i, crossed)
      this.result(c.start, at, ++c.ticks % 2 === 0)
    }
  }

  private result(startMs: number, endMs: number, isFinal: boolean): void {
    const r = this.report
    const words = this.heard !== null ? this.heard.words(startMs, endMs) : phrase(r.finals.length + 1)
    if (isFinal) this.cadence.start = endMs
    if (words.length === 0) return
    const transcript = words.join(' ')
    const recognitionResult = {
      messageType: 'TRANSCRIPT',
      transcript,
      isFinal,
      confidence: isFinal ? 0.9 : 0,
      speechEndOffset: `${(endMs / 1000).toFixed(3)}s`,
      languageCode: String((r.config as { languageCode?: string } | null)?.languageCode ?? 'en-US').toLowerCase()
    }
    this.say({ recognitionResult })
    if (!isFinal) return
    r.finals.push(transcript)
    const c = this.conversation as DfConversation
    c.messages.push({ participant: r.participant as string, role: r.role as string, text: transcript, via: 'audio' })
    const n = c.messages.length
    const message = {
      name: `${c.name}/messages/m${n}`,
      content: transcript,
      participant: r.participant,
      participantRole: r.role
    }
    const suggestions = suggestionsFor(r.role as string, transcript, n)
    if ('humanAgentSuggestionResults' in suggestions) r.suggestions++
    this.say({ message, ...suggestions })
  }

  /** Extended streaming: at once; else finals and what follows them after the half-close. */
  private say(json: Record<string, unknown>): void {
    const out = this.s.out('StreamingAnalyzeContentResponse', json)
    const interim = (json.recognitionResult as { isFinal?: boolean } | undefined)?.isFinal === false
    if (this.report.extended) this.call.write(out)
    else if (interim) this.call.write(out)
    else this.held.push(out)
  }

  private halfClosed(): void {
    if (this.state === 'ENDED') return
    const c = this.cadence
    if (this.state === 'STREAMING' && c.pending) this.result(c.start, c.audioMs, true)
    for (const out of this.held.splice(0)) this.call.write(out)
    this.state = 'ENDED'
    this.report.ended = 'OK'
    this.call.end()
  }

  private refuse(r: Refusal): void {
    if (this.state === 'ENDED') return
    this.state = 'ENDED'
    this.report.refusal = r
    this.report.ended = Status[r.code]
    this.s.opts.log?.(`stream ${this.report.id} refused: ${Status[r.code]} ${r.details}`)
    this.call.emit('error', { code: r.code, details: r.details })
  }
}
