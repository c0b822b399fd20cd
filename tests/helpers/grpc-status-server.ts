import {
  type MethodDefinition,
  Server,
  ServerCredentials,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type sendUnaryData,
  status as Status
} from '@grpc/grpc-js'
import type { Test } from 'tap'
import { googleProtosDir, loadProtos, type ProtoSet } from '../../gateway/upstream/protos'
import { toMessage } from '../../gateway/upstream/proto-json'
import { join } from 'node:path'
import { mappingCopy } from './grpc'
import { TEXT_TOKEN } from './gateway'
import { utterance } from './tls'

// gRPC servers of google.cloud.dialogflow.v2 built from the official protos (google-proto-files, through the
// gateway's loader: the same messages the API serializes) that answer each call with the status the test chose.
// The replicas of a route share one script: `next(method, ...outcomes)` queues what the next calls of that
// method get, on whichever replica they land (a status code; 'hang': never answered, so the caller's
// deadline passes; 'hold': a unary call answered OK once the test calls `release()`; 'greet': a stream that
// sends one empty response first, as a vendor's first word); a call with nothing queued is answered OK with the smallest valid response. Each replica
// counts its calls per method and keeps the credential it was sent. A refusal's details echo that credential,
// as a careless vendor might: whatever reaches the platform must not.

const PKG = 'google.cloud.dialogflow.v2'
const STREAM = 'Participants/StreamingAnalyzeContent'
const PROTOS = ['google/cloud/dialogflow/v2/participant.proto', 'google/cloud/dialogflow/v2/conversation.proto']

export type Outcome = number | 'hang' | 'hold' | 'greet'

export interface StatusReplica {
  name: string
  url: string
  /** Calls per method (`Conversations/CreateConversation`, …), answered or not. */
  calls: Record<string, number>
  /** The x-goog-api-key metadata of the last call. */
  apiKey: string | null
}

export interface StatusServers {
  replicas: StatusReplica[]
  /** The next calls of `method` (on any replica) end with these outcomes, in order. */
  next: (method: string, ...outcomes: Outcome[]) => void
  /** Calls of `method` on each replica, in replica order. */
  count: (method: string) => number[]
  /** The calls held ('hold') so far are answered, OK. */
  release: () => void
}

/** An OK answer of each unary method, in the protobuf JSON form, from its request. */
const ANSWERS: Record<string, (req: Record<string, any>, n: number) => Record<string, unknown>> = {
  'Conversations/CreateConversation': (req, n) => ({
    name: `${req.parent}/conversations/c${n}`,
    lifecycleState: 'IN_PROGRESS'
  }),
  'Conversations/CompleteConversation': req => ({ name: req.name, lifecycleState: 'COMPLETED' }),
  'Participants/CreateParticipant': (req, n) => ({
    name: `${req.parent}/participants/p${n}`,
    role: req.participant.role
  }),
  'Participants/AnalyzeContent': (req, n) => ({
    message: {
      name: `${String(req.participant).replace(/\/participants\/.*/, '')}/messages/m${n}`,
      content: req.textInput?.text
    }
  })
}

type Seen = (method: string, md: { get: (k: string) => unknown[] }) => Outcome | null

/** A method's handler: the scripted outcome, else OK (a stream: read until the half-close, then OK). */
function handler(
  protos: ProtoSet,
  method: string,
  m: NonNullable<ReturnType<ProtoSet['method']>>,
  seen: Seen,
  made: () => number,
  held: (() => void)[]
) {
  const { response } = protos.typesOf(m)
  if (m.requestStream)
    return (call: ServerDuplexStream<object, object>) => {
      const out = seen(method, call.metadata)
      if (out === 'hang' || out === 'hold') return
      if (typeof out === 'number') {
        call.emit('error', { code: out, details: Status[out] })
        return
      }
      const first = toMessage(protos, response, {})
      if (out === 'greet' && first.ok) call.write(first.value)
      call.on('data', () => {})
      call.on('end', () => call.end())
    }
  return (call: ServerUnaryCall<object, object>, cb: sendUnaryData<object>) => {
    const out = seen(method, call.metadata)
    if (out === 'hang') return
    if (out === 'hold') return void held.push(() => answer(call, cb))
    if (out === 'greet') return answer(call, cb)
    const key = call.metadata.get('x-goog-api-key')[0] ?? 'none'
    if (out !== null) return cb({ code: out, details: `${Status[out]} (key ${String(key)})` })
    answer(call, cb)
  }
  function answer(call: ServerUnaryCall<object, object>, cb: sendUnaryData<object>): void {
    const msg = toMessage(protos, response, ANSWERS[method]!(call.request as Record<string, any>, made()))
    if (!msg.ok) return cb({ code: Status.INTERNAL, details: `the test server built a bad ${response}` })
    cb(null, msg.value)
  }
}

