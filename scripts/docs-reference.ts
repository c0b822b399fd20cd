/**
 * The generated reference pages (`npm run docs`): the command line's usages from gateway/cli-usage.ts, the
 * configuration keys from schemas/gateway-config.schema.json, the mapping keys from
 * schemas/mapping.schema.json, the error codes from gateway/errors.ts and the metrics from
 * gateway/telemetry/catalogue.ts, and the alert table from ops/alerts.yml. Each page is hand-written
 * around regions this script owns, between `<!-- generated: NAME (npm run docs) -->` and
 * `<!-- end generated -->`; tests/unit/docs/reference.test.ts fails when a committed page differs from what
 * this script writes. A key without a description (in the schema, or in scripts/docs-notes.ts) stops it.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { USAGE, USAGES } from '../gateway/cli-usage'
import { CODES, type ErrorCode } from '../gateway/errors'
import { CATALOGUE, PREFIX, type MetricName } from '../gateway/telemetry/catalogue'
import { CLOSED_LABELS } from '../gateway/server/metric-labels'
import { PUBLISHED_LABELS } from '../gateway/telemetry/metrics'
import { CONFIG_NOTES, ERROR_WHEN, MAPPING_NOTES, METRIC_NOTES } from './docs-notes'

export const ROOT = join(__dirname, '..')

type Schema = Record<string, any>

/** One row of a key table. */
interface Row {
  key: string
  type: string
  dflt: string
  meaning: string
}

/** Markdown table cell: no pipe or newline breaks the row. */
function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ')
}

function code(v: unknown): string {
  const text = typeof v === 'string' ? v : JSON.stringify(v)
  return text.includes('`') ? `\`\` ${text} \`\`` : `\`${text}\``
}

function range(s: Schema): string {
  const lo = s.minimum ?? (s.exclusiveMinimum !== undefined ? `> ${s.exclusiveMinimum}` : undefined)
  const hi = s.maximum ?? (s.exclusiveMaximum !== undefined ? `< ${s.exclusiveMaximum}` : undefined)
  if (typeof lo === 'number' && typeof hi === 'number') return ` ${lo}–${hi}`
  if (typeof lo === 'number') return ` ≥ ${lo}`
  if (typeof lo === 'string') return ` ${lo}`
  if (typeof hi === 'number') return ` ≤ ${hi}`
  return ''
}

/**
 * Walks one schema into rows. `$ref`s resolve against its definitions; a definition met a second time
 * (the upstreams of a tee, after those of a route) is one row naming where it was written out.
 */
class Walker {
  readonly rows: Row[] = []
  /** Keys with no description: the script stops and names them all. */
  readonly undocumented: string[] = []
  private readonly seen = new Map<string, string>()
  private readonly used = new Set<string>()

  constructor(
    private readonly schema: Schema,
    private readonly notes: Record<string, string>,
    /** Definitions shown as a type name rather than walked into (the mapping's `expression`). */
    private readonly named: Record<string, string> = {}
  ) {}

  private resolve(node: Schema): { node: Schema; ref: string | null } {
    const ref = typeof node.$ref === 'string' ? node.$ref.replace('#/definitions/', '') : null
    if (ref === null) return { node, ref }
    const def = this.schema.definitions[ref]
    if (def === undefined) throw new Error(`unknown $ref ${node.$ref}`)
    const { $ref: _drop, ...own } = node
    return { node: { ...def, ...own }, ref }
  }

  private note(path: string): string | undefined {
    const n = this.notes[path]
    if (n !== undefined) this.used.add(path)
    return n
  }

  /** Stops on keys without a description and on notes that name no key (a renamed or removed one). */
  check(notes: string): void {
    const unused = Object.keys(this.notes).filter(k => !this.used.has(k))
    if (unused.length > 0)
      throw new Error(`${notes} in scripts/docs-notes.ts name no key of the schema: ${unused.join(', ')}`)
    if (this.undocumented.length > 0)
      throw new Error(`keys without a description (schema, or ${notes}): ${this.undocumented.join(', ')}`)
  }

