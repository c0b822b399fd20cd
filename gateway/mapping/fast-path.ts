import jsonata from 'jsonata'
import type { Expr } from './expr'
import {
  BAIL,
  boolean,
  deepEqual,
  isCons,
  isSequence,
  jsonataString,
  lookup,
  merge,
  sequence,
  unwrap
} from './jsonata-values'
import { run, type Outcome } from './run'

// The JSONata fast path: a JSONata subset compiled to plain functions, for any input object.
//
// Text expressions run on every utterance (mapping/text.ts accelerates them all), and the JSONata
// evaluator (async, one frame per node) costs tens of µs per expression. Expressions built only from
// the subset below are also compiled into plain synchronous functions that follow JSONata's own
// evaluation rules (sequences, flattening, singleton unwrapping, own-property lookup, effective
// booleans, $string's number formatting); anything else keeps the JSONata evaluator. At run time,
// whenever the fast function meets a case it does not model (e.g. grouping over an array) or fails in
// any way, that call is evaluated by JSONata instead, so results and errors are always JSONata's.
// tests/unit/text/fast-path.test.ts compares both on many inputs.
// The fast function is synchronous (`evaluateNow`): callers await JSONata only for what it hands back.
//
// Subset: string/number/true/false/null literals; paths of field names, optionally starting with $ or
// $$ and optionally ending in an object constructor; object constructors with distinct literal keys;
// array constructors; parentheses; `? :`; `&`, `=`, `!=`, `and`, `or`; $string, $merge, $exists,
// $boolean, $not of one argument. Inputs are the gateway's own input objects (never a top-level array).

/** A compiled fast function: `ctx` is the context item, `root` the input object (`$$`). */
export type Fast = (ctx: unknown, root: unknown) => unknown

/** An expression: JSONata's evaluator, and its fast twin when the source is in the subset. */
export interface FastExpr<I = unknown> {
  slow: Expr<I>
  fast: Fast | null
}

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

/** Pair a compiled expression with its fast twin (null when the source is outside the subset). */
export function accelerate<I>(source: string, slow: Expr<I>): FastExpr<I> {
  let fast: Fast | null
  try {
    fast = compileFast(jsonata(source).ast())
  } catch {
    fast = null
  }
  return { slow, fast }
}

/**
 * The fast path alone, synchronous: its outcome, or null when the expression has no fast twin or the
 * twin hands this case back (then `evaluate` asks JSONata, whose result or error is the answer).
 */
export function evaluateNow<I>(e: FastExpr<I>, input: I): Outcome | null {
  if (e.fast === null) return null
  try {
    return { ok: true, value: e.fast(input, input) }
  } catch {
    // JSONata decides: same result, or JSONata's own error.
    return null
  }
}

/** Evaluate: on the fast path when it answers, else through JSONata. A failure is a value. */
export async function evaluate<I>(e: FastExpr<I>, input: I): Promise<Outcome> {
  return evaluateNow(e, input) ?? (await run(e.slow, input))
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
    case 'block':
      return compileBlock(node.expressions)
    case 'condition':
      return compileCondition(node)
    case 'binary':
      return compileBinary(node)
    case 'function':
      return compileFunction(node)
    default:
      return null
  }
}

/** Parentheses; without := bindings (not in the subset) a block is its expressions in turn, valued as the last. */
function compileBlock(expressions: any[]): Fast | null {
  if (!Array.isArray(expressions) || expressions.length === 0) return null
  const fs: Fast[] = []
  for (const e of expressions) {
    const f = compileFast(e)
    if (f === null) return null
    fs.push(f)
  }
  if (fs.length === 1) return fs[0]
  return (ctx, root) => {
    let v: unknown
    for (const f of fs) v = f(ctx, root)
    return v
  }
}

/** `? :`, the else branch optional (undefined without it). */
function compileCondition(node: any): Fast | null {
  const c = compileFast(node.condition)
  const t = compileFast(node.then)
  const e = node.else === undefined ? () => undefined : compileFast(node.else)
  if (c === null || t === null || e === null) return null
  return (ctx, root) => (boolean(c(ctx, root)) === true ? t(ctx, root) : e(ctx, root))
}

/** `&`, `=`, `!=`, `and`, `or`. */
function compileBinary(node: any): Fast | null {
  const l = compileFast(node.lhs)
  const r = compileFast(node.rhs)
  if (l === null || r === null) return null
  switch (node.value) {
    case '&':
      return (ctx, root) => {
        const a = l(ctx, root)
        const b = r(ctx, root)
        return (
          (a === undefined ? '' : (jsonataString(a) as string)) + (b === undefined ? '' : (jsonataString(b) as string))
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

/** $string, $merge, $exists, $boolean, $not of one argument. */
function compileFunction(node: any): Fast | null {
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
