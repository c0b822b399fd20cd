import { status as Status } from '@grpc/grpc-js'
import { toMessage } from '../../upstream/proto-json'
import type { ProtoSet } from '../../upstream/protos'
import type { Refusal } from './google-stt-checks'
import type { StreamReport } from './grpc-stream'

// What the Dialogflow emulator (dialogflow.ts, dialogflow-stream.ts) keeps: its options, its conversations and
// streams as its report shows them, and the suggestions it makes.

const PKG = 'google.cloud.dialogflow.v2'

export interface DialogflowOptions {
  port?: number
  host?: string
  /** The location its conversations are in (parent projects/<p>/locations/<this>). Default global. */
  location?: string
  /** Accepted API key (x-goog-api-key); absent: no credential is checked. */
  apiKey?: string
  /** A final every this many ms of audio (default 1000), its interim half-way. */
  resultEveryMs?: number
  transcribeFrames?: boolean
  /** Audio per extended stream before it times out (default 3 minutes, the API's). */
  maxStreamAudioMs?: number
  log?: (line: string) => void
}

/** One message of a conversation, as the emulator took it in. */
export interface DfMessage {
  participant: string
  role: string
  text: string
  via: 'audio' | 'chat'
}

export interface DfConversation {
  name: string
  profile: string
  state: 'IN_PROGRESS' | 'COMPLETED'
  participants: Record<string, string>
  messages: DfMessage[]
}

export interface DialogflowReport {
  conversations: DfConversation[]
  streams: DfStreamReport[]
  /** Every unary call: its method and the status it got (OK or the refusal's code name). */
  calls: { method: string; status: string; details?: string }[]
}

export interface DfStreamReport extends StreamReport {
  /** Where the call came from (host:port): a test with two front ends of one emulator tells them apart by it. */
  peer: string
  participant: string | null
  role: string | null
  config: Record<string, unknown> | null
  extended: boolean
  finals: string[]
  suggestions: number
}

/** The conversations of one emulator, and what its calls may look up. */
export class DfState {
  readonly report: DialogflowReport = { conversations: [], streams: [], calls: [] }
  constructor(
    readonly protos: ProtoSet,
    readonly opts: DialogflowOptions
  ) {}

  conversation(name: string): DfConversation | undefined {
    return this.report.conversations.find(c => c.name === name)
  }

  /** The participant `name`'s conversation and role; a refusal when there is none or it is completed. */
  participant(name: unknown): { c: DfConversation; role: string } | Refusal {
    const n = String(name ?? '')
    const c = this.conversation(n.replace(/\/participants\/[^/]+$/, ''))
    const role = c?.participants[n]
    if (c === undefined || role === undefined)
      return { code: Status.NOT_FOUND, details: `Participant ${n === '' ? '(none)' : n} not found.` }
    if (c.state === 'COMPLETED')
      return { code: Status.FAILED_PRECONDITION, details: 'The conversation is already completed.' }
    return { c, role }
  }

  /** A response in the JSON form → the object the serializer takes (a bad one is the emulator's bug). */
  out(type: string, json: unknown): Record<string, unknown> {
    const o = toMessage(this.protos, `${PKG}.${type}`, json)
    if (!o.ok) throw new Error(`the emulator built a bad ${type}: ${o.path}: ${o.message}`)
    return o.value
  }
}

/** The suggestions Agent Assist would give the human agent on an END_USER's message `n` (none on others'). */
export function suggestionsFor(role: string, text: string, n: number): Record<string, unknown> {
  if (role !== 'END_USER') return {}
  const record = (kind: string): string => `projects/emulator/locations/global/answerRecords/${kind}${n}`
  return {
    humanAgentSuggestionResults: [
      {
        suggestArticlesResponse: {
          articleAnswers: [
            {
              title: `Article for: ${text}`,
              uri: `https://kb.example/articles/${n}`,
              snippets: [text],
              confidence: 0.8,
              answerRecord: record('a')
            }
          ],
          contextSize: n
        }
      },
      {
        suggestFaqAnswersResponse: {
          faqAnswers: [
            { answer: `Answer to: ${text}`, question: text, confidence: 0.7, source: 'faq', answerRecord: record('f') }
          ],
          contextSize: n
        }
      },
      {
        suggestSmartRepliesResponse: {
          smartReplyAnswers: [{ reply: `Reply to: ${text}`, confidence: 0.6, answerRecord: record('s') }],
          contextSize: n
        }
      }
    ]
  }
}