  typeOf(node: Schema): string {
    const { node: s, ref } = this.resolve(node)
    if (ref !== null && this.named[ref] !== undefined) return this.named[ref]
    if (s.const !== undefined) return code(s.const)
    if (Array.isArray(s.enum)) return `one of ${s.enum.map(code).join(', ')}`
    const alternatives = s.oneOf ?? s.anyOf
    if (Array.isArray(alternatives) && alternatives.every((a: Schema) => a.required === undefined || a.type))
      return [...new Set(alternatives.map((a: Schema) => this.typeOf(a)))].join(', or ')
    const types: string[] = Array.isArray(s.type) ? s.type : s.type === undefined ? [] : [s.type]
    const one = (t: string): string => {
      if (t === 'integer' || t === 'number') return `${t}${range(s)}`
      if (t === 'array') {
        const n =
          s.minItems !== undefined && s.minItems === s.maxItems
            ? ` (${s.minItems})`
            : s.minItems !== undefined && s.maxItems !== undefined
              ? ` (${s.minItems}–${s.maxItems})`
              : s.minItems !== undefined
                ? ` (at least ${s.minItems})`
                : s.maxItems !== undefined
                  ? ` (at most ${s.maxItems})`
                  : ''
        const item = s.items === undefined || Object.keys(s.items).length === 0 ? 'values' : this.typeOf(s.items)
        return `list${n} of ${item}`
      }
      if (t === 'object' && s.properties === undefined && typeof s.additionalProperties === 'object')
        return `map of ${this.typeOf(s.additionalProperties)}`
      if (t === 'string' && s.format === 'uri') return 'URL'
      return t
    }
    if (types.length === 0) return 'any JSON value'
    return types.map(one).join(' or ')
  }

  /** Rows for `node` at `path` (its own row when it needs one, then its keys). */
  walk(node: Schema, path: string, required: boolean): void {
    const { node: s, ref } = this.resolve(node)
    // A named type's own text ("A JSONata expression.") says nothing about the key.
    const own = node.description ?? (ref !== null && this.named[ref] !== undefined ? undefined : s.description)
    const described = [own, this.note(path)].filter(Boolean).join(' ')
    const dflt = required ? 'required' : s.default === undefined ? '' : code(s.default)
    if (ref !== null && this.named[ref] === undefined && this.walks(s)) {
      const first = this.seen.get(ref)
      if (first !== undefined) {
        this.rows.push({ key: path, type: this.typeOf(node), dflt, meaning: `As \`${first}\`. ${described}`.trim() })
        return
      }
      this.seen.set(ref, path)
    }
    const properties = this.propertiesOf(s)
    if (properties === null) {
      if (described === '') this.undocumented.push(path)
      this.rows.push({ key: path, type: this.typeOf(node), dflt, meaning: described })
      return
    }
    if (described !== '' || dflt === 'required')
      this.rows.push({ key: path, type: this.typeOf(node), dflt, meaning: described })
    for (const [key, child] of properties.entries) this.walk(child, `${path}${key}`, properties.required.has(key))
  }

  private walks(s: Schema): boolean {
    return this.propertiesOf(s) !== null
  }

  /** The keys under a node: its properties, its alternatives' (tokens.keys[]), its items' or its map's. */
  private propertiesOf(s: Schema): { entries: [string, Schema][]; required: Set<string> } | null {
    const props: [string, Schema][] = []
    const addObject = (o: Schema): void => {
      for (const [k, v] of Object.entries(o.properties ?? {}))
        if (!props.some(([name]) => name === `.${k}`)) props.push([`.${k}`, v as Schema])
    }
    // Required: the node's own, and what every alternative that is an object of its own requires.
    const required = new Set<string>((s.required ?? []).map((r: string) => `.${r}`))
    if (s.properties !== undefined) addObject(s)
    const objects = [...(s.oneOf ?? []), ...(s.anyOf ?? [])]
      .map((alt: Schema) => this.resolve(alt).node)
      .filter((a: Schema) => a.properties !== undefined)
    for (const a of objects) addObject(a)
    if (objects.length > 0)
      for (const r of objects[0].required ?? [])
        if (objects.every((a: Schema) => (a.required ?? []).includes(r))) required.add(`.${r}`)
    if (props.length > 0) return { entries: props, required }
    if (s.items !== undefined && this.propertiesOf(this.resolve(s.items).node) !== null)
      return { entries: [['[]', s.items]], required: new Set() }
    if (typeof s.additionalProperties === 'object' && s.additionalProperties.$ref !== undefined)
      return { entries: [['.<name>', s.additionalProperties]], required: new Set() }
    return null
  }
}

