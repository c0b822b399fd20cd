import { type ConfigProblem, ConfigError } from '../errors'
import { readSource } from '../config/source'
import { problemsOf, validator } from '../validate/compile'
import { compileAudio, type AudioMapping } from './audio'
import { compileExpr, type CompileAt } from './expr'
import { compileAudioGrpc, compileProtos, GRPC_CLOSE_CODES, grpcSteps } from './grpc'
import { compileHealth, type HealthMapping } from './health'
import { compileText, type TextMapping } from './text'

// Kept importable from here: the audio side reads these names from this file.
export type { AudioMapping, FramesSpec } from './audio'
export { EXPRESSION_LIMITS, type Expr } from './expr'

export interface CompiledMapping {
  file: string
  vendor: string
  audio: AudioMapping | null
  text: TextMapping | null
  /** The `health` section; absent in hand-built mappings (tests). */
  health?: HealthMapping | null
  samples: { audio: unknown[]; text: unknown[] }
}

const cache = new Map<string, CompiledMapping>()

/** Drop the compiled mappings, so the next loads read the files anew (a reload); compiled ones in use stay valid. */
export function forgetMappings(): void {
  cache.clear()
}

/** Load, validate and compile a mapping file once per process; every problem names file and pointer. */
export function loadMapping(file: string): CompiledMapping {
  const hit = cache.get(file)
  if (hit !== undefined) return hit
  const written = readSource(file)
  const raw = written.value as Record<string, any>
  const validate = validator('mapping')
  if (!validate(raw))
    throw new ConfigError(
      problemsOf(validate.errors).map(p => ({
        file,
        pointer: p.pointer,
        message: p.message,
        ...written.where(p.pointer)
      }))
    )
  const problems: ConfigProblem[] = []
  const problem = (pointer: string, message: string): void => {
    problems.push({ file, pointer, message, ...written.where(pointer) })
  }
  const expr: CompileAt = (pointer, source) => {
    if (source === undefined || source === null) return null
    try {
      return compileExpr(source)
    } catch (err) {
      const e = err as { message?: string; position?: number; code?: string; token?: unknown }
      // JSONata's position is just past the offending token: the problem points at the token's start.
      const token = typeof e.token === 'string' && e.token !== '(end)' ? e.token.length : 0
      const offset = e.position === undefined ? 0 : Math.max(0, e.position - Math.max(token, 1))
      const at = (e.position !== undefined ? written.at(pointer, token === 0 ? e.position : offset) : null) ?? {}
      problems.push({
        file,
        pointer,
        message: `JSONata ${e.code ?? 'error'}: ${e.message ?? String(err)}`,
        ...written.where(pointer),
        ...at
      })
      return null
    }
  }
  const protos = compileProtos(raw, file, problem)
  const grpc = raw.audio === undefined ? null : compileAudioGrpc(raw.audio, protos, problem)
  const audio =
    raw.audio === undefined
      ? null
      : compileAudio(raw.audio, expr, problem, grpc, raw.audio.grpc === undefined ? {} : GRPC_CLOSE_CODES)
  const text = raw.text === undefined ? null : compileText(raw.text, expr)
  grpcSteps(raw, protos, audio, text, expr, problem)
  const health = raw.health === undefined ? null : compileHealth(raw.health, expr, problem)
  if (problems.length > 0) throw new ConfigError(problems)
  const mapping: CompiledMapping = {
    file,
    vendor: raw.vendor,
    audio,
    text,
    health,
    samples: { audio: raw.samples?.audio ?? [], text: raw.samples?.text ?? [] }
  }
  cache.set(file, mapping)
  return mapping
}
