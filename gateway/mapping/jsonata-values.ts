// JSONata's value semantics as the fast path (fast-path.ts) follows them: sequences and their
// flattening, singleton unwrapping, own-property lookup, effective booleans, $string, $merge and deep
// equality. Any case they do not model throws BAIL, and that call is evaluated by JSONata instead.

/** Thrown for a case the fast path does not model: the call goes to JSONata. */
export const BAIL = new Error('fast path does not model this case')

export function sequence(): unknown[] {
  const s: unknown[] = []
  ;(s as unknown as { sequence: boolean }).sequence = true
  return s
}

export function isSequence(v: unknown): boolean {
  return Array.isArray(v) && (v as unknown as { sequence?: boolean }).sequence === true
}

export function isCons(v: unknown[]): boolean {
  return (v as unknown as { cons?: boolean }).cons === true
}

/** What JSONata's evaluate() does to every result: an empty sequence is nothing, a singleton its item. */
export function unwrap(v: unknown): unknown {
  if (!isSequence(v)) return v
  const s = v as unknown[]
  return s.length === 0 ? undefined : s.length === 1 ? s[0] : s
}

export function lookup(input: unknown, key: string): unknown {
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
export function boolean(v: unknown): boolean | undefined {
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
export function jsonataString(v: unknown): string | undefined {
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
export function merge(v: unknown): unknown {
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
export function deepEqual(a: unknown, b: unknown): boolean {
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
