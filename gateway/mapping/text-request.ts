import type { OutgoingRequest, RequestBuilder } from '../upstream/http-call'
import type { Replica } from '../upstream/pool'
import { evaluate, evaluateNow } from './fast-path'
import { run, type Outcome } from './run'
import { textPathOf } from './vendor-target'
import type { TextInput, TextMapping } from './text'

// Request assembly: the text expressions' results, checked, become the one upstream request type.

/** Why the mapping could not build the request: the pointer of the expression, and why (for the log only). */
export type MappingFailure = { ok: false; pointer: string; error: string }

/** One part of the request, or what is wrong with it. */
export type Part<T> = { ok: true; value: T } | MappingFailure

/** Set by the gateway or the connection; a mapping may not set them. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'expect',
  'te',
  'trailer',
  'proxy-connection'
])
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

const NO_PATH: Part<string | null> = Object.freeze({ ok: true, value: null })

/**
 * The request for one replica, synchronously: path, headers and body on the fast path, checked; the
 * first failure (in that order) is the answer. null when an expression needs JSONata's evaluator: then
 * `mapRequest`.
 */
export function mapRequestNow(m: TextMapping, input: TextInput): Part<OutgoingRequest> | null {
  let path: string | null = null
  if (m.path !== null) {
    const out = evaluateNow(m.path, input)
    if (out === null) return null
    const p = pathPart(out)
    if (!p.ok) return p
    path = p.value
  }
  let headers: Outcome | null = null
  if (m.headers !== null) {
    headers = evaluateNow(m.headers, input)
    if (headers === null) return null
  }
  const h = headersPart(headers)
  if (!h.ok) return h
  const body = evaluateNow(m.body, input)
  return body === null ? null : assemble(m, path, h.value, bodyPart(body, input))
}

/** The request for one replica, as `mapRequestNow` builds it, awaiting JSONata for what the fast path hands back. */
export async function mapRequest(m: TextMapping, input: TextInput): Promise<Part<OutgoingRequest>> {
  const p = m.path === null ? NO_PATH : pathPart(evaluateNow(m.path, input) ?? (await run(m.path.slow, input)))
  if (!p.ok) return p
  const h = headersPart(
    m.headers === null ? null : (evaluateNow(m.headers, input) ?? (await run(m.headers.slow, input)))
  )
  if (!h.ok) return h
  return assemble(m, p.value, h.value, bodyPart(evaluateNow(m.body, input) ?? (await run(m.body.slow, input)), input))
}

function assemble(
  m: TextMapping,
  path: string | null,
  headers: Record<string, string>,
  b: Part<{ body: string | null; contentType: string | null }>
): Part<OutgoingRequest> {
  if (!b.ok) return b
  if (b.value.contentType !== null) headers['content-type'] ??= b.value.contentType
  return { ok: true, value: { method: m.method, path, headers, body: b.value.body } }
}

/** The parts one by one (for `check` dry-runs, which report every failing part). */
export async function mapPath(m: TextMapping, input: TextInput): Promise<Part<string | null>> {
  return m.path === null ? NO_PATH : pathPart(await evaluate(m.path, input))
}

export async function mapHeaders(m: TextMapping, input: TextInput): Promise<Part<Record<string, string>>> {
  return headersPart(m.headers === null ? null : await evaluate(m.headers, input))
}

export async function mapBody(
  m: TextMapping,
  input: TextInput
): Promise<Part<{ body: string | null; contentType: string | null }>> {
  return bodyPart(await evaluate(m.body, input), input)
}

function pathPart(out: Outcome): Part<string | null> {
  if (!out.ok) return { ok: false, pointer: '/text/request/path', error: out.error }
  const complaint = checkPath(out.value)
  if (complaint !== null)
    return { ok: false, pointer: '/text/request/path', error: `${complaint}; it produced ${describe(out.value)}` }
  return { ok: true, value: (out.value as string | null | undefined) ?? null }
}

/** Header values may be credentials: a complaint names the header, never its value. */
function headersPart(out: Outcome | null): Part<Record<string, string>> {
  const headers: Record<string, string> = {}
  if (out === null) return { ok: true, value: headers }
  if (!out.ok) return { ok: false, pointer: '/text/request/headers', error: out.error }
  const complaint = copyHeaders(out.value, headers)
  if (complaint !== null) return { ok: false, pointer: '/text/request/headers', error: complaint }
  return { ok: true, value: headers }
}

