import { existsSync } from 'node:fs'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { checkTokenSettings } from './tokens'
import { ConfigError, type ConfigProblem } from '../errors'
import { packageRoot } from '../paths'
import { escapePointer, problemsOf, validator } from '../validate/compile'
import { coerceReferences, interpolateAll } from './references'
import { collectSecrets, routeSecrets } from './secrets'
import { readSource } from './source'
import type { Config } from './types'
import { resolveTracing } from './tracing'
import { tenantProblems } from './tenants'

type Problem = ConfigProblem

type Interpolated = ReturnType<typeof interpolateAll>
/** A problem the config file's path is added to. */
type Found = { pointer: string; message: string }

/**
 * Load, interpolate, validate and freeze a config file. `serve` and `check` share this one path.
 * Throws ConfigError listing every problem as `file:line:col: /pointer: message`.
 */
export function loadConfig(file: string, env: NodeJS.ProcessEnv): Config {
  const path = resolve(file)
  const { value: raw, where } = readSource(path)
  // Each problem also names where in the file it is (the nearest key or value that exists there).
  const located = (p: Problem): Problem => ({ ...p, ...where(p.pointer) })
  const refs = interpolateAll(raw, env)
  // An unclosed `${REDIS_URL` would be taken as text: a fleet quietly running alone on local state.
  const brokenRefs = refs.broken.map(pointer => ({
    file: path,
    pointer,
    message: 'a `${` that is not a complete reference: write ${NAME} or ${NAME:-default} (NAME: letters, digits, _)'
  }))
  applyEnvOverrides(refs.expanded, env)
  const invalid = schemaProblems(refs, path)
  if (invalid.length > 0) throw new ConfigError([...invalid, ...brokenRefs].map(located))
  const cfg = refs.expanded as Record<string, any>
  const warnings: string[] = []
  const problems: Problem[] = [...brokenRefs, ...referenceProblems(refs, cfg, path, warnings)]
  const dir = dirname(path)
  const ofFile = (found: Found[]): void => {
    problems.push(...found.map(p => ({ file: path, ...p })))
  }
  ofFile(routeProblems(cfg, dir))
  ofFile(tlsFileProblems(cfg, dir))
  if (cfg.redis === '') cfg.redis = null
  ofFile(listenerProblems(cfg, dir))
  warnings.push(...fleetWarnings(cfg, path))
  ofFile(tokenProblems(cfg, dir))
  ofFile(tenantProblems(cfg))
  const tracing = resolveTracing(cfg.tracing, env)
  cfg.tracing = tracing.settings
  ofFile(tracing.problems)
  if (problems.length > 0) throw new ConfigError(problems.map(located))
  cfg.file = path
  attachSecrets(cfg, refs.urlRefs)
  cfg.warnings = warnings
  return deepFreeze(cfg) as Config
}

/**
 * The schema's problems with the interpolated config (none: valid). A value written as one ${VAR} is text
 * until the schema says what it must be: a number or a boolean there is read from the text, then the
 * whole config is validated again.
 */
function schemaProblems(refs: Interpolated, path: string): Problem[] {
  const { expanded, unset, wholeRefs } = refs
  const validate = validator('gateway-config')
  if (!validate(expanded) && coerceReferences(expanded, validate.errors ?? [], wholeRefs)) validate(expanded)
  if (validate.errors === null || validate.errors === undefined || validate.errors.length === 0) return []
  return problemsOf(validate.errors).map(p => ({
    file: path,
    pointer: p.pointer,
    message: p.message + (unset.has(p.pointer) ? ` (environment variable ${unset.get(p.pointer)} is not set)` : '')
  }))
}

