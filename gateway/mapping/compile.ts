import jsonata from 'jsonata'
import { ConfigError } from '../errors'
import { readStructured } from '../config/load'
import { problemsOf, validator } from '../validate/compile'
import { compileText, type TextMapping } from './text'

/** A compiled JSONata expression: evaluate it on one input object. Never used per audio frame. */
export type Expr = (input: unknown) => Promise<unknown>

export interface AudioMapping {
  open: Expr | null
  ready: { when: Expr | null; refused: Expr | null; reason: Expr | null; parameters: Expr | null } | null
  framing: 'binary'
  results: { when: Expr; emit: Expr }[]
  close: Expr | null
  closeCode: number
}

export interface CompiledMapping {
  file: string
  vendor: string
  audio: AudioMapping | null
  text: TextMapping | null
  samples: { audio: unknown[]; text: unknown[] }
}

const cache = new Map<string, CompiledMapping>()

/** Load, validate and compile a mapping file once per process; every problem names file and pointer. */
export function loadMapping (file: string): CompiledMapping {
  const hit = cache.get(file)
  if (hit !== undefined) return hit
  const raw = readStructured(file) as Record<string, any>
  const validate = validator('mapping')
  if (!validate(raw)) throw new ConfigError(problemsOf(validate.errors).map(p => ({ file, pointer: p.pointer, message: p.message })))
  const problems: { file: string; pointer: string; message: string }[] = []
  const expr = (pointer: string, source: string | null | undefined): Expr | null => {
    if (source === undefined || source === null) return null
    try {
      const compiled = jsonata(source)
      return async (input: unknown) => await compiled.evaluate(input)
    } catch (err) {
      const e = err as { message?: string; position?: number; code?: string }
      problems.push({ file, pointer, message: `JSONata ${e.code ?? 'error'} at ${e.position ?? '?'}: ${e.message ?? String(err)}` })
      return null
    }
  }
  let audio: AudioMapping | null = null
  if (raw.audio !== undefined) {
    const a = raw.audio
    audio = {
      open: expr('/audio/open', a.open),
      ready: a.ready === undefined
        ? null
        : {
            when: expr('/audio/ready/when', a.ready.when),
            refused: expr('/audio/ready/refused', a.ready.refused),
            reason: expr('/audio/ready/reason', a.ready.reason),
            parameters: expr('/audio/ready/parameters', a.ready.parameters)
          },
      framing: a.frames?.framing ?? 'binary',
      results: (a.results ?? []).map((r: { when: string; emit: string }, i: number) => ({
        when: expr(`/audio/results/${i}/when`, r.when) as Expr,
        emit: expr(`/audio/results/${i}/emit`, r.emit) as Expr
      })),
      close: expr('/audio/close', a.close),
      closeCode: a.closeCode ?? 1000
    }
    if (audio.ready !== null && audio.ready.when === null && !problems.some(p => p.pointer.startsWith('/audio/ready'))) {
      problems.push({ file, pointer: '/audio/ready/when', message: 'is required when ready is given' })
    }
  }
  const text = raw.text === undefined ? null : compileText(raw.text, expr)
  if (problems.length > 0) throw new ConfigError(problems)
  const mapping: CompiledMapping = { file, vendor: raw.vendor, audio, text, samples: { audio: raw.samples?.audio ?? [], text: raw.samples?.text ?? [] } }
  cache.set(file, mapping)
  return mapping
}