/**
 * The body as sent, and the content type it implies (null: none). The platform's message itself, unchanged
 * (a passthrough body), goes as the JSON text that came: parsed and validated, never serialised again.
 */
function bodyPart(out: Outcome, input: TextInput): Part<{ body: string | null; contentType: string | null }> {
  if (!out.ok) return { ok: false, pointer: '/text/request/body', error: out.error }
  const v = out.value
  if (v === input.message && typeof input.messageJson === 'string')
    return { ok: true, value: { body: input.messageJson, contentType: 'application/json' } }
  if (v === undefined || v === null) return { ok: true, value: { body: null, contentType: null } }
  if (typeof v === 'string') return { ok: true, value: { body: v, contentType: 'text/plain; charset=utf-8' } }
  if (typeof v === 'object') {
    try {
      return { ok: true, value: { body: JSON.stringify(v), contentType: 'application/json' } }
    } catch (err) {
      return {
        ok: false,
        pointer: '/text/request/body',
        error: `the body cannot be written as JSON (${(err as Error).name})`
      }
    }
  }
  return {
    ok: false,
    pointer: '/text/request/body',
    error: `must produce an object, an array, a string or null; it produced ${describe(v)}`
  }
}

/** A path result: undefined/null/"" keep the replica's URL; else a string starting with "/" and no spaces. */
export function checkPath(v: unknown): string | null {
  if (v === undefined || v === null || v === '') return null
  if (typeof v !== 'string') return 'must produce a string path'
  if (!v.startsWith('/') || /[\s#]/.test(v))
    return 'must produce a path that starts with "/" and holds no spaces or "#"'
  return null
}

/** Copy a headers result (object of string, number or boolean values) into `into`, lower-casing names. */
export function copyHeaders(v: unknown, into: Record<string, string>): string | null {
  if (v === undefined || v === null) return null
  if (typeof v !== 'object' || Array.isArray(v)) return 'must produce an object of header names to values'
  for (const [k, val] of Object.entries(v as Record<string, unknown>)) {
    const name = k.toLowerCase()
    if (!TOKEN.test(name)) return `header name ${JSON.stringify(k)} is not a valid HTTP token`
    if (RESERVED_HEADERS.has(name)) return `header ${name} is set by the gateway, not the mapping`
    if (val === undefined || val === null) continue
    if (typeof val !== 'string' && typeof val !== 'number' && typeof val !== 'boolean')
      return `header ${name} must be a string`
    const s = String(val)
    if (/[\r\n\0]/.test(s)) return `header ${name} holds a line break or NUL`
    into[name] = s
  }
  return null
}

export function describe(v: unknown): string {
  const s = v === undefined ? 'nothing' : JSON.stringify(v)
  return s === undefined ? String(v) : s.length > 200 ? `${s.slice(0, 200)}…` : s
}

/**
 * A route's text.request as a value the transport takes (upstream/http-call.ts `RequestBuilder`): for the
 * replica the transport picked, `input.upstream` is that replica's (its name and credential, made once per
 * replica), then the mapping builds the request, synchronously when it can.
 */
export class TextRequestBuilder implements RequestBuilder<TextInput, MappingFailure> {
  private readonly upstreams = new WeakMap<Replica, TextInput['upstream']>()

  constructor(private readonly mapping: TextMapping) {}

  now(replica: Replica, input: TextInput): Part<OutgoingRequest> | null {
    input.upstream = this.upstreamOf(replica)
    return mapRequestNow(this.mapping, input)
  }

  async later(replica: Replica, input: TextInput): Promise<Part<OutgoingRequest>> {
    input.upstream = this.upstreamOf(replica)
    return await mapRequest(this.mapping, input)
  }

  private upstreamOf(replica: Replica): TextInput['upstream'] {
    let u = this.upstreams.get(replica)
    if (u === undefined) {
      const credential = replica.config.credential
      u = Object.freeze({
        name: replica.name,
        credential: credential ?? null,
        hasCredential: credential !== undefined,
        textPath: textPathOf(replica.config.text)
      })
      this.upstreams.set(replica, u)
    }
    return u
  }
}
