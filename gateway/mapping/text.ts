import type { Expr } from './compile'
import { run, type MappingInput, type Outcome } from './run'

/**
 * The text section of a mapping file, compiled (format: schemas/mapping.schema.json `text`).
 * `path`, `headers` and `body` build the vendor request; `response` shapes what the platform gets.
 */
export interface TextMapping {
  method: 'POST' | 'PUT' | 'PATCH'
  /** Absent: the replica's `text` URL as it is. */
  path: Expr | null
  headers: Expr | null
  body: Expr
  /** Absent: the vendor's answer body, unchanged. */
  response: Expr | null
  /** Whether a timed-out call may be repeated (used by retries; never assumed). */
  idempotent: boolean
}

/** One utterance in the one shape every text mapping sees. Never holds a credential. */
export interface Utterance {
  contactId: number
  busNo: number
  tenantId: string
  participantId: 'patron' | 'agent' | 'system'
  messageBody: string
  /** `messageData` (2.7) or `messageMetaData` (2.8); `{}` when neither came. */
  messageData: Record<string, unknown>
  /** 2.9 configuration parameters; `{}` when none came. */
  agentAssistAppConfig: Record<string, unknown>
}

/** The input object of every text expression (documented in schemas/mapping.schema.json). */
export interface TextInput {
  request: Utterance
  /** The platform's JSON as received; without `authorizationHeader` when the route checks it itself. */
  message: Readonly<Record<string, unknown>>
  requestId: string
  route: { name: string; params: Readonly<Record<string, unknown>>; checksToken: boolean }
  upstream: { name: string; credential: string | null; hasCredential: boolean }
  /** Only for `response`: the vendor's answer (body parsed when it is JSON, else its text). */
  response?: VendorAnswer
}

export interface VendorAnswer { status: number; headers: Record<string, string>; body: unknown }

/** What the mapping asks the upstream side to send; the path is relative to the replica's text URL. */
export interface MappedRequest {
  method: 'POST' | 'PUT' | 'PATCH'
  path: string | null
  headers: Record<string, string>
  body: string | null
}

export type MappedOutcome = { ok: true; request: MappedRequest } | { ok: false; pointer: string; error: string }

/** An interface example utterance (2.7), used by `check` dry-runs and `simulate text`. */
export const EXAMPLE_UTTERANCE = Object.freeze({
  contactId: 584930211,
  busNo: 4594,
  tenantId: 'tenant-eu-1',
  participantId: 'patron',
  messageBody: 'Hi, I was charged twice for my last order.',
  messageData: { channel: 'chat', links: ['https://example.com/orders/1234'] },
  agentAssistAppConfig: { language: 'en-US', knowledgeBase: 'billing' }
})

/** Compile the text section; `expr` is compile.ts's compiler, which records problems by pointer. */
export function compileText (raw: Record<string, any>, expr: (pointer: string, source: string | null | undefined) => Expr | null): TextMapping {
  const request = raw.request ?? {}
  return {
    method: request.method ?? 'POST',
    path: expr('/text/request/path', request.path),
    headers: expr('/text/request/headers', request.headers),
    // The schema requires body; a failed compilation was recorded, so the fallback is never run.
    body: expr('/text/request/body', request.body) ?? (async () => null),
    response: expr('/text/response', raw.response),
    idempotent: raw.idempotent === true
  }
}

/**
 * The normalized utterance of a validated platform message. `checksToken`: the route checks the
 * credential itself, so `message` drops it (it was meant for the gateway, as on the audio hook).
 */
export function normalizeUtterance (msg: Record<string, unknown>, checksToken: boolean): { request: Utterance; message: Record<string, unknown> } {
  const data = msg.messageData ?? msg.messageMetaData
  const config = msg.agentAssistAppConfig
  const request: Utterance = {
    contactId: Number(msg.contactId),
    busNo: Number(msg.busNo),
    tenantId: msg.tenantId as string,
    participantId: msg.participantId as Utterance['participantId'],
    messageBody: msg.messageBody as string,
    messageData: data !== null && typeof data === 'object' ? data as Record<string, unknown> : {},
    agentAssistAppConfig: config !== null && typeof config === 'object' ? config as Record<string, unknown> : {}
  }
  let message = msg
  if (checksToken && 'authorizationHeader' in msg) {
    const { authorizationHeader: _dropped, ...rest } = msg
    message = rest
  }
  return { request, message }
}

