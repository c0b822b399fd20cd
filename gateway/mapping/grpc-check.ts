import type { ConfigProblem } from '../errors'
import { readSource, type Source } from '../config/source'
import { toMessage } from '../upstream/proto-json'
import type { GrpcMethod } from '../upstream/protos'
import { pointerSegments } from '../validate/compile'

// `check` on a gRPC mapping (mapping/dry-run.ts): every request an expression produced on the example
// messages, and every sample response, held to its message in the protos. A field the message does not
// have is reported where its name is written: inside the expression, or at the sample's key.

/**
 * What is wrong with a request `value` the expression at `pointer` produced (null: nothing). A field name
 * not in the message points at the name in the expression's text (its first quoted occurrence).
 */
export function requestProblem(file: string, grpc: GrpcMethod, pointer: string, value: unknown): ConfigProblem | null {
  if (value === null || value === undefined) return null
  if (typeof value !== 'object' || Array.isArray(value))
    return { file, pointer, message: `must produce a ${grpc.request} (an object in the protobuf JSON form)` }
  const out = toMessage(grpc.protos, grpc.request, value)
  if (out.ok) return null
  const message = `${out.message} (at ${out.path} of the ${grpc.request} it produced)`
  const at = out.field === null ? null : fieldPosition(file, pointer, out.field)
  return { file, pointer, message, ...at }
}

/** What is wrong with sample response `i` (null: nothing), at the sample's own key. */
export function sampleProblem(file: string, grpc: GrpcMethod, i: number, sample: unknown): ConfigProblem | null {
  const out = toMessage(grpc.protos, grpc.response, sample)
  if (out.ok) return null
  return { file, pointer: `/samples/audio/${i}${out.path}`, message: `${out.message} (a ${grpc.response})` }
}

const sources = new Map<string, Source | null>()

/** Where `field` is written in the expression at `pointer`: its first occurrence as a quoted or bare key. */
function fieldPosition(file: string, pointer: string, field: string): { line: number; col: number } | null {
  if (!sources.has(file)) {
    try {
      sources.set(file, readSource(file))
    } catch {
      sources.set(file, null)
    }
  }
  const source = sources.get(file) ?? null
  if (source === null) return null
  let node: unknown = source.value
  for (const seg of pointerSegments(pointer)) node = (node as Record<string, unknown> | null)?.[seg]
  if (typeof node !== 'string') return null
  const escaped = field.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const m = new RegExp(`"${escaped}"\\s*:|\\b${escaped}\\b`).exec(node)
  if (m === null) return null
  return source.at(pointer, m.index + (m[0].startsWith('"') ? 1 : 0))
}
