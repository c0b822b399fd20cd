import { escapePointer, pointerSegments } from '../validate/compile'

// ${VAR} references in a config file (config/load.ts): filled from the environment before validation,
// noting on the way what the loader must refuse or protect (an unset variable, a credential written
// inline, a broken reference) and which values a variable filled (a URL's query key is a secret too).

const REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/** Pointers (as regexes) of values that are credentials: they must come from ${VAR} and are redacted from logs. */
export const SECRET_POINTERS = [
  /^\/routes\/[^/]+\/auth\/(audio|text)\/\d+$/,
  /^\/tenants\/[^/]+\/credentials\/(audio|text)\/\d+$/,
  /^\/routes\/[^/]+\/upstreams\/\d+\/(credential|headers\/.+|signing\/.+)$/,
  /^\/routes\/[^/]+\/tee\/\d+\/upstreams\/\d+\/(credential|headers\/.+|signing\/.+)$/,
  /^\/listen\/tls\/passphrase$/,
  /^\/admin\/token$/,
  /^\/fleet\/secret$/,
  /^\/store\/(password|sentinelPassword)$/,
  /^\/tokens\/(keys|clients)\/\d+\/secret$/,
  /^\/tracing\/headers\/.+$/
]

/** What filling the references noted, beside the filled config. */
interface Interpolation {
  env: NodeJS.ProcessEnv
  /** Pointer → name of each ${VAR} without a default whose variable is unset. */
  unset: Map<string, string>
  /** Credentials written inline instead of as ${VAR}. */
  literalSecrets: string[]
  /** Credentials written as ${VAR:-value}: the value is a secret held in the file all the same. */
  inlineDefaults: string[]
  /** Pointers of values written as exactly one ${VAR} (they may fill a number or a boolean). */
  wholeRefs: Set<string>
  /** What each ${VAR} in an upstream URL became (a key in a query, say): secrets, as a credential is. */
  urlRefs: Map<string, string[]>
  /** Pointers of values with a `${` that starts no complete reference (`${REDIS_URL`, `${1X}`). */
  broken: string[]
}

/** Upstream URLs (a route's and its tees'): a value a ${VAR} fills in is a secret. */
const UPSTREAM_URL = /^\/routes\/[^/]+\/(tee\/\d+\/)?upstreams\/\d+\/(audio|text)$/

const WHOLE_REF = /^\$\{[A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\}$/

function interpolate(node: unknown, it: Interpolation, pointer: string): unknown {
  if (typeof node === 'string') {
    const isSecret = SECRET_POINTERS.some(re => re.test(pointer))
    REF.lastIndex = 0
    if (isSecret && !REF.test(node)) it.literalSecrets.push(pointer)
    REF.lastIndex = 0 // matchAll starts where the last test left REF
    if (isSecret && [...node.matchAll(REF)].some(m => (m[2] ?? '') !== '')) it.inlineDefaults.push(pointer)
    if (WHOLE_REF.test(node)) it.wholeRefs.add(pointer)
    if (node.replace(REF, '').includes('${')) it.broken.push(pointer === '' ? '/' : pointer)
    const inUrl = UPSTREAM_URL.test(pointer)
    return node.replace(REF, (m: string, name: string, fallback: string | undefined, at: number) => {
      const v = it.env[name]
      const value = v !== undefined && v !== '' ? v : fallback
      if (inUrl && value !== undefined && value !== '' && !isPort(node, at, m.length, value))
        it.urlRefs.set(pointer, [...(it.urlRefs.get(pointer) ?? []), value])
      if (v !== undefined && v !== '') return v
      if (fallback !== undefined) return fallback
      it.unset.set(pointer === '' ? '/' : pointer, name)
      return ''
    })
  }
  if (Array.isArray(node)) return node.map((v, i) => interpolate(v, it, `${pointer}/${i}`))
  if (node !== null && typeof node === 'object') {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(node)) out[k] = interpolate(v, it, `${pointer}/${escapePointer(k)}`)
    return out
  }
  return node
}

/**
 * A reference that fills exactly the port of a URL (`ws://host:${PORT}/path`, digits only) is no secret:
 * scrubbing "9101" from every log line and answer would hide ids that happen to contain it.
 */
function isPort(url: string, at: number, length: number, value: string): boolean {
  return /^\d{1,5}$/.test(value) && url[at - 1] === ':' && /^([/?#]|$)/.test(url.slice(at + length, at + length + 1))
}

/**
 * Where the schema wants a number, an integer or a boolean and the value came wholly from one
 * ${VAR}, read it as that type. True when anything changed (the caller validates again).
 */
export function coerceReferences(
  root: Record<string, unknown>,
  errors: readonly { keyword: string; instancePath: string; params: object }[],
  wholeRefs: Set<string>
): boolean {
  let changed = false
  for (const e of errors) {
    if (e.keyword !== 'type' || !wholeRefs.has(e.instancePath)) continue
    const parts = pointerSegments(e.instancePath)
    const key = parts.pop()
    let parent: any = root
    for (const p of parts) parent = parent?.[p]
    if (key === undefined || parent === null || typeof parent !== 'object') continue
    const text = parent[key]
    if (typeof text !== 'string') continue
    const wanted = String((e.params as { type?: unknown }).type)
    let value: number | boolean | null = null
    if ((wanted.includes('number') || wanted.includes('integer')) && /^-?\d+(\.\d+)?$/.test(text.trim()))
      value = Number(text)
    else if (wanted.includes('boolean') && /^(true|false)$/.test(text.trim())) value = text.trim() === 'true'
    if (value === null) continue
    parent[key] = value
    changed = true
  }
  return changed
}

/** The config with every ${VAR} filled, and what the filling noted (see `Interpolation`). */
export function interpolateAll(
  raw: unknown,
  env: NodeJS.ProcessEnv
): Omit<Interpolation, 'env'> & { expanded: Record<string, unknown> } {
  const it: Interpolation = {
    env,
    unset: new Map(),
    literalSecrets: [],
    inlineDefaults: [],
    wholeRefs: new Set(),
    urlRefs: new Map(),
    broken: []
  }
  const expanded = interpolate(raw, it, '') as Record<string, unknown>
  return { expanded, ...it }
}
