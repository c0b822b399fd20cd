import { Metadata, type ServiceError, status as Status } from '@grpc/grpc-js'
import { channelFor } from './grpc-channel'
import { type GrpcTarget, grpcTarget } from './grpc-url'
import { fromMessage, toMessage } from './proto-json'
import type { GrpcMethod } from './protos'

/**
 * How one unary call ended: its response in the protobuf JSON form, or its status (`code`, a gRPC status
 * number) and the vendor's details. A request the message does not take is INVALID_ARGUMENT before anything
 * is sent (`gateway` true: the details are the gateway's, naming the field).
 */
export type UnaryOutcome =
  | { ok: true; value: Record<string, unknown> }
  | { ok: false; code: number; details: string; gateway?: boolean }

/**
 * One unary call of `method` on the replica at `url` (grpc:// or grpcs://), on the process's shared channel
 * (upstream/grpc-channel.ts): `request` in the protobuf JSON form, `headers` and the call credentials as
 * metadata (never logged), a deadline of `deadlineMs` (gRPC's own, a wall-clock date). Never throws.
 */
export async function unaryCall(
  url: string,
  method: GrpcMethod,
  request: unknown,
  headers: Record<string, string>,
  deadlineMs: number,
  authHeaders?: () => Promise<Record<string, string>>
): Promise<UnaryOutcome> {
  let target: GrpcTarget
  try {
    target = grpcTarget(url)
  } catch (err) {
    // A URL that is not a gRPC one: ours, not the vendor's (a mapping's check refuses most such).
    return internal(`the call could not be made: ${(err as Error).message}`)
  }
  const out = toMessage(method.protos, method.request, request)
  if (!out.ok)
    return { ok: false, code: Status.INVALID_ARGUMENT, details: `${out.path}: ${out.message}`, gateway: true }
  let auth: Record<string, string> = {}
  try {
    if (authHeaders !== undefined) auth = await authHeaders()
  } catch (err) {
    // A credential that cannot make tokens (a bad key): a refusal of ours, never the key's text.
    return { ok: false, code: Status.UNAUTHENTICATED, details: (err as Error).message, gateway: true }
  }
  // Checked before grpc-js sees them: its refusal quotes the value (a secret with a trailing newline).
  const illegal = illegalHeader(headers) ?? illegalHeader(auth)
  if (illegal !== null)
    return {
      ok: false,
      code: Status.INVALID_ARGUMENT,
      details: `header ${illegal} is not legal gRPC metadata (its value: printable ASCII only; a trailing newline?)`,
      gateway: true
    }
  const metadata = new Metadata()
  for (const [k, v] of [...Object.entries(headers), ...Object.entries(auth)]) metadata.set(k.toLowerCase(), v)
  const d = method.definition
  return await new Promise<UnaryOutcome>(resolve => {
    try {
      channelFor(target).makeUnaryRequest(
        d.path,
        d.requestSerialize,
        d.responseDeserialize,
        out.value,
        metadata,
        { deadline: Date.now() + deadlineMs },
        (err: ServiceError | null, value?: object) => resolve(answerOf(method, err, value))
      )
    } catch (err) {
      // A channel that cannot be made: ours, not the vendor's.
      resolve(internal(`the call could not be made: ${(err as Error).message}`))
    }
  })
}

/** gRPC metadata as grpc-js takes it (metadata.js: a key of [0-9a-z_.-], not -bin, a value of printable ASCII). */
const LEGAL_KEY = /^[0-9a-z_.-]+$/
const LEGAL_VALUE = /^[ -~]*$/

/** The key of the first header grpc-js would refuse, JSON-quoted (its value is never said), or null. */
export function illegalHeader(headers: Readonly<Record<string, string>>): string | null {
  for (const [k, v] of Object.entries(headers)) {
    const key = k.toLowerCase()
    if (!LEGAL_KEY.test(key) || key.endsWith('-bin') || typeof v !== 'string' || !LEGAL_VALUE.test(v))
      return JSON.stringify(key)
  }
  return null
}

function internal(details: string): UnaryOutcome {
  return { ok: false, code: Status.INTERNAL, details, gateway: true }
}

/**
 * The call's status, or its response in the protobuf JSON form; a response that cannot be read (a malformed
 * Timestamp: RangeError) is INTERNAL.
 */
function answerOf(method: GrpcMethod, err: ServiceError | null, value: object | undefined): UnaryOutcome {
  if (err !== null && err !== undefined) return { ok: false, code: err.code, details: err.details ?? '' }
  try {
    return { ok: true, value: fromMessage(method.protos, method.response, value ?? {}) as Record<string, unknown> }
  } catch (e) {
    return internal(`the answer (${method.response}) could not be read: ${(e as Error).message}`)
  }
}

/** The status's name (UNAVAILABLE, …). */
export function statusName(code: number): string {
  return Status[code] ?? String(code)
}