/** What the `${VAR}` references say: unset variables (a warning, or a problem for Redis), secrets written inline. */
function referenceProblems(refs: Interpolated, cfg: Record<string, any>, path: string, warnings: string[]): Problem[] {
  const problems: Problem[] = []
  for (const [pointer, name] of refs.unset) {
    if (pointer === '/redis') {
      // An unset REDIS_URL must not quietly turn a fleet into lone instances.
      problems.push({
        file: path,
        pointer,
        message: `environment variable ${name} is not set (write \${${name}:-} to run without Redis when it is unset)`
      })
    } else {
      warnings.push(`${path}: ${pointer}: environment variable ${name} is not set; using an empty value`)
    }
  }
  for (const pointer of refs.literalSecrets)
    problems.push({ file: path, pointer, message: 'secrets must be written as ${VAR} references, not inline' })
  // ${VAR:-value} keeps the value in the file: the secret of anyone who forgets VAR. Only a demo's public values.
  if (cfg.demo !== true)
    for (const pointer of refs.inlineDefaults)
      problems.push({
        file: path,
        pointer,
        message:
          'a secret must not have an inline default (${VAR:-value} keeps it in the file): write ${VAR}, or ${VAR:-}'
      })
  return problems
}

/** Each route named, its mapping file found (resolved in place), its replicas and tees; one default route at most. */
function routeProblems(cfg: Record<string, any>, dir: string): Found[] {
  const out: Found[] = []
  let defaults = 0
  for (const [name, route] of Object.entries(cfg.routes as Record<string, any>)) {
    route.name = name
    if (route.default === true) defaults++
    const mapping = resolveFile(route.mapping, dir)
    if (mapping === null)
      out.push({
        pointer: `/routes/${name}/mapping`,
        message: `mapping file ${route.mapping} not found (looked beside the config and in the package)`
      })
    else route.mapping = mapping
    out.push(...upstreamProblems(route.upstreams, `/routes/${name}`, 'route'))
    out.push(...teeProblems(route, name, dir))
  }
  if (defaults > 1) out.push({ pointer: '/routes', message: 'at most one route may be marked default' })
  return out
}

/** The public listener's certificate and key and the store's CA files, resolved beside the config. */
function tlsFileProblems(cfg: Record<string, any>, dir: string): Found[] {
  const out: Found[] = []
  if (cfg.listen.tls) {
    for (const key of ['cert', 'key']) {
      const f = resolveFile(cfg.listen.tls[key], dir, false)
      if (f === null) out.push({ pointer: `/listen/tls/${key}`, message: `file ${cfg.listen.tls[key]} not found` })
      else cfg.listen.tls[key] = f
    }
  } else {
    cfg.listen.tls = null
  }
  for (const key of ['tls', 'sentinelTls']) {
    const t = cfg.store?.[key]
    if (t === null || typeof t !== 'object' || t.ca === undefined) continue
    const f = resolveFile(t.ca, dir, false)
    if (f === null) out.push({ pointer: `/store/${key}/ca`, message: `file ${t.ca} not found` })
    else t.ca = f
  }
  return out
}

/** A fleet without `fleet.advertiseUrl` splits joined calls; one without `fleet.secret` derives the relay key. */
function fleetWarnings(cfg: Record<string, any>, path: string): string[] {
  const warnings: string[] = []
  const fleet = cfg.redis !== null || cfg.store?.sentinels !== undefined || cfg.store?.clusterNodes !== undefined
  const joined = Object.keys(cfg.routes).filter(name => cfg.routes[name].join !== undefined)
  if (fleet && joined.length > 0 && cfg.fleet.advertiseUrl === undefined)
    warnings.push(
      `${path}: /fleet/advertiseUrl: not set, so a leg of a joined call (route ${joined.join(', ')}) that lands ` +
        'on another instance than its partner cannot be relayed to it: the call is split into two vendor sessions'
    )
  if (fleet && cfg.fleet.advertiseUrl !== undefined && cfg.fleet.secret === undefined)
    warnings.push(
      `${path}: /fleet/secret: not set, so the fleet's relay key is derived from every secret of the config: ` +
        'every instance must run the same config, and anyone who holds all of its secrets can sign relays; set ' +
        'fleet.secret to a ${VAR} of its own'
    )
  return warnings
}

