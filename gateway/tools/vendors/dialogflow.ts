import { randomUUID } from 'node:crypto'
import { createServer, type Server as HttpServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import {
  type handleUnaryCall,
  type MethodDefinition,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type sendUnaryData,
  status as Status
} from '@grpc/grpc-js'
import { googleProtosDir, loadProtos, type ProtoSet } from '../../upstream/protos'
import { analyzeContentProblem, createConversationProblem, createParticipantProblem } from './dialogflow-checks'
import {
  type DfConversation,
  type DialogflowOptions,
  type DialogflowReport,
  DfState,
  suggestionsFor
} from './dialogflow-state'
import { DialogflowStream } from './dialogflow-stream'
import { authProblem, type Refusal, unknownFields } from './google-stt-checks'

// An emulator of Dialogflow ES Agent Assist (google.cloud.dialogflow.v2): Conversations/CreateConversation and
// CompleteConversation, Participants/CreateParticipant, AnalyzeContent and StreamingAnalyzeContent, a gRPC server
// built from the official protos (google-proto-files). It refuses what the API refuses (dialogflow-checks.ts, each
// check with its reference; an unknown field anywhere is INVALID_ARGUMENT) and keeps each conversation's
// participants and messages (what it heard and what it was sent as chat), which its report serves as JSON.
// Streams: dialogflow-stream.ts.

export const DIALOGFLOW_PROTOS = [
  'google/cloud/dialogflow/v2/participant.proto',
  'google/cloud/dialogflow/v2/conversation.proto'
]
const PKG = 'google.cloud.dialogflow.v2'

export type { DfConversation, DfMessage, DfStreamReport, DialogflowOptions, DialogflowReport } from './dialogflow-state'

export interface DialogflowEmulator extends DialogflowReport {
  url: string
  port: number
  httpUrl: string
  close: () => Promise<void>
}

type Handler = (req: Record<string, any>, s: DfState) => Record<string, unknown> | Refusal

const isRefusal = (v: object): v is Refusal => 'code' in v && 'details' in v && Object.keys(v).length === 2

const HANDLERS: Record<string, Record<string, Handler>> = {
  Conversations: {
    CreateConversation: (req, s) => {
      const problem = createConversationProblem(req, s.opts.location ?? 'global')
      if (problem !== null) return problem
      const id = req.conversationId ?? `c${randomUUID().replace(/-/g, '').slice(0, 20)}`
      const name = `${req.parent}/conversations/${id}`
      if (s.conversation(name) !== undefined)
        return { code: Status.ALREADY_EXISTS, details: `Conversation ${name} already exists.` }
      const profile = req.conversation.conversationProfile
      s.report.conversations.push({ name, profile, state: 'IN_PROGRESS', participants: {}, messages: [] })
      return s.out('Conversation', conversationJson(s, name))
    },
    CompleteConversation: (req, s) => {
      const c = s.conversation(String(req.name ?? ''))
      if (c === undefined) return { code: Status.NOT_FOUND, details: `Conversation ${req.name ?? ''} not found.` }
      c.state = 'COMPLETED'
      return s.out('Conversation', conversationJson(s, c.name))
    }
  },
  Participants: {
    CreateParticipant: (req, s) => {
      const c = s.conversation(String(req.parent ?? ''))
      if (c === undefined) return { code: Status.NOT_FOUND, details: `Conversation ${req.parent ?? ''} not found.` }
      if (c.state === 'COMPLETED')
        return { code: Status.FAILED_PRECONDITION, details: 'The conversation is already completed.' }
      const problem = createParticipantProblem(req)
      if (problem !== null) return problem
      const name = `${c.name}/participants/p${Object.keys(c.participants).length + 1}`
      c.participants[name] = req.participant.role
      return s.out('Participant', { name, role: req.participant.role })
    },
    AnalyzeContent: (req, s) => {
      const p = s.participant(req.participant)
      if ('code' in p) return p
      const problem = analyzeContentProblem(req)
      if (problem !== null) return problem
      const text = req.textInput.text as string
      p.c.messages.push({ participant: req.participant, role: p.role, text, via: 'chat' })
      const message = {
        name: `${p.c.name}/messages/m${p.c.messages.length}`,
        content: text,
        languageCode: req.textInput.languageCode,
        participant: req.participant,
        participantRole: p.role
      }
      return s.out('AnalyzeContentResponse', { message, ...suggestionsFor(p.role, text, p.c.messages.length) })
    }
  }
}

function conversationJson(s: DfState, name: string): Record<string, unknown> {
  const c = s.conversation(name) as DfConversation
  return {
    name,
    lifecycleState: c.state,
    conversationProfile: c.profile,
    conversationStage: 'HUMAN_ASSIST_STAGE'
  }
}

export async function startDialogflow(opts: DialogflowOptions = {}): Promise<DialogflowEmulator> {
  const protos = loadProtos(DIALOGFLOW_PROTOS, [googleProtosDir()])
  const state = new DfState(protos, opts)
  const server = new Server()
  for (const [service, methods] of Object.entries(HANDLERS)) {
    const def: Record<string, MethodDefinition<Buffer, object>> = {}
    const impl: Record<string, handleUnaryCall<Buffer, object>> = {}
    for (const [name, handler] of Object.entries(methods)) {
      const m = protos.method(`${PKG}.${service}/${name}`)
      if (m === null) throw new Error(`${service}/${name} is not in the protos`)
      def[name] = rawIn(m)
      impl[name] = (call, cb) => unary(state, m, `${service}/${name}`, handler, call, cb)
    }
    if (service === 'Participants') {
      const m = protos.method(`${PKG}.Participants/StreamingAnalyzeContent`)
      if (m === null) throw new Error('StreamingAnalyzeContent is not in the protos')
      def.StreamingAnalyzeContent = rawIn(m)
      ;(impl as Record<string, unknown>).StreamingAnalyzeContent = (call: never) => new DialogflowStream(call, state, m)
    }
    server.addService(def, impl)
  }
  const host = opts.host ?? '127.0.0.1'
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${host}:${opts.port ?? 0}`, ServerCredentials.createInsecure(), (err, p) =>
      err === null ? resolve(p) : reject(err)
    )
  )
  const http = await reportServer(host, state.report)
  opts.log?.(`dialogflow emulator on grpc://${host}:${port}`)
  return Object.assign(state.report, {
    url: `grpc://${host}:${port}`,
    port,
    httpUrl: `http://${host}:${(http.address() as AddressInfo).port}`,
    close: async () => {
      http.close()
      await new Promise<void>(resolve => server.tryShutdown(() => resolve()))
      server.forceShutdown()
    }
  })
}

/** Raw bytes in: each call walks them for unknown fields before decoding. */
function rawIn(m: MethodDefinition<object, object>): MethodDefinition<Buffer, object> {
  return {
    ...m,
    requestSerialize: (b: Buffer) => b,
    requestDeserialize: (b: Buffer) => b
  } as MethodDefinition<Buffer, object>
}

function unary(
  s: DfState,
  m: MethodDefinition<object, object>,
  method: string,
  handler: Handler,
  call: ServerUnaryCall<Buffer, object>,
  cb: sendUnaryData<object>
): void {
  const type = s.protos.typesOf(m as Parameters<ProtoSet['typesOf']>[0]).request
  const unknown = unknownFields(s.protos, type, call.request)
  const answer: Record<string, unknown> | Refusal =
    authProblem(call.metadata, s.opts, Date.now()) ??
    (unknown.length > 0
      ? {
          code: Status.INVALID_ARGUMENT,
          details: `Invalid request: unknown field(s) ${unknown.join(', ')} in ${type}.`
        }
      : handler(m.requestDeserialize(call.request) as Record<string, any>, s))
  if (isRefusal(answer)) {
    s.report.calls.push({ method, status: Status[answer.code], details: answer.details })
    s.opts.log?.(`${method} refused: ${Status[answer.code]} ${answer.details}`)
    cb({ code: answer.code, details: answer.details })
    return
  }
  s.report.calls.push({ method, status: 'OK' })
  cb(null, answer)
}

async function reportServer(host: string, report: DialogflowReport): Promise<HttpServer> {
  const http = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify(report))
  })
  await new Promise<void>(resolve => http.listen(0, host, resolve))
  return http
}
