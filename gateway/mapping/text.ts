import jsonata from 'jsonata'
import type { Expr } from './expr'
import { run, type MappingInput, type Outcome } from './run'

/**
 * The text section of a mapping file, compiled (format: schemas/mapping.schema.json `text`).
 * `path`, `headers` and `body` build the vendor request; `response` shapes what the platform gets.
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

export interface VendorAnswer {
  status: number
  headers: Record<string, string>
  body: unknown
}

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
export function compileText(
  raw: Record<string, any>,
  expr: (pointer: string, source: string | null | undefined) => Expr | null
): TextMapping {
  const request = raw.request ?? {}
  const compile = (pointer: string, source: string | null | undefined): TextExpr | null => {
    const slow = expr(pointer, source)
    return slow === null ? null : accelerate(source as string, slow)
  }
  return {
    method: request.method ?? 'POST',
    path: compile('/text/request/path', request.path),
    headers: compile('/text/request/headers', request.headers),
    // The schema requires body; a failed compilation was recorded, so the fallback is never run.
    body: compile('/text/request/body', request.body) ?? { slow: async () => null, fast: null },
    response: compile('/text/response', raw.response),
    idempotent: raw.idempotent === true
  }
}

// ---- fast path: a JSONata subset compiled to plain functions -------------------------------------
//
// Text expressions run on every utterance, and the JSONata evaluator (async, one frame per node) costs
// tens of µs per expression. Expressions built only from the subset below are also compiled into plain
// synchronous functions that follow JSONata's own evaluation rules (sequences, flattening, singleton
// unwrapping, own-property lookup, effective booleans, $string's number formatting); anything else
// keeps the JSONata evaluator. At run time, whenever the fast function meets a case it does not model
// (e.g. grouping over an array) or fails in any way, that call is evaluated by JSONata instead, so
// results and errors are always JSONata's. tests/unit/text/fast-path.test.ts compares both on many inputs.
// The fast function is synchronous: a request whose expressions all take it is mapped without a
// single await.
//
// Subset: string/number/true/false/null literals; paths of field names, optionally starting with $ or
// $$ and optionally ending in an object constructor; object constructors with distinct literal keys;
// array constructors; parentheses; `? :`; `&`, `=`, `!=`, `and`, `or`; $string, $merge, $exists,
// $boolean, $not of one argument. Inputs are the gateway's own input objects (never a top-level array).

type Fast = (ctx: unknown, root: unknown) => unknown

/** Node keys the subset understands; a node with any other key (predicates, grouping, focus…) is not compiled. */
const PLAIN_KEYS = new Set([
  'type',
  'value',
  'position',
  'steps',
  'lhs',
  'rhs',
  'expressions',
  'condition',
  'then',
  'else',
  'arguments',
  'procedure'
])
const BAIL = new Error('fast path does not model this case')

/** A text expression: JSONata's evaluator, and its fast twin when the expression is in the subset. */
export interface TextExpr {
  slow: Expr
  fast: Fast | null
}

export function accelerate(source: string, slow: Expr): TextExpr {
  let fast: Fast | null
  try {
    fast = compileFast(jsonata(source).ast())
  } catch {
    fast = null
  }
  return { slow, fast }
}

/** Evaluate: synchronously on the fast path, else (or when it hands the case back) through JSONata. A failure is a value. */
export function evaluate(e: TextExpr, input: TextInput): Outcome | Promise<Outcome> {
  if (e.fast !== null) {
    try {
      return { ok: true, value: e.fast(input, input) }
    } catch {
      // JSONata decides: same result, or JSONata's own error.
    }
  }
  return run(e.slow, input as unknown as MappingInput)
}

