import type { Result } from '../result'
import type { Expr } from './expr'

/** Kept importable from here: the audio side reads its input type from this file. */
export type { MappingInput, SocketInput } from './audio'

/** What one evaluation gave: its value, or JSONata's error as text. */
export type Outcome = Result<unknown>

/** Evaluate an expression on its input (audio or text); a failure is a value (the caller counts and logs it), never a throw. */
export async function run<I>(expr: Expr<I>, input: I): Promise<Outcome> {
  try {
    return { ok: true, value: await expr(input) }
  } catch (err) {
    return { ok: false, error: describeError(err) }
  }
}

/** JSONata's error as one line: its code, where in the source, and its message. */
function describeError(err: unknown): string {
  const e = err as { message?: string; code?: string; position?: number }
  return `JSONata ${e.code ?? 'error'}${e.position !== undefined ? ` at ${e.position}` : ''}: ${e.message ?? String(err)}`
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