function table(rows: Row[], keyTitle = 'key'): string {
  const lines = [`| ${keyTitle} | type | default | meaning |`, '|---|---|---|---|']
  for (const r of rows) lines.push(`| \`${r.key}\` | ${cell(r.type)} | ${cell(r.dflt)} | ${cell(r.meaning)} |`)
  return lines.join('\n')
}

function schema(name: string): Schema {
  return JSON.parse(readFileSync(join(ROOT, 'schemas', name), 'utf8'))
}

/** The configuration keys, one table per top-level section, in the schema's order. */
export function configReference(): string {
  const s = schema('gateway-config.schema.json')
  const walker = new Walker(s, CONFIG_NOTES)
  const out: string[] = []
  for (const [key, node] of Object.entries(s.properties as Record<string, Schema>)) {
    const start = walker.rows.length
    walker.walk(node, key, (s.required ?? []).includes(key))
    const rows = walker.rows.slice(start)
    out.push(`### \`${key}\``, '', table(rows), '')
  }
  walker.check('CONFIG_NOTES')
  return out.join('\n').trimEnd()
}

/** The mapping keys, one table per top-level section. */
export function mappingReference(): string {
  const s = schema('mapping.schema.json')
  const walker = new Walker(s, MAPPING_NOTES, { expression: 'expression' })
  const out: string[] = []
  for (const [key, node] of Object.entries(s.properties as Record<string, Schema>)) {
    const start = walker.rows.length
    walker.walk(node, key, (s.required ?? []).includes(key))
    out.push(`### \`${key}\``, '', table(walker.rows.slice(start)), '')
  }
  walker.check('MAPPING_NOTES')
  return out.join('\n').trimEnd()
}

/** The failure table: every code of gateway/errors.ts with its status, close code, flag and when it happens. */
export function errorsReference(): string {
  const lines = ['| code | HTTP | WS close | flag | text | when |', '|---|---|---|---|---|---|']
  for (const c of Object.keys(CODES) as ErrorCode[]) {
    const e = CODES[c]
    lines.push(`| \`${c}\` | ${e.status} | ${e.close} | ${e.flag} | ${cell(e.text)} | ${cell(ERROR_WHEN[c])} |`)
  }
  return lines.join('\n')
}

/** The metrics of the catalogue, with their type, labels and help (and notes where the help says less). */
export function metricsReference(): string {
  const lines = ['| metric | type | labels | meaning |', '|---|---|---|---|']
  for (const name of Object.keys(CATALOGUE) as MetricName[]) {
    const m = CATALOGUE[name]
    const meaning = [m.help, METRIC_NOTES[name]].filter(Boolean).join(' ')
    lines.push(`| \`${PREFIX}${name}\` | ${m.type} | ${m.labels.join(', ')} | ${cell(meaning)} |`)
  }
  return lines.join('\n')
}

/** What each counter and histogram shows before its first event (gateway/telemetry/seeds.ts). */
export function seedsReference(): string {
  const closed = { ...CLOSED_LABELS, ...PUBLISHED_LABELS }
  const lowerCodes = Object.keys(CODES).map(c => c.toLowerCase())
  const statuses = [...new Set(Object.values(CODES).map(c => String(c.status)))]
  const values = (list: readonly string[]): string => {
    const has = (all: string[]): boolean => all.every(v => list.includes(v))
    const named = has(lowerCodes) ? ['every error code in lower case'] : []
    const rest = list.filter(v => !(has(lowerCodes) && lowerCodes.includes(v)))
    const shown = has(statuses) && !has(lowerCodes) ? ['200', '202', 'every status of the error catalogue'] : rest
    return [...shown.map(v => (v.startsWith('every') ? v : `\`${v === '' ? '""' : v}\``)), ...named].join(', ')
  }
  const OPEN: Record<string, string> = {
    route: 'each route',
    upstream: 'each replica',
    tee: 'each tee',
    from: 'each pair of replicas of a route',
    worker: 'each worker (main process)',
    tenant: 'each tenant (configured, a route that is its own, and `unknown`)'
  }
  const lines = ['| metric | series at 0 from the start |', '|---|---|']
  for (const name of Object.keys(CATALOGUE) as MetricName[]) {
    const m = CATALOGUE[name]
    if (m.type === 'gauge') continue
    if (name === 'ws_closes_total') {
      lines.push(`| \`${PREFIX}${name}\` | none: the close codes are the peers' |`)
      continue
    }
    const groups = closed[name] ?? [{ values: {} }]
    const parts = groups.map(g => {
      const open = m.labels.filter(l => g.values[l] === undefined && OPEN[l] !== undefined && l !== 'to')
      const where =
        open.includes('upstream') || open.includes('tee') || open.includes('from')
          ? open.filter(l => l !== 'route')
          : open
      const fixed = Object.entries(g.values).map(([l, v]) => `${l} ${values(v)}`)
      const scope = [...where.map(l => (l === 'route' && g.routes === 'join' ? 'each join route' : OPEN[l])), ...fixed]
      return scope.join('; ')
    })
    lines.push(`| \`${PREFIX}${name}\` | ${cell(parts.join(' — and '))} |`)
  }
  return lines.join('\n')
}

