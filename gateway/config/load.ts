import { existsSync, readFileSync } from 'node:fs'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { parseDocument } from 'yaml'
import { ConfigError } from '../errors'
import { packageRoot } from '../paths'
import { problemsOf, validator } from '../validate/compile'
import type { Config } from './types'

type Problem = { file: string; pointer: string; message: string }
const REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/**
 * Load, interpolate, validate and freeze a config file. `serve` and `check` share this one path.
 * Throws ConfigError listing every problem as `file: /pointer: message`.
 */
export function loadConfig(file: string, env: NodeJS.ProcessEnv): Config {
  const path = resolve(file)
  const raw = readStructured(path)
  const unset = new Map<string, string>()
  const literalSecrets: string[] = []
  const expanded = interpolate(raw, env, '', unset, literalSecrets) as Record<string, unknown>
  applyEnvOverrides(expanded, env)
  const validate = validator('gateway-config')
  if (!validate(expanded)) {
    throw new ConfigError(
      problemsOf(validate.errors).map(p => ({
        file: path,
        pointer: p.pointer,
        message: p.message + (unset.has(p.pointer) ? ` (environment variable ${unset.get(p.pointer)} is not set)` : '')
      }))
    )
  }
  const problems: Problem[] = []
  const warnings: string[] = []
  for (const [pointer, name] of unset)
    warnings.push(`${path}: ${pointer}: environment variable ${name} is not set; using an empty value`)
  for (const pointer of literalSecrets)
    problems.push({ file: path, pointer, message: 'secrets must be written as ${VAR} references, not inline' })
  const cfg = expanded as Record<string, any>
  const dir = dirname(path)
  let defaults = 0
  for (const [name, route] of Object.entries(cfg.routes as Record<string, any>)) {
    route.name = name
    if (route.default === true) defaults++
    const mapping = resolveFile(route.mapping, dir)
    if (mapping === null)
      problems.push({
        file: path,
        pointer: `/routes/${name}/mapping`,
        message: `mapping file ${route.mapping} not found (looked beside the config and in the package)`
      })
    else route.mapping = mapping
    const seen = new Set<string>()
    route.upstreams.forEach((u: any, i: number) => {
      if (seen.has(u.name))
        problems.push({
          file: path,
          pointer: `/routes/${name}/upstreams/${i}/name`,
          message: `replica name ${u.name} is used twice in this route`
        })
      seen.add(u.name)
      for (const key of ['audio', 'text']) {
        if (u[key] !== undefined && !isUrl(u[key]))
          problems.push({ file: path, pointer: `/routes/${name}/upstreams/${i}/${key}`, message: 'is not a valid URL' })
      }
    })
  }
  if (defaults > 1)
    problems.push({ file: path, pointer: '/routes', message: 'at most one route may be marked default' })
  if (cfg.listen.tls) {
    for (const key of ['cert', 'key']) {
      const f = resolveFile(cfg.listen.tls[key], dir, false)
      if (f === null)
        problems.push({ file: path, pointer: `/listen/tls/${key}`, message: `file ${cfg.listen.tls[key]} not found` })
      else cfg.listen.tls[key] = f
    }
  } else {
    cfg.listen.tls = null
  }
  if (cfg.redis === '') cfg.redis = null
  if (problems.length > 0) throw new ConfigError(problems)
  cfg.file = path
  cfg.secrets = collectSecrets(cfg)
  cfg.warnings = warnings
  return deepFreeze(cfg) as Config
}

/** Parse a YAML (or JSON) file; syntax errors name the line and column. */
export function readStructured(path: string): unknown {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (err) {
    throw new ConfigError([
      { file: path, pointer: '/', message: `cannot read file (${(err as NodeJS.ErrnoException).code ?? 'error'})` }
    ])
  }
  const doc = parseDocument(text, { prettyErrors: false, uniqueKeys: true })
  if (doc.errors.length > 0) {
    throw new ConfigError(
      doc.errors.map(e => ({
        file: path,
        pointer: '/',
        message: `YAML ${e.code} at line ${e.linePos?.[0].line ?? '?'} column ${e.linePos?.[0].col ?? '?'}: ${e.message.split('\n')[0]}`
      }))
    )
  }
  return doc.toJS({ maxAliasCount: 100 })
}