/** Each route's secrets (its URL references, its tenants'), then the config's. */
function attachSecrets(cfg: Record<string, any>, urlRefs: Interpolated['urlRefs']): void {
  for (const [name, route] of Object.entries(cfg.routes as Record<string, any>))
    route.secrets = routeSecrets(
      route,
      [...urlRefs].filter(([p]) => p.startsWith(`/routes/${escapePointer(name)}/`)),
      Object.values(cfg.tenants as Record<string, any>).filter(t => route.tenants?.includes(t.name) ?? true)
    )
  cfg.secrets = collectSecrets(cfg)
}

function applyEnvOverrides(cfg: Record<string, any>, env: NodeJS.ProcessEnv): void {
  const port = (v: string | undefined): number | string | undefined =>
    v === undefined || v === '' ? undefined : /^\d+$/.test(v) ? Number(v) : v
  if (cfg === null || typeof cfg !== 'object') return
  const p = port(env.PORT)
  if (p !== undefined) cfg.listen = { ...(cfg.listen ?? {}), port: p }
  const a = port(env.ADMIN_PORT)
  if (a !== undefined) cfg.admin = { ...(cfg.admin ?? {}), port: a }
  const m = port(env.METRICS_PORT)
  if (m !== undefined) cfg.metrics = { ...(cfg.metrics ?? {}), port: m }
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

/** Replica names unique in their route (or tee), URLs valid. */
function upstreamProblems(upstreams: any[], at: string, what: string): { pointer: string; message: string }[] {
  const out: { pointer: string; message: string }[] = []
  const seen = new Set<string>()
  upstreams.forEach((u: any, i: number) => {
    if (seen.has(u.name))
      out.push({
        pointer: `${at}/upstreams/${i}/name`,
        message: `replica name ${u.name} is used twice in this ${what}`
      })
    seen.add(u.name)
    for (const key of ['audio', 'text']) {
      if (u[key] !== undefined && !isUrl(u[key]))
        out.push({ pointer: `${at}/upstreams/${i}/${key}`, message: 'is not a valid URL' })
    }
  })
  return out
}

/** A route's tees: names unique, mapping files found (resolved in place), replicas as a route's. */
function teeProblems(route: any, name: string, dir: string): { pointer: string; message: string }[] {
  const out: { pointer: string; message: string }[] = []
  const names = new Set<string>()
  ;(route.tee as any[]).forEach((tee: any, i: number) => {
    const at = `/routes/${name}/tee/${i}`
    if (names.has(tee.name))
      out.push({ pointer: `${at}/name`, message: `tee name ${tee.name} is used twice in this route` })
    names.add(tee.name)
    const mapping = resolveFile(tee.mapping, dir)
    if (mapping === null)
      out.push({
        pointer: `${at}/mapping`,
        message: `mapping file ${tee.mapping} not found (looked beside the config and in the package)`
      })
    else tee.mapping = mapping
    out.push(...upstreamProblems(tee.upstreams, at, 'tee'))
  })
  return out
}

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/

/**
 * The listeners' cross-field rules: an admin API off loopback needs a token; the admin and metrics ports
 * differ (an older config's `admin.port: 9464` served /metrics there: it moved to `metrics:`); the fleet
 * listener's files and secret; `listen.advertiseUrl` moved to `fleet.advertiseUrl`.
 */
function listenerProblems(cfg: Record<string, any>, dir: string): { pointer: string; message: string }[] {
  const out: { pointer: string; message: string }[] = []
  if (cfg.listen.advertiseUrl !== undefined)
    out.push({
      pointer: '/listen/advertiseUrl',
      message:
        'moved to fleet.advertiseUrl: relayed legs now arrive on the fleet listener (fleet.port, 9466 by default), ' +
        'not the public one; write fleet: { advertiseUrl: ws://<host>:9466 } (and open that port between instances)'
    })
  if (!LOOPBACK.test(cfg.admin.host) && (cfg.admin.token ?? '') === '')
    out.push({
      pointer: '/admin/token',
      message:
        `admin.host ${cfg.admin.host} is not a loopback address, so the admin API (reload, token revocation) ` +
        'needs a token: set admin.token: ${ADMIN_TOKEN}, or admin.host: 127.0.0.1'
    })
  if (cfg.admin.port !== 0 && cfg.admin.port === cfg.metrics.port)
    out.push({
      pointer: '/admin/port',
      message:
        `admin.port ${cfg.admin.port} is also metrics.port: /metrics, /livez and /readyz moved to the metrics ` +
        'listener (metrics.port, 9464 by default), and the admin API (/admin/*) listens on its own port (9465 by ' +
        'default); set admin.port to another port, or leave it out'
    })
  out.push(...sharedPorts(cfg))
  if (cfg.fleet.secret !== undefined && cfg.fleet.secret.length < 16)
    out.push({ pointer: '/fleet/secret', message: 'must be 16 characters or more' })
  for (const key of ['cert', 'key', 'ca']) {
    const f = cfg.fleet.tls?.[key]
    if (f === undefined) continue
    const found = resolveFile(f, dir, false)
    if (found === null) out.push({ pointer: `/fleet/tls/${key}`, message: `file ${f} not found` })
    else cfg.fleet.tls[key] = found
  }
  return out
}

const WILDCARD = /^(0\.0\.0\.0|::|\[::\])$/

/**
 * Two listeners of this gateway on one port: the second could not bind (each holds its port alone,
 * server/listen.ts), and the start would blame another process. Ports clash when the hosts are the same
 * or either is a wildcard; port 0 (ephemeral) never does. The fleet listener counts when it is opened
 * (`fleet.advertiseUrl`). The admin/metrics pair has its own message above.
 */
function sharedPorts(cfg: Record<string, any>): { pointer: string; message: string }[] {
  const out: { pointer: string; message: string }[] = []
  const listeners = ['listen', 'metrics', 'admin', ...(cfg.fleet.advertiseUrl !== undefined ? ['fleet'] : [])]
  const overlap = (a: string, b: string): boolean => a === b || WILDCARD.test(a) || WILDCARD.test(b)
  listeners.forEach((b, j) => {
    const clash = listeners
      .slice(0, j)
      .find(a => cfg[a].port !== 0 && cfg[a].port === cfg[b].port && overlap(cfg[a].host, cfg[b].host))
    if (clash !== undefined && !(clash === 'metrics' && b === 'admin'))
      out.push({
        pointer: `/${b}/port`,
        message: `${b}.port ${cfg[b].port} is also ${clash}.port: each listener needs a port of its own`
      })
  })
  return out
}

function isUrl(s: string): boolean {
  try {
    return new URL(s).host !== ''
  } catch {
    return false
  }
}

/** The tokens section's cross-field problems (config/tokens.ts) and its key files, resolved beside the config. */
function tokenProblems(cfg: Record<string, any>, dir: string): { pointer: string; message: string }[] {
  const out = checkTokenSettings(cfg.tokens, cfg.routes).map(line => {
    const at = line.indexOf(': ')
    return { pointer: line.slice(0, at), message: line.slice(at + 2) }
  })
  ;(cfg.tokens?.keys ?? []).forEach((k: any, i: number) => {
    if (k.privateKeyFile === undefined) return
    const f = resolveFile(k.privateKeyFile, dir, false)
    if (f === null)
      out.push({ pointer: `/tokens/keys/${i}/privateKeyFile`, message: `file ${k.privateKeyFile} not found` })
    else k.privateKeyFile = f
  })
  return out
}

export function deepFreeze<T>(o: T): T {
  if (o !== null && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o)
    for (const v of Object.values(o as object)) deepFreeze(v)
  }
  return o
}