/** The fast function of an AST node, or null when the node is outside the subset. */
export function compileFast(node: any): Fast | null {
  if (node === null || typeof node !== 'object') return null
  for (const k of Object.keys(node)) if (!PLAIN_KEYS.has(k) && !(k === 'name' && node.name === undefined)) return null
  switch (node.type) {
    case 'string':
    case 'number':
    case 'value': {
      const v = node.value
      return () => v
    }
    case 'variable':
      if (node.value === '') return ctx => ctx
      if (node.value === '$') return (_ctx, root) => root
      return null
    case 'path':
      return compilePath(node.steps)
    case 'unary':
      if (node.value === '{') return compileObject(node.lhs)
      if (node.value === '[') return compileArray(node.expressions)
      return null
    case 'block': {
      // Parentheses; without := bindings (not in the subset) a block is its expressions in turn, valued as the last.
      if (!Array.isArray(node.expressions) || node.expressions.length === 0) return null
      const fs = node.expressions.map(compileFast)
      if (fs.some((f: Fast | null) => f === null)) return null
      if (fs.length === 1) return fs[0]
      return (ctx, root) => {
        let v: unknown
        for (const f of fs) v = f(ctx, root)
        return v
      }
    }
    case 'condition': {
      const c = compileFast(node.condition)
      const t = compileFast(node.then)
      const e = node.else === undefined ? () => undefined : compileFast(node.else)
      if (c === null || t === null || e === null) return null
      return (ctx, root) => (boolean(c(ctx, root)) === true ? t(ctx, root) : e(ctx, root))
    }
    case 'binary': {
      const l = compileFast(node.lhs)
      const r = compileFast(node.rhs)
      if (l === null || r === null) return null
      switch (node.value) {
        case '&':
          return (ctx, root) => {
            const a = l(ctx, root)
            const b = r(ctx, root)
            return (
              (a === undefined ? '' : (jsonataString(a) as string)) +
              (b === undefined ? '' : (jsonataString(b) as string))
            )
          }
        case '=':
          return (ctx, root) => {
            const a = l(ctx, root)
            const b = r(ctx, root)
            return a !== undefined && b !== undefined && deepEqual(a, b)
          }
        case '!=':
          return (ctx, root) => {
            const a = l(ctx, root)
            const b = r(ctx, root)
            return a !== undefined && b !== undefined && !deepEqual(a, b)
          }
        case 'and':
          return (ctx, root) => boolean(l(ctx, root)) === true && boolean(r(ctx, root)) === true
        case 'or':
          return (ctx, root) => boolean(l(ctx, root)) === true || boolean(r(ctx, root)) === true
        default:
          return null
      }
    }
    case 'function': {
      const proc = node.procedure
      if (proc?.type !== 'variable' || !Array.isArray(node.arguments) || node.arguments.length !== 1) return null
      for (const k of Object.keys(proc)) if (!PLAIN_KEYS.has(k)) return null
      const a = compileFast(node.arguments[0])
      if (a === null) return null
      switch (proc.value) {
        case 'string':
          return (ctx, root) => jsonataString(a(ctx, root))
        case 'merge':
          return (ctx, root) => merge(a(ctx, root))
        case 'exists':
          return (ctx, root) => a(ctx, root) !== undefined
        case 'boolean':
          return (ctx, root) => boolean(a(ctx, root))
        case 'not':
          return (ctx, root) => {
            const v = a(ctx, root)
            return v === undefined ? undefined : boolean(v) !== true
          }
        default:
          return null
      }
    }
    default:
      return null
  }
}

interface Step {
  kind: 'name' | 'variable' | 'object'
  key: string
  run: Fast
}

function compilePath(steps: any[]): Fast | null {
  if (!Array.isArray(steps) || steps.length === 0) return null
  const compiled: Step[] = []
  for (let i = 0; i < steps.length; i++) {
    const s = steps[i]
    if (s === null || typeof s !== 'object') return null
    for (const k of Object.keys(s)) if (!PLAIN_KEYS.has(k)) return null
    if (s.type === 'name' && typeof s.value === 'string') {
      const key: string = s.value
      compiled.push({ kind: 'name', key, run: ctx => unwrap(lookup(ctx, key)) })
    } else if (s.type === 'variable' && i === 0) {
      const f = compileFast(s)
      if (f === null) return null
      compiled.push({ kind: 'variable', key: '', run: f })
    } else if (s.type === 'unary' && s.value === '{' && i === steps.length - 1 && i > 0) {
      const f = compileObject(s.lhs)
      if (f === null) return null
      compiled.push({ kind: 'object', key: '', run: f })
    } else {
      return null
    }
  }
  const n = compiled.length
  // JSONata's evaluatePath / evaluateStep for these step kinds: sequences, flattening, unwrapping.
  const general = (ctx: unknown, root: unknown): unknown => {
    let input: unknown[] = Array.isArray(ctx) && compiled[0].kind !== 'variable' ? ctx : [ctx]
    let out: unknown[] = sequence()
    for (let i = 0; i < n; i++) {
      const step = compiled[i]
      const results: unknown[] = []
      for (const item of input) {
        const v = step.run(item, root)
        if (v !== undefined) results.push(v)
      }
      if (i === n - 1 && results.length === 1 && Array.isArray(results[0]) && !isSequence(results[0])) {
        out = results[0] as unknown[]
      } else {
        out = sequence()
        for (const v of results) {
          if (!Array.isArray(v) || isCons(v)) out.push(v)
          else for (const x of v) out.push(x)
        }
      }
      if (out.length === 0) break
      input = out
    }
    return unwrap(out)
  }
  // The usual case, from object to object with no array on the way, where every sequence above holds
  // one item: a plain walk gives the same. Meeting an array, the general rules take over from the start.
  return (ctx, root) => {
    let v = ctx
    for (let i = 0; i < n; i++) {
      if (Array.isArray(v)) return general(ctx, root)
      const step = compiled[i]
      if (step.kind === 'variable') {
        v = step.run(v, root)
      } else if (step.kind === 'object') {
        return step.run(v, root)
      } else {
        if (v === null || typeof v !== 'object' || !Object.hasOwn(v, step.key)) return undefined
        v = (v as Record<string, unknown>)[step.key]
      }
    }
    return isSequence(v) ? general(ctx, root) : v
  }
}

