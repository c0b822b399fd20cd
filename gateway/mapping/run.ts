import type { Expr } from './expr'

/** The one input object every audio expression sees (documented in schemas/mapping.schema.json). */
export interface MappingInput {
  init: Record<string, unknown>
  leg: { id: string; route: string; perspective: string; contactId: string; busNo: string; requestId: string | null }
  route: { name: string; params: Readonly<Record<string, unknown>>; checksToken: boolean }
  upstream: { name: string; audio: string | null; credential: string | null; hasCredential: boolean }
  /** The vendor socket being opened: a fresh id per socket (failover and rotation open new ones). */
  session?: { id: string }
  msg?: unknown
}

export type Outcome = { ok: true; value: unknown } | { ok: false; error: string }

/** Evaluate an expression; a failure is a value (the caller counts and logs it), never a throw. */
export async function run(expr: Expr, input: MappingInput): Promise<Outcome> {
  try {
    return { ok: true, value: await expr(input) }
  } catch (err) {
    const e = err as { message?: string; code?: string; position?: number }
    return {
      ok: false,
      error: `JSONata ${e.code ?? 'error'}${e.position !== undefined ? ` at ${e.position}` : ''}: ${e.message ?? String(err)}`
    }
  }
}

/** JSONata yields `undefined` for "no match"; a predicate holds only for a true boolean. */
export function truthy(o: Outcome): boolean {
  return o.ok && o.value === true
}

/** Frames to the vendor: objects become JSON text, strings go as they are, null/undefined sends nothing. */
export function frameOf(value: unknown): string | null {
  if (value === undefined || value === null) return null
  if (typeof value === 'string') return value
  return JSON.stringify(value)
}