/** Set by the gateway or the connection; a mapping may not set them. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect', 'te', 'trailer', 'proxy-connection'])
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** Run text expressions (the audio MappingInput type does not fit the text input; run() itself is input-agnostic). */
export async function runText (expr: Expr, input: TextInput): Promise<Outcome> {
  return await run(expr, input as unknown as MappingInput)
}

/** Evaluate path, headers and body for one replica and check what they produced. */
export async function mapRequest (m: TextMapping, input: TextInput): Promise<MappedOutcome> {
  let path: string | null = null
  if (m.path !== null) {
    const out = await runText(m.path, input)
    if (!out.ok) return { ok: false, pointer: '/text/request/path', error: out.error }
    const complaint = checkPath(out.value)
    if (complaint !== null) return { ok: false, pointer: '/text/request/path', error: `${complaint}; it produced ${describe(out.value)}` }
    path = out.value as string
  }
  const headers: Record<string, string> = {}
  if (m.headers !== null) {
    const out = await runText(m.headers, input)
    if (!out.ok) return { ok: false, pointer: '/text/request/headers', error: out.error }
    // Header values may be credentials: a complaint names the header, never its value.
    const complaint = copyHeaders(out.value, headers)
    if (complaint !== null) return { ok: false, pointer: '/text/request/headers', error: complaint }
  }
  const out = await runText(m.body, input)
  if (!out.ok) return { ok: false, pointer: '/text/request/body', error: out.error }
  let body: string | null
  const v = out.value
  if (v === undefined || v === null) {
    body = null
  } else if (typeof v === 'string') {
    body = v
    headers['content-type'] ??= 'text/plain; charset=utf-8'
  } else if (typeof v === 'object') {
    body = JSON.stringify(v)
    headers['content-type'] ??= 'application/json'
  } else {
    return { ok: false, pointer: '/text/request/body', error: `must produce an object, an array, a string or null; it produced ${describe(v)}` }
  }
  return { ok: true, request: { method: m.method, path, headers, body } }
}

/** A path result: undefined/null/"" keep the replica's URL; else a string starting with "/" and no spaces. */
export function checkPath (v: unknown): string | null {
  if (v === undefined || v === null || v === '') return null
  if (typeof v !== 'string') return 'must produce a string path'
  if (!v.startsWith('/') || /[\s#]/.test(v)) return 'must produce a path that starts with "/" and holds no spaces or "#"'
  return null
}

/** Copy a headers result (object of string, number or boolean values) into `into`, lower-casing names. */
export function copyHeaders (v: unknown, into: Record<string, string>): string | null {
  if (v === undefined || v === null) return null
  if (typeof v !== 'object' || Array.isArray(v)) return 'must produce an object of header names to values'
  for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
    const name = k.toLowerCase()
    if (!TOKEN.test(name)) return `header name ${JSON.stringify(k)} is not a valid HTTP token`
    if (RESERVED_HEADERS.has(name)) return `header ${name} is set by the gateway, not the mapping`
    if (val === undefined || val === null) continue
    if (typeof val !== 'string' && typeof val !== 'number' && typeof val !== 'boolean') return `header ${name} must be a string`
    const s = String(val)
    if (/[\r\n\0]/.test(s)) return `header ${name} holds a line break or NUL`
    into[name] = s
  }
  return null
}

export function describe (v: unknown): string {
  const s = v === undefined ? 'nothing' : JSON.stringify(v)
  return s === undefined ? String(v) : (s.length > 200 ? s.slice(0, 200) + '…' : s)
}