function compileObject(pairs: any[]): Fast | null {
  if (!Array.isArray(pairs)) return null
  const keys: string[] = []
  const values: Fast[] = []
  for (const pair of pairs) {
    if (!Array.isArray(pair) || pair.length !== 2 || pair[0]?.type !== 'string') return null
    for (const k of Object.keys(pair[0])) if (!PLAIN_KEYS.has(k)) return null
    const key = pair[0].value as string
    // Repeated keys are a JSONata error (D1009); the internal flag names are refused (D1013).
    if (keys.includes(key) || key === '_jsonata_lambda' || key === '_jsonata_function') return null
    const v = compileFast(pair[1])
    if (v === null) return null
    keys.push(key)
    values.push(v)
  }
  return (ctx, root) => {
    // Over an array JSONata groups the items by key: not modelled here.
    if (Array.isArray(ctx)) throw BAIL
    const out: Record<string, unknown> = {}
    for (let i = 0; i < keys.length; i++) {
      const v = values[i](ctx, root)
      if (v !== undefined) out[keys[i]] = v
    }
    return out
  }
}

function compileArray(items: any[]): Fast | null {
  if (!Array.isArray(items)) return null
  const fs: Fast[] = []
  const nested: boolean[] = []
  for (const item of items) {
    const f = compileFast(item)
    if (f === null) return null
    fs.push(f)
    nested.push(item.type === 'unary' && item.value === '[')
  }
  return (ctx, root) => {
    const out: unknown[] = []
    for (let i = 0; i < fs.length; i++) {
      const v = fs[i](ctx, root)
      if (v === undefined) continue
      if (nested[i] || !Array.isArray(v)) out.push(v)
      else for (const x of v) out.push(x)
    }
    return out
  }
}

function sequence(): unknown[] {
  const s: unknown[] = []
  ;(s as unknown as { sequence: boolean }).sequence = true
  return s
}

function isSequence(v: unknown): boolean {
  return Array.isArray(v) && (v as unknown as { sequence?: boolean }).sequence === true
}

function isCons(v: unknown[]): boolean {
  return (v as unknown as { cons?: boolean }).cons === true
}

/** What JSONata's evaluate() does to every result: an empty sequence is nothing, a singleton its item. */
function unwrap(v: unknown): unknown {
  if (!isSequence(v)) return v
  const s = v as unknown[]
  return s.length === 0 ? undefined : s.length === 1 ? s[0] : s
}

function lookup(input: unknown, key: string): unknown {
  if (Array.isArray(input)) {
    const out = sequence()
    for (const item of input) {
      const v = lookup(item, key)
      if (v === undefined) continue
      if (Array.isArray(v)) for (const x of v) out.push(x)
      else out.push(v)
    }
    return out
  }
  if (input !== null && typeof input === 'object' && Object.hasOwn(input, key)) {
    if (typeof input === 'function') throw BAIL
    return (input as Record<string, unknown>)[key]
  }
  return undefined
}

/** JSONata's $boolean (effective boolean value). */
function boolean(v: unknown): boolean | undefined {
  if (v === undefined) return undefined
  if (Array.isArray(v)) {
    if (v.length === 1) return boolean(v[0])
    return v.length > 1 && v.some(x => boolean(x) === true)
  }
  if (typeof v === 'string') return v.length > 0
  if (typeof v === 'number') {
    if (!Number.isFinite(v) && !Number.isNaN(v)) throw BAIL
    return !Number.isNaN(v) && v !== 0
  }
  if (typeof v === 'boolean') return v
  if (v !== null && typeof v === 'object') return Object.keys(v).length > 0
  if (typeof v === 'function') throw BAIL
  return false
}

/** JSONata's $string: strings as they are, everything else as JSON with non-integers at 15 significant digits. */
function jsonataString(v: unknown): string | undefined {
  if (v === undefined) return undefined
  if (typeof v === 'string') return v
  // What JSON.stringify writes for these, without its replacer round.
  if (typeof v === 'number' && Number.isInteger(v)) return String(v)
  if (typeof v === 'boolean' || v === null) return String(v)
  if (typeof v === 'function' || (typeof v === 'number' && !Number.isFinite(v))) throw BAIL
  return JSON.stringify(v, (_k, val: unknown) => {
    if (typeof val === 'number') {
      if (Number.isNaN(val)) return val
      if (!Number.isFinite(val)) throw BAIL
      return Number.isInteger(val) ? val : Number(val.toPrecision(15))
    }
    if (typeof val === 'function') throw BAIL
    return val
  })
}

