import type { GrpcMethod, ProtoSet } from '../upstream/protos'
import type { AudioMapping, CloseClass } from './audio'
import type { CompileAt } from './expr'
import { compileSteps, protoLoader } from './steps'
import type { TextMapping } from './text'

// A mapping's gRPC sections: the top-level `grpc.protos`, loaded once, and the method of `audio.grpc`
// resolved against them (schemas/mapping.schema.json).

/**
 * What a gRPC status means when the mapping's `closeCodes` says nothing (a call that ends with status N
 * is a close with 4000 + N: upstream/grpc-leg.ts). UNAUTHENTICATED and PERMISSION_DENIED are a refused
 * credential, INVALID_ARGUMENT and its kin a refused request (every replica would answer the same: the leg
 * ends), RESOURCE_EXHAUSTED a quota (fail over with backoff), ABORTED, OUT_OF_RANGE and DEADLINE_EXCEEDED a
 * session the vendor ended (a stream past its limit: a new one starts). UNAVAILABLE, INTERNAL, UNKNOWN and
 * DATA_LOSS are left unclassified: a replica that went away, counted against its health and failed over
 * like a WebSocket closed abnormally.
 */
export const GRPC_CLOSE_CODES: Readonly<Record<number, CloseClass>> = {
  4003: 'bad-request', // INVALID_ARGUMENT
  4004: 'transient', // DEADLINE_EXCEEDED
  4005: 'bad-request', // NOT_FOUND
  4006: 'bad-request', // ALREADY_EXISTS
  4007: 'auth', // PERMISSION_DENIED
  4008: 'rate-exceeded', // RESOURCE_EXHAUSTED
  4009: 'bad-request', // FAILED_PRECONDITION
  4010: 'transient', // ABORTED
  4011: 'transient', // OUT_OF_RANGE
  4012: 'bad-request', // UNIMPLEMENTED
  4016: 'auth' // UNAUTHENTICATED
}

/** The mapping's protos (null without a `grpc` section); a file that cannot be loaded is a problem at its item. */
export function compileProtos(
  raw: Record<string, any>,
  file: string,
  problem: (pointer: string, message: string) => void
): ProtoSet | null {
  if (raw.grpc === undefined) return null
  try {
    const { loadProtos, protoIncludeDirs } = protoLoader()
    return loadProtos(raw.grpc.protos as string[], protoIncludeDirs(file))
  } catch (err) {
    const message = (err as Error).message.split('\n')[0] ?? 'cannot be loaded'
    const i = (raw.grpc.protos as string[]).findIndex(p => message.includes(p))
    problem(i < 0 ? '/grpc/protos' : `/grpc/protos/${i}`, message)
    return null
  }
}

/**
 * The unary steps of the audio and text sections (`audio.setup`, `audio.teardown`, `text.setup`) and `text.grpc`,
 * resolved against the protos and set on the compiled sections.
 */
export function grpcSteps(
  raw: Record<string, any>,
  protos: ProtoSet | null,
  audio: AudioMapping | null,
  text: TextMapping | null,
  expr: CompileAt,
  problem: (pointer: string, message: string) => void
): void {
  const shareMs = (raw.grpc?.shareSeconds ?? 21600) * 1000
  if (audio !== null) {
    for (const at of ['setup', 'teardown'] as const)
      if ((raw.audio[at]?.length ?? 0) > 0 && raw.audio.grpc === undefined)
        problem(`/audio/${at}`, 'needs audio.grpc: its steps are gRPC calls on the replica of the leg’s stream')
    const auth = audio.grpc?.auth ?? 'none'
    audio.setup = compileSteps(raw.audio.setup, '/audio/setup', protos, expr, problem, auth)
    audio.teardown = compileSteps(raw.audio.teardown, '/audio/teardown', protos, expr, problem, auth)
    audio.shareMs = shareMs
  }
  if (text !== null && raw.text.setup !== undefined && raw.text.grpc === undefined)
    problem('/text/setup', 'needs text.grpc: its steps are gRPC calls')
  if (text === null || raw.text.grpc === undefined) return
  if (protos === null) return problem('/text/grpc', 'needs the protos of the top-level grpc section')
  const m = protoLoader().grpcMethod(protos, raw.text.grpc)
  if (typeof m === 'string') return problem('/text/grpc/method', m)
  if (m.definition.requestStream || m.definition.responseStream)
    problem('/text/grpc/method', `${raw.text.grpc.method} is not a unary method`)
  text.grpc = m
  text.setup = compileSteps(raw.text.setup, '/text/setup', protos, expr, problem, m.auth)
  text.shareMs = shareMs
}

/** `audio.grpc` resolved (null when absent or wrong: recorded). */
export function compileAudioGrpc(
  a: Record<string, any>,
  protos: ProtoSet | null,
  problem: (pointer: string, message: string) => void
): GrpcMethod | null {
  if (a.grpc === undefined) return null
  if (protos === null) {
    problem('/audio/grpc', 'needs the protos of the top-level grpc section')
    return null
  }
  if (a.frames.framing !== 'binary')
    problem('/audio/frames/framing', 'a gRPC stream frames audio itself: binary (the default) only')
  const m = protoLoader().grpcMethod(protos, a.grpc)
  if (typeof m === 'string') {
    problem(m.startsWith('no method') ? '/audio/grpc/method' : '/audio/grpc/audioField', m)
    return null
  }
  if (!m.definition.requestStream || !m.definition.responseStream)
    problem('/audio/grpc/method', `${a.grpc.method} is not a bidirectional stream`)
  if (m.audioField === null) problem('/audio/grpc/audioField', 'is required: the request field audio goes in')
  return m
}
