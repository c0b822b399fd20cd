import type { MethodDefinition, ServerDuplexStream } from '@grpc/grpc-js'
import { status as Status } from '@grpc/grpc-js'
import { Cadence, phrase } from './cadence'
import { firstStreamingProblem, laterStreamingProblem } from './dialogflow-checks'
import { type DfConversation, type DfState, type DfStreamReport, suggestionsFor } from './dialogflow-state'
import { Hearing } from './hearing'
import type { Refusal } from './google-stt-checks'
import { EmulatedStream } from './grpc-stream'

// One Participants/StreamingAnalyzeContent call of the Dialogflow emulator (dialogflow.ts). The first request
// names the participant and its audio config, the later ones carry input_audio [participant.proto
// StreamingAnalyzeContentRequest]. It transcribes on a cadence (a final every `resultEveryMs` of audio, an
// interim half-way; "frames A-B" with `transcribeFrames`; with enable_word_info, its words and their offsets
// from the stream's start [session.proto StreamingRecognitionResult]), each final a message of the participant's
// conversation. With enable_extended_streaming each final is followed at once by a response with that
// message and, for an END_USER's message, the human agent's suggestions (articles, FAQ answers, smart
// replies); past `maxStreamAudioMs` (3 minutes [extended]) the stream ends DEADLINE_EXCEEDED. Without it,
// finals and suggestions wait for the half-close [participant.proto StreamingAnalyzeContentResponse], and more
// than a minute of audio is refused [participant.proto input_audio]. A request after the half-close cannot
// come: HTTP/2 refuses DATA on a half-closed stream (RFC 9113 §5.1).

const REQUEST = 'google.cloud.dialogflow.v2.StreamingAnalyzeContentRequest'
/** [participant.proto input_audio]: without extended streaming, "must not exceed 1 minute". */
const PLAIN_MAX_MS = 60_000

export class DialogflowStream extends EmulatedStream<DfStreamReport> {
  private conversation: DfConversation | null = null
  /** Without extended streaming: what is said after the half-close. */
  private readonly held: object[] = []

  constructor(
    call: ServerDuplexStream<Buffer, object>,
    private readonly s: DfState,
    m: MethodDefinition<object, object>
  ) {
    super(call, s.protos, REQUEST, buf => m.requestDeserialize(buf), s.opts, newReport(s, call.getPeer()))
  }

  protected later(req: Record<string, any>): void {
    const problem = laterStreamingProblem(req)
    if (problem !== null) return this.refuse(problem)
    this.audio(Buffer.from(req.inputAudio as string, 'base64'))
  }

  protected first(req: Record<string, any>): void {
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

  protected overLimit(audioMs: number): Refusal | null {
    if (!this.report.extended)
      return audioMs > PLAIN_MAX_MS
        ? { code: Status.INVALID_ARGUMENT, details: 'The audio of one stream must not exceed 1 minute.' }
        : null
    return audioMs > (this.s.opts.maxStreamAudioMs ?? 180_000)
      ? { code: Status.DEADLINE_EXCEEDED, details: 'Extended streaming timed out after 3 minutes of audio.' }
      : null
  }

  protected result(startMs: number, endMs: number, isFinal: boolean): void {
    const r = this.report
    const words = this.heard !== null ? this.heard.words(startMs, endMs) : phrase(r.finals.length + 1)
    if (isFinal) this.cadence.start = endMs
    if (words.length === 0) return
    const transcript = words.join(' ')
    const config = (r.config ?? {}) as { languageCode?: string; enableWordInfo?: boolean }
    const recognitionResult = {
      messageType: 'TRANSCRIPT',
      transcript,
      isFinal,
      confidence: isFinal ? 0.9 : 0,
      ...(config.enableWordInfo === true ? { speechWordInfo: wordInfo(words, startMs, endMs) } : {}),
      speechEndOffset: offset(endMs),
      languageCode: String(config.languageCode ?? 'en-US').toLowerCase()
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

  protected override flush(): void {
    for (const out of this.held.splice(0)) this.call.write(out)
  }
}

const offset = (ms: number): string => `${(ms / 1000).toFixed(3)}s`

/** The words spread evenly over the result's audio [session.proto speech_word_info, audio_config.proto SpeechWordInfo]. */
function wordInfo(words: string[], startMs: number, endMs: number): Record<string, unknown>[] {
  const step = (endMs - startMs) / words.length
  return words.map((word, i) => ({
    word,
    startOffset: offset(startMs + i * step),
    endOffset: offset(startMs + (i + 1) * step),
    confidence: 0.9
  }))
}

function newReport(s: DfState, peer: string): DfStreamReport {
  const report: DfStreamReport = {
    id: s.report.streams.length + 1,
    peer,
    participant: null,
    role: null,
    config: null,
    extended: false,
    audioRequests: 0,
    audioBytes: 0,
    audioMs: 0,
    finals: [],
    suggestions: 0,
    refusal: null,
    ended: null
  }
  s.report.streams.push(report)
  return report
}