/** Pointers (as regexes) of values that are credentials: they must come from ${VAR} and are redacted from logs. */
const SECRET_POINTERS = [
  /^\/routes\/[^/]+\/auth\/(audio|text)\/\d+$/,
  /^\/routes\/[^/]+\/upstreams\/\d+\/(credential|headers\/.+)$/,
  /^\/listen\/tls\/passphrase$/
]

function interpolate(
  node: unknown,
  env: NodeJS.ProcessEnv,
  pointer: string,
  unset: Map<string, string>,
  literalSecrets: string[]
): unknown {
  if (typeof node === 'string') {
    const isSecret = SECRET_POINTERS.some(re => re.test(pointer))
    REF.lastIndex = 0
    if (isSecret && !REF.test(node)) literalSecrets.push(pointer)
    return node.replace(REF, (_m, name: string, fallback: string | undefined) => {
      const v = env[name]
      if (v !== undefined && v !== '') return v
      if (fallback !== undefined) return fallback
      unset.set(pointer === '' ? '/' : pointer, name)
      return ''
    })
  }
  if (Array.isArray(node)) return node.map((v, i) => interpolate(v, env, `${pointer}/${i}`, unset, literalSecrets))
  if (node !== null && typeof node === 'object') {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(node))
      out[k] = interpolate(v, env, `${pointer}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, unset, literalSecrets)
    return out
  }
  return node
}

function applyEnvOverrides(cfg: Record<string, any>, env: NodeJS.ProcessEnv): void {
  const port = (v: string | undefined): number | string | undefined =>
    v === undefined || v === '' ? undefined : /^\d+$/.test(v) ? Number(v) : v
  if (cfg === null || typeof cfg !== 'object') return
  const p = port(env.PORT)
  if (p !== undefined) cfg.listen = { ...(cfg.listen ?? {}), port: p }
  const a = port(env.ADMIN_PORT)
  if (a !== undefined) cfg.admin = { ...(cfg.admin ?? {}), port: a }
  if (env.REDIS_URL !== undefined && env.REDIS_URL !== '') cfg.redis = env.REDIS_URL
  if (env.LOG_LEVEL !== undefined && env.LOG_LEVEL !== '') cfg.log = { ...(cfg.log ?? {}), level: env.LOG_LEVEL }
}

/** A relative path is looked up beside the config file, then in the package root. */
export function resolveFile(p: string, dir: string, packageFallback = true): string | null {
  if (isAbsolute(p)) return existsSync(p) ? p : null
  const beside = join(dir, p)
  if (existsSync(beside)) return beside
  if (packageFallback) {
    const inPackage = join(packageRoot(), p)
    if (existsSync(inPackage)) return inPackage
  }
  return null
}

function isUrl(s: string): boolean {
  try {
    return new URL(s).host !== ''
  } catch {
    return false
  }
}

function collectSecrets(cfg: Record<string, any>): string[] {
  const out = new Set<string>()
  for (const route of Object.values(cfg.routes as Record<string, any>)) {
    for (const t of route.auth?.audio ?? []) out.add(t)
    for (const t of route.auth?.text ?? []) out.add(t)
    for (const u of route.upstreams) {
      if (u.credential) out.add(u.credential)
      for (const v of Object.values(u.headers ?? {})) out.add(v as string)
    }
  }
  if (cfg.listen.tls?.passphrase) out.add(cfg.listen.tls.passphrase)
  if (cfg.redis) {
    try {
      const pw = new URL(cfg.redis).password
      if (pw) out.add(decodeURIComponent(pw))
    } catch {
      /* not a URL: ioredis reports it */
    }
  }
  // Very short values would redact ordinary words from log lines; they are still never logged by path.
  return [...out].filter(s => s.length >= 4)
}

export function deepFreeze<T>(o: T): T {
  if (o !== null && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o)
    for (const v of Object.values(o as object)) deepFreeze(v)
  }
  return o
}