/** Every alert of ops/alerts.yml: its severity, what it watches and its runbook. */
export function alertsReference(): string {
  const rules = (
    parse(readFileSync(join(ROOT, 'ops', 'alerts.yml'), 'utf8')) as { groups: { rules: Schema[] }[] }
  ).groups
    .flatMap(g => g.rules)
    .filter(r => typeof r.alert === 'string')
  const lines = ['| alert | severity | summary | error codes it watches |', '|---|---|---|---|']
  for (const severity of ['page', 'ticket'])
    for (const r of rules.filter(r => r.labels?.severity === severity)) {
      const codes = String(r.annotations?.failures ?? '')
        .split(/\s+/)
        .filter(Boolean)
        .map(c => `\`${c}\``)
        .join(' ')
      const summary = cell(String(r.annotations?.summary ?? '')).replace(/\{\{[^}]*\}\}/g, '…')
      lines.push(`| [${r.alert}](../runbooks/${r.alert}.md) | ${severity} | ${summary} | ${codes} |`)
    }
  return lines.join('\n')
}

/** What `--help` prints: the overview, then each command's usage. */
export function cliReference(): string {
  const blocks = [USAGE, ...Object.values(USAGES)]
  return blocks.map(b => `\`\`\`text\n${b}\n\`\`\``).join('\n\n')
}

/** The pages this script writes into, and the regions of each. */
export const PAGES: Record<string, Record<string, () => string>> = {
  'docs/reference/cli.md': { cli: cliReference },
  'docs/how-to/monitor-and-alert.md': { alerts: alertsReference },
  'docs/reference/configuration.md': { config: configReference },
  'docs/reference/mapping.md': { mapping: mappingReference },
  'docs/reference/errors.md': { errors: errorsReference },
  'docs/reference/metrics.md': { metrics: metricsReference, seeds: seedsReference }
}

const BEGIN = /<!-- generated: ([a-z-]+) \(npm run docs\) -->\n[\s\S]*?<!-- end generated -->/g

/** `text` with each generated region filled in again; every region of `regions` must be there once. */
export function fill(file: string, text: string, regions: Record<string, () => string>): string {
  const found = new Set<string>()
  const out = text.replace(BEGIN, (_m, name: string) => {
    const make = regions[name]
    if (make === undefined) throw new Error(`${file}: unknown generated region ${name}`)
    if (found.has(name)) throw new Error(`${file}: region ${name} appears twice`)
    found.add(name)
    return `<!-- generated: ${name} (npm run docs) -->\n${make()}\n<!-- end generated -->`
  })
  for (const name of Object.keys(regions)) if (!found.has(name)) throw new Error(`${file}: no region ${name}`)
  return out
}

/** Every generated page as this script writes it: path → text. */
export function generatedPages(root = ROOT): Map<string, string> {
  const out = new Map<string, string>()
  for (const [file, regions] of Object.entries(PAGES))
    out.set(file, fill(file, readFileSync(join(root, file), 'utf8'), regions))
  return out
}

if (require.main === module) {
  for (const [file, text] of generatedPages()) {
    const path = join(ROOT, file)
    const before = readFileSync(path, 'utf8')
    if (before !== text) writeFileSync(path, text)
    console.log(`${before === text ? 'unchanged' : 'written  '} ${file}`)
  }
}