/** `n` replicas (r0, r1, …) on ephemeral ports, closed at the test's end. */
export async function statusServers(t: Test, n: number): Promise<StatusServers> {
  const protos = loadProtos(PROTOS, [googleProtosDir()])
  const script = new Map<string, Outcome[]>()
  const replicas: StatusReplica[] = []
  const held: (() => void)[] = []
  let made = 0
  for (let i = 0; i < n; i++) {
    const r: StatusReplica = { name: `r${i}`, url: '', calls: {}, apiKey: null }
    const server = new Server()
    const seen: Seen = (method, md) => {
      r.calls[method] = (r.calls[method] ?? 0) + 1
      r.apiKey = (md.get('x-goog-api-key')[0] as string | undefined) ?? null
      return script.get(method)?.shift() ?? null
    }
    for (const service of ['Conversations', 'Participants']) {
      const def: Record<string, MethodDefinition<object, object>> = {}
      const impl: Record<string, unknown> = {}
      for (const method of [...Object.keys(ANSWERS), STREAM].filter(x => x.startsWith(`${service}/`))) {
        const m = protos.method(`${PKG}.${method}`)
        if (m === null) throw new Error(`${method} is not in the protos`)
        const name = method.slice(service.length + 1)
        def[name] = m
        impl[name] = handler(protos, method, m, seen, () => ++made, held)
      }
      server.addService(def, impl as never)
    }
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
        err === null ? resolve(p) : reject(err)
      )
    )
    r.url = `grpc://127.0.0.1:${port}`
    replicas.push(r)
    t.teardown(() => server.forceShutdown())
  }
  return {
    replicas,
    next: (method, ...outcomes) => script.set(method, [...(script.get(method) ?? []), ...outcomes]),
    count: method => replicas.map(r => r.calls[method] ?? 0),
    release: () => {
      for (const go of held.splice(0)) go()
    }
  }
}

/** The shipped Dialogflow mapping and the params its routes take. */
export const DF_MAPPING = join(__dirname, '..', '..', 'mappings', 'dialogflow-agent-assist.yaml')
export const DF_PARAMS = { project: 'demo-project', conversationProfile: 'profile-1' }
/** The unary and stream methods the servers count, by what the mapping makes of them. */
export const DF_METHOD = {
  create: 'Conversations/CreateConversation',
  participant: 'Participants/CreateParticipant',
  complete: 'Conversations/CompleteConversation',
  analyze: 'Participants/AnalyzeContent',
  stream: STREAM
} as const

/**
 * A route of `mapping` on `urls` (each replica's audio and text alike, `upstream` added to each), the tests'
 * tokens on `hooks` (helpers/gateway.ts AUDIO_TOKEN and TEXT_TOKEN) and the Dialogflow params.
 */
export function dfRoute(
  mapping: string,
  urls: string[],
  hooks: ('audio' | 'text')[],
  upstream: Record<string, unknown> = {}
): Record<string, unknown> {
  const tokens = { audio: '${AUDIO_TOKEN}', text: '${TEXT_TOKEN}' }
  return {
    mapping,
    auth: Object.fromEntries(hooks.map(h => [h, [tokens[h]]])),
    params: DF_PARAMS,
    upstreams: urls.map((url, i) => ({ name: `r${i}`, audio: url, text: url, ...upstream }))
  }
}

/** A copy of the shipped Dialogflow mapping (in `t`'s test folder) whose CreateConversation has a deadline of `seconds`. */
export const withCreateDeadline = (t: Test, seconds: number): string =>
  mappingCopy(
    t,
    DF_MAPPING,
    '      request: *createConversation\n',
    `      request: *createConversation\n      deadlineSeconds: ${seconds}\n`
  )

/** One chat utterance of contact `contactId` on `route`, with the tests' text token: the HTTP status and the body. */
export async function dfChat(
  gw: { url: (path: string) => string },
  route: string,
  contactId: number
): Promise<{ status: number; body: Record<string, any>; text: string }> {
  const res = await fetch(gw.url(`/text/${route}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN },
    body: JSON.stringify(utterance({ contactId, busNo: 4594, messageBody: 'I was charged twice.' }))
  })
  const text = await res.text()
  return { status: res.status, body: JSON.parse(text) as Record<string, any>, text }
}
