import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Ajv, { type ValidateFunction } from 'ajv'
import { parse } from 'yaml'

/**
 * Validators for the message schemas vendors publish (AsyncAPI / OpenAPI components), kept under
 * tests/fixtures/vendor-schemas/ (see its README for sources and licences). `schema(name)` validates one
 * payload against `#/components/schemas/<name>`; the errors are ajv's, as text.
 */
export interface VendorSchemas {
  check(name: string, payload: unknown): string[]
}

const DIR = join(__dirname, '..', 'fixtures', 'vendor-schemas')

export function vendorSchemas(file: string): VendorSchemas {
  const text = readFileSync(join(DIR, file), 'utf8')
  const doc = (file.endsWith('.json') ? JSON.parse(text) : parse(text)) as Record<string, unknown>
  // The vendors' files are documentation too: unknown keywords (summary, example, x-…) and formats
  // (float, binary, bytes) are not validation rules.
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false })
  ajv.addSchema({ $id: 'vendor', components: openApiNullable(doc.components) }, 'vendor')
  const cache = new Map<string, ValidateFunction>()
  return {
    check(name, payload) {
      let v = cache.get(name)
      if (v === undefined) {
        v = ajv.compile({ $ref: `vendor#/components/schemas/${name}` })
        cache.set(name, v)
      }
      return v(payload)
        ? []
        : (v.errors ?? []).map(e => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`)
    }
  }
}

/**
 * OpenAPI 3.0's `nullable: true` as JSON Schema says it (`type` also admits null), everywhere in `node`;
 * a `nullable` without a `type` says nothing and is dropped. A copy: the vendor's file is not changed.
 */
function openApiNullable(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(openApiNullable)
  if (node === null || typeof node !== 'object') return node
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(node)) if (k !== 'nullable') out[k] = openApiNullable(v)
  const n = node as { nullable?: unknown; type?: unknown }
  if (n.nullable === true && typeof n.type === 'string') out.type = [n.type, 'null']
  return out
}