/** JSONata's $merge: an object or an array of objects, merged left to right. */
function merge(v: unknown): unknown {
  if (v === undefined) return undefined
  const list = Array.isArray(v) ? v : [v]
  const out: Record<string, unknown> = {}
  for (const o of list) {
    if (o === null || typeof o !== 'object' || Array.isArray(o)) throw BAIL
    for (const k of Object.keys(o)) out[k] = (o as Record<string, unknown>)[k]
  }
  return out
}

/** JSONata's isDeepEqual. */
function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return false
    for (let i = 0; i < a.length; i++) if (!deepEqual(a[i], b[i])) return false
    return true
  }
  const ak = Object.getOwnPropertyNames(a).sort()
  const bk = Object.getOwnPropertyNames(b).sort()
  if (ak.length !== bk.length) return false
  for (let i = 0; i < ak.length; i++) if (ak[i] !== bk[i]) return false
  for (const k of ak) if (!deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false
  return true
}

/**
 * The normalized utterance of a validated platform message. `checksToken`: the route checks the
 * credential itself, so `message` drops it (it was meant for the gateway, as on the audio hook).
 */
export function normalizeUtterance(
  msg: Record<string, unknown>,
  checksToken: boolean
): { request: Utterance; message: Record<string, unknown> } {
  const data = msg.messageData ?? msg.messageMetaData
  const config = msg.agentAssistAppConfig
  const request: Utterance = {
    contactId: Number(msg.contactId),
    busNo: Number(msg.busNo),
    tenantId: msg.tenantId as string,
    participantId: msg.participantId as Utterance['participantId'],
    messageBody: msg.messageBody as string,
    messageData: data !== null && typeof data === 'object' ? (data as Record<string, unknown>) : {},
    agentAssistAppConfig: config !== null && typeof config === 'object' ? (config as Record<string, unknown>) : {}
  }
  let message = msg
  if (checksToken && 'authorizationHeader' in msg) {
    const { authorizationHeader: _dropped, ...rest } = msg
    message = rest
  }
  return { request, message }
}

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

/** Run a text expression (the audio MappingInput type does not fit the text input; run() itself is input-agnostic). */
export async function runText(e: TextExpr, input: TextInput): Promise<Outcome> {
  return await evaluate(e, input)
}

/** One part of the request, or what is wrong with it (pointer of the expression, and why). */
export type Part<T> = { ok: true; value: T } | { ok: false; pointer: string; error: string }

/**
 * Evaluate path, headers and body for one replica and check what they produced; the first failure (in
 * that order) is the answer. Synchronous when every expression took the fast path.
 */
export function mapRequest(m: TextMapping, input: TextInput): MappedOutcome | Promise<MappedOutcome> {
  const path = m.path === null ? null : evaluate(m.path, input)
  const headers = m.headers === null ? null : evaluate(m.headers, input)
  const body = evaluate(m.body, input)
  if (path instanceof Promise || headers instanceof Promise || body instanceof Promise) {
    return (async () => assemble(m, await path, await headers, await body))()
  }
  return assemble(m, path, headers, body)
}

function assemble(m: TextMapping, path: Outcome | null, headers: Outcome | null, body: Outcome): MappedOutcome {
  const p = pathPart(path)
  if (!p.ok) return p
  const h = headersPart(headers)
  if (!h.ok) return h
  const b = bodyPart(body)
  if (!b.ok) return b
  if (b.value.contentType !== null) h.value['content-type'] ??= b.value.contentType
  return { ok: true, request: { method: m.method, path: p.value, headers: h.value, body: b.value.body } }
}

export async function mapPath(m: TextMapping, input: TextInput): Promise<Part<string | null>> {
  return pathPart(m.path === null ? null : await evaluate(m.path, input))
}

export async function mapHeaders(m: TextMapping, input: TextInput): Promise<Part<Record<string, string>>> {
  return headersPart(m.headers === null ? null : await evaluate(m.headers, input))
}

export async function mapBody(
  m: TextMapping,
  input: TextInput
): Promise<Part<{ body: string | null; contentType: string | null }>> {
  return bodyPart(await evaluate(m.body, input))
}

function pathPart(out: Outcome | null): Part<string | null> {
  if (out === null) return { ok: true, value: null }
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

/** The body as sent, and the content type it implies (null: none). */
function bodyPart(out: Outcome): Part<{ body: string | null; contentType: string | null }> {
  if (!out.ok) return { ok: false, pointer: '/text/request/body', error: out.error }
  const v = out.value
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
