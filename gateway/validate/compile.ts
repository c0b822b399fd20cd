import type { default as Ajv, ErrorObject, Options, ValidateFunction } from 'ajv'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { packageRoot } from '../paths'

/**
 * The one Ajv of the process. Every file under schemas/ is compiled once, at first use.
 * `useDefaults` fills config defaults from the schema; the interface schemas carry no defaults,
 * so platform messages are never altered by validation.
 */
// `verbose`: errors carry their schema, so a problem can name what was allowed (never the value given).
const OPTIONS: Options = {
  allErrors: true,
  useDefaults: true,
  strict: true,
  strictRequired: false,
  allowUnionTypes: true,
  verbose: true
}
// Ajv itself is loaded only when a schema has to be compiled here (no current precompiled validator).
let ajv: Ajv | null = null
function ajvClass(): typeof Ajv {
  return (require('ajv') as typeof import('ajv')).default
}
const compiled = new Map<string, ValidateFunction>()

function schemaPath(name: string): string {
  return join(packageRoot(), 'schemas', `${name}.schema.json`)
}

/** Where the build leaves each schema's validator as code (`npm run build`: scripts/precompile-schemas.js). */
export function precompiledPath(name: string): string {
  return join(packageRoot(), 'dist', 'gateway', 'validate', 'precompiled', `${name}.js`)
}

/** What a precompiled validator was made from: Ajv's version, its options and the schema's text. */
function fingerprint(schemaText: string): string {
  const version = (require('ajv/package.json') as { version: string }).version
  return createHash('sha256')
    .update(`${version}\n${JSON.stringify(OPTIONS)}\n${schemaText}`)
    .digest('hex')
}

/**
 * A schema's validator. Compiling the config schema costs about 200 ms of CPU in every process, so the
 * build leaves each validator as code; it is used when it was made from this very schema text, Ajv
 * version and options (an edited schema is compiled here instead, never validated by stale code).
 */
export function validator(name: string): ValidateFunction {
  let v = compiled.get(name)
  if (v === undefined) {
    const text = readFileSync(schemaPath(name), 'utf8')
    v = precompiled(name, text) ?? compileHere(text)
    compiled.set(name, v)
  }
  return v
}

function compileHere(schemaText: string): ValidateFunction {
  if (ajv === null) ajv = new (ajvClass())(OPTIONS)
  return ajv.compile(JSON.parse(schemaText))
}

function precompiled(name: string, schemaText: string): ValidateFunction | null {
  let made: { validate?: ValidateFunction; fingerprint?: string }
  try {
    made = require(precompiledPath(name)) as typeof made
  } catch {
    return null
  }
  return made.fingerprint === fingerprint(schemaText) && typeof made.validate === 'function' ? made.validate : null
}

/** A schema's validator as a CommonJS module exporting `validate` and `fingerprint` (for the build). */
export function precompiledSource(name: string): string {
  const text = readFileSync(schemaPath(name), 'utf8')
  const build = new (ajvClass())({ ...OPTIONS, code: { source: true } })
  const standaloneCode = (require('ajv/dist/standalone') as typeof import('ajv/dist/standalone')).default
  const code = standaloneCode(build, build.compile(JSON.parse(text)))
  return `${code}\nmodule.exports.validate = module.exports;\nmodule.exports.fingerprint = ${JSON.stringify(fingerprint(text))};\n`
}

export interface Problem {
  pointer: string
  message: string
}

/**
 * Turn Ajv errors into one problem per JSON pointer, naming the field and never its value.
 * Branch errors under a oneOf/anyOf collapse into that keyword's single problem.
 */
export function problemsOf(errors: readonly ErrorObject[] | null | undefined): Problem[] {
  if (!errors) return []
  const byPointer = new Map<string, Problem>()
  const unions = new Set<string>()
  for (const e of errors) if (e.keyword === 'oneOf' || e.keyword === 'anyOf') unions.add(e.instancePath)
  for (const e of errors) {
    let pointer = e.instancePath
    if (e.keyword === 'required')
      pointer += `/${escapePointer(String((e.params as { missingProperty: string }).missingProperty))}`
    else if (e.keyword === 'additionalProperties')
      pointer += `/${escapePointer(String((e.params as { additionalProperty: string }).additionalProperty))}`
    let message: string
    if (unions.has(e.instancePath) && e.keyword !== 'required' && e.keyword !== 'additionalProperties') {
      if (e.keyword !== 'oneOf' && e.keyword !== 'anyOf') continue
      const forms = describeUnion(e.schema)
      message = forms === null ? 'does not match any allowed form' : `must be ${forms}`
    } else if (e.keyword === 'required') {
      message = 'is required'
    } else if (e.keyword === 'additionalProperties') {
      const key = String((e.params as { additionalProperty: string }).additionalProperty)
      const known = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {})
      const near = nearest(key, known)
      message = near === null ? 'is not an allowed property' : `is not an allowed property; did you mean "${near}"?`
    } else if (e.keyword === 'enum') {
      message =
        'must be one of ' +
        (e.params as { allowedValues: unknown[] }).allowedValues.map(v => JSON.stringify(v)).join(', ')
    } else {
      message = e.message ?? e.keyword
    }
    if (!byPointer.has(pointer)) byPointer.set(pointer, { pointer: pointer === '' ? '/' : pointer, message })
  }
  return [...byPointer.values()]
}

/** What a oneOf/anyOf allows, in words ("0, or an integer from 8 to 960"); null when a branch is not simple. */
function describeUnion(branches: unknown): string | null {
  if (!Array.isArray(branches)) return null
  const words = branches.map(describeBranch)
  if (words.some(w => w === null)) return null
  return words.length <= 2 ? words.join(', or ') : `${words.slice(0, -1).join(', ')}, or ${words.at(-1)}`
}

function describeBranch(branch: unknown): string | null {
  if (branch === null || typeof branch !== 'object') return null
  const b = branch as { const?: unknown; enum?: unknown[]; type?: unknown; minimum?: number; maximum?: number }
  if ('const' in b) return JSON.stringify(b.const)
  if (Array.isArray(b.enum)) return `one of ${b.enum.map(v => JSON.stringify(v)).join(', ')}`
  if (typeof b.type !== 'string') return null
  const kind = b.type === 'integer' ? 'an integer' : b.type === 'number' ? 'a number' : `a ${b.type}`
  if (b.minimum !== undefined && b.maximum !== undefined) return `${kind} from ${b.minimum} to ${b.maximum}`
  if (b.minimum !== undefined) return `${kind} of at least ${b.minimum}`
  if (b.maximum !== undefined) return `${kind} of at most ${b.maximum}`
  return kind
}

/** The known key closest to a mistyped one (edit distance at most 2, and under half its length), or null. */
export function nearest(key: string, known: readonly string[]): string | null {
  let best: string | null = null
  let bestDistance = Math.min(2, Math.floor(key.length / 2))
  for (const k of known) {
    const d = editDistance(key.toLowerCase(), k.toLowerCase())
    if (d <= bestDistance && (best === null || d < editDistance(key.toLowerCase(), best.toLowerCase()))) {
      best = k
      bestDistance = d
    }
  }
  return best
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    prev = row
  }
  return prev[b.length]
}

/** One key as a JSON pointer segment (RFC 6901: `~` → `~0`, `/` → `~1`); the gateway's one escaper. */
export function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1')
}

/** The segments of a JSON pointer, unescaped. */
export function pointerSegments(pointer: string): string[] {
  return pointer
    .split('/')
    .slice(1)
    .map(p => p.replace(/~1/g, '/').replace(/~0/g, '~'))
}
