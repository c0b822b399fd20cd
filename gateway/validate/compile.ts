import Ajv, { type ErrorObject, type ValidateFunction } from 'ajv'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { packageRoot } from '../paths'

/**
 * The one Ajv of the process. Every file under schemas/ is compiled once, at first use.
 * `useDefaults` fills config defaults from the schema; the interface schemas carry no defaults,
 * so platform messages are never altered by validation.
 */
const ajv = new Ajv({ allErrors: true, useDefaults: true, strict: true, strictRequired: false, allowUnionTypes: true })
const compiled = new Map<string, ValidateFunction>()

function schemaPath(name: string): string {
  return join(packageRoot(), 'schemas', `${name}.schema.json`)
}

export function validator(name: string): ValidateFunction {
  let v = compiled.get(name)
  if (v === undefined) {
    v = ajv.compile(JSON.parse(readFileSync(schemaPath(name), 'utf8')))
    compiled.set(name, v)
  }
  return v
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
      message = 'does not match any allowed form'
    } else if (e.keyword === 'required') {
      message = 'is required'
    } else if (e.keyword === 'additionalProperties') {
      message = 'is not an allowed property'
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
