import { ConfigError } from '../errors'
import { readStructured } from '../config/load'
import { problemsOf, validator } from '../validate/compile'
import { compileExpr, type Expr } from './expr'
import { compileText, type TextMapping } from './text'

export { EXPRESSION_LIMITS, type Expr } from './expr'

/** What a mapping's `audio.frames` asks for (schemas/mapping.schema.json). */
export interface FramesSpec {
  framing: 'binary' | 'json-base64'
  encoding: 'mulaw' | 'pcm16'
  sampleRate: 8000 | 16000
  /** Vendor chunk length; null: one vendor frame per platform frame. */
  chunkMs: number | null
}

export interface AudioMapping {
  url: Expr | null
  headers: Expr | null
  open: Expr | null
  ready: { when: Expr | null; refused: Expr | null; reason: Expr | null; parameters: Expr | null } | null
  frames: FramesSpec
  template: Expr | null
  keepalive: { everyMs: number; when: 'idle' | 'always'; frame: Expr } | null
  results: { when: Expr; emit: Expr }[]
  pause: Expr | null
  resume: Expr | null
  close: Expr | null
  closeWhen: Expr | null
  closeTimeoutMs: number
  closeCode: number
  rotateAfterMs: number | null
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
export function loadMapping(file: string): CompiledMapping {
  const hit = cache.get(file)
  if (hit !== undefined) return hit
  const raw = readStructured(file) as Record<string, any>
  const validate = validator('mapping')
  if (!validate(raw))
    throw new ConfigError(problemsOf(validate.errors).map(p => ({ file, pointer: p.pointer, message: p.message })))
  const problems: { file: string; pointer: string; message: string }[] = []
  const expr = (pointer: string, source: string | null | undefined): Expr | null => {
    if (source === undefined || source === null) return null
    try {
      return compileExpr(source)
    } catch (err) {
      const e = err as { message?: string; position?: number; code?: string }
      problems.push({
        file,
        pointer,
        message: `JSONata ${e.code ?? 'error'} at ${e.position ?? '?'}: ${e.message ?? String(err)}`
      })
      return null
    }
  }
  let audio: AudioMapping | null = null
  if (raw.audio !== undefined) {
    const a = raw.audio
    const f = a.frames ?? {}
    const frames: FramesSpec = {
      framing: f.framing ?? 'binary',
      encoding: f.encoding ?? 'mulaw',
      sampleRate: f.sampleRate ?? 8000,
      chunkMs: f.chunkMs ?? null
    }
    if (frames.encoding === 'mulaw' && frames.sampleRate !== 8000)
      problems.push({
        file,
        pointer: '/audio/frames/sampleRate',
        message: 'mulaw is sent at 8000 Hz; use pcm16 for 16000'
      })
    if (frames.framing === 'json-base64' && (f.template === undefined || f.template === null))
      problems.push({ file, pointer: '/audio/frames/template', message: 'is required for json-base64 framing' })
    audio = {
      url: expr('/audio/url', a.url),
      headers: expr('/audio/headers', a.headers),
      open: expr('/audio/open', a.open),
      ready:
        a.ready === undefined
          ? null
          : {
              when: expr('/audio/ready/when', a.ready.when),
              refused: expr('/audio/ready/refused', a.ready.refused),
              reason: expr('/audio/ready/reason', a.ready.reason),
              parameters: expr('/audio/ready/parameters', a.ready.parameters)
            },
      frames,
      template: frames.framing === 'json-base64' ? expr('/audio/frames/template', f.template) : null,
      keepalive:
        a.keepalive === undefined
          ? null
          : {
              everyMs: a.keepalive.everySeconds * 1000,
              when: a.keepalive.when ?? 'idle',
              frame: expr('/audio/keepalive/frame', a.keepalive.frame) as Expr
            },
      pause: expr('/audio/pause', a.pause),
      resume: expr('/audio/resume', a.resume),
      closeWhen: expr('/audio/closeWhen', a.closeWhen),
      closeTimeoutMs: (a.closeTimeoutSeconds ?? 5) * 1000,
      rotateAfterMs: a.rotateAfterSeconds === undefined ? null : a.rotateAfterSeconds * 1000,
      results: (a.results ?? []).map((r: { when: string; emit: string }, i: number) => ({
        when: expr(`/audio/results/${i}/when`, r.when) as Expr,
        emit: expr(`/audio/results/${i}/emit`, r.emit) as Expr
      })),
      close: expr('/audio/close', a.close),
      closeCode: a.closeCode ?? 1000
    }
    if (
      audio.ready !== null &&
      audio.ready.when === null &&
      !problems.some(p => p.pointer.startsWith('/audio/ready'))
    ) {
      problems.push({ file, pointer: '/audio/ready/when', message: 'is required when ready is given' })
    }
  }
  const text = raw.text === undefined ? null : compileText(raw.text, expr)
  if (problems.length > 0) throw new ConfigError(problems)
  const mapping: CompiledMapping = {
    file,
    vendor: raw.vendor,
    audio,
    text,
    samples: { audio: raw.samples?.audio ?? [], text: raw.samples?.text ?? [] }
  }
  cache.set(file, mapping)
  return mapping
}
