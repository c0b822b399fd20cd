import type { AnswerKind } from '../upstream/http-call'
import type { Utterance } from '../validate/messages'
import type { GrpcMethod } from '../upstream/protos'
import type { CompileAt } from './expr'
import type { GrpcStep } from './steps'
import { accelerate, type FastExpr } from './fast-path'

/**
 * The text section of a mapping file, compiled (format: schemas/mapping.schema.json `text`).
 * `path`, `headers` and `body` build the vendor request (mapping/text-request.ts); `response` shapes
 * what the platform gets.
 */
export interface TextMapping {
  method: 'POST' | 'PUT' | 'PATCH'
  /** Absent: the replica's `text` URL as it is. */
  path: TextExpr | null
  headers: TextExpr | null
  body: TextExpr
  /** Absent: the vendor's answer body, unchanged. */
  response: TextExpr | null
  /** Whether a timed-out call may be repeated (used by retries; never assumed). */
  idempotent: boolean
  /** What a 2xx answer must be: `json` (else UPSTREAM_ANSWER_NOT_JSON), or `any`. */
  answer: AnswerKind
  /** A gRPC vendor: the unary method each utterance is one call of (`text.grpc`); absent or null: HTTP. */
  grpc?: GrpcMethod | null
  /** Unary calls before each utterance's call (`text.setup`): mapping/steps.ts. */
  setup?: readonly GrpcStep[]
  /** How long the contact's shared step results are kept (`grpc.shareSeconds`), in ms. */
  shareMs?: number
}

/** A text expression: JSONata's evaluator and, when the source is in the subset, its fast twin. */
export type TextExpr = FastExpr<TextInput>

/** The input object of every text expression (documented in schemas/mapping.schema.json). */
export interface TextInput {
  request: Utterance
  /** The platform's JSON as received; without `authorizationHeader` when the route checks it itself. */
  message: Readonly<Record<string, unknown>>
  /**
   * The platform's JSON text as received, when `message` is exactly that JSON (nothing dropped): a body
   * expression that yields `message` itself sends this text as it came, without serialising it again.
   */
  messageJson?: string | null
  requestId: string
  route: { name: string; params: Readonly<Record<string, unknown>>; checksToken: boolean }
  /** The replica called; `textPath` is the path of its text URL without trailing slashes ("" for none). */
  upstream: { name: string; credential: string | null; hasCredential: boolean; textPath?: string }
  /** The results of the mapping's setup steps (`text.setup`), by step name: only with a gRPC mapping's steps. */
  steps?: Record<string, unknown>
  /** Only for `response`: the vendor's answer (body parsed when it is JSON, else its text). */
  response?: VendorAnswer
}

export interface VendorAnswer {
  status: number
  headers: Record<string, string>
  body: unknown
}

/**
 * Compile the text section, as the validator leaves it (valid, the schema's defaults filled in); `expr` records
 * what does not compile.
 */
export function compileText(raw: Record<string, any>, expr: CompileAt): TextMapping {
  const request = raw.request
  const compile = (pointer: string, source: string | null | undefined): TextExpr | null => {
    const slow = expr(pointer, source)
    return slow === null ? null : accelerate(source as string, slow)
  }
  return {
    method: request.method,
    path: compile('/text/request/path', request.path),
    headers: compile('/text/request/headers', request.headers),
    // The schema requires body; a failed compilation was recorded, so the fallback is never run.
    body: compile('/text/request/body', request.body) ?? { slow: async () => null, fast: null },
    response: compile('/text/response', raw.response),
    idempotent: raw.idempotent === true,
    answer: raw.answer === 'json' ? 'json' : 'any'
  }
}
