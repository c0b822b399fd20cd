import { type AdminGate, guarded } from './admin'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type * as uWS from 'uWebSockets.js'
import { redactConfig } from '../config/redact'
import type { Config, RouteConfig } from '../config/types'
import { formatProblem } from '../errors'
import { forgetMappings, loadMapping } from '../mapping/compile'
import type { TokenVerifier } from '../auth/token-verify'
import { buildRoute, routePools, type RouteRuntime } from '../route'
import type { Store } from '../store/port'
import type { Logger } from '../telemetry/log'
import type { LogLimiter } from '../telemetry/log-limit'
import type { Metrics } from '../telemetry/metrics'
import { TextHook } from '../text/utterance'
import { probePlan } from '../mapping/health'
import { Prober } from '../upstream/health'
import type { ProbePlan } from '../upstream/probes'
import type { UpstreamPool } from '../upstream/pool'
import { answerWhenSettled, sendJson } from './http'

/**
 * Everything built from one config snapshot. A reload builds the next one and swaps it in: new legs
 * and requests see the new routes; a live leg keeps the RouteRuntime (mapping, pool, replicas) it
 * started with, so its vendor session is untouched. A route whose config, mapping file and health
 * settings are all unchanged keeps its RouteRuntime (and with it its pool's health and counts).
 */
export interface Generation {
  readonly config: Config
  readonly routes: Map<string, RouteRuntime>
  readonly defaultRoute: RouteRuntime | null
  readonly text: TextHook
  readonly prober: Prober
  /** Per route: digest of its config, mapping file and health settings (what decides reuse). */
  readonly fingerprints: ReadonlyMap<string, string>
  /** Digest of the TLS certificate and key files as they were when this snapshot was built. */
  readonly tlsDigest: string
}

export interface GenerationDeps {
  store: Store
  metrics: Metrics
  log: Logger
  /** Verifies bearer tokens for routes with `auth.tokens` (built once at start: `tokens` needs a restart). */
  verifier?: TokenVerifier
  /** Rate-limits the lines a client can flood (a refused text request's `text_refused`). */
  logLimit?: LogLimiter
}

export interface ReloadReport {
  ok: boolean
  /** Problems of the new files (failure), as `file: pointer: message`. */
  problems: string[]
  added: string[]
  changed: string[]
  removed: string[]
  /** Keys that changed but take effect only after a restart. */
  restartRequired: string[]
}

/** What `check` runs, injected by the CLI (server/ does not wire config, mappings and TLS itself). */
export type Revalidate = () => Promise<
  { ok: true; config: Config } | { ok: false; problems: readonly { file: string; pointer: string; message: string }[] }
>

function digest(...parts: string[]): string {
  const h = createHash('sha256')
  for (const p of parts) h.update(p).update('\0')
  return h.digest('hex')
}

function fileDigest(file: string): string {
  try {
    return digest(readFileSync(file, 'latin1'))
  } catch {
    return 'unreadable'
  }
}

function routeFingerprint(rc: RouteConfig, config: Config): string {
  const tees = (rc.tee ?? []).map(t => fileDigest(t.mapping))
  const tenants = JSON.stringify(config.tenants ?? {})
  return digest(JSON.stringify(rc), fileDigest(rc.mapping), JSON.stringify(config.health), tenants, ...tees)
}

function tlsDigest(config: Config): string {
  const tls = config.listen.tls
  return tls === null ? 'plain' : digest(fileDigest(tls.cert), fileDigest(tls.key))
}

/** Build a snapshot's routes, text hook and prober; reuse the previous snapshot's unchanged routes. */
export function buildGeneration(config: Config, deps: GenerationDeps, previous: Generation | null): Generation {
  const { store, metrics, log } = deps
  const routes = new Map<string, RouteRuntime>()
  const fingerprints = new Map<string, string>()
  let defaultRoute: RouteRuntime | null = null
  for (const rc of Object.values(config.routes)) {
    const fp = routeFingerprint(rc, config)
    const old = previous?.routes.get(rc.name)
    const reuse = old !== undefined && previous?.fingerprints.get(rc.name) === fp
    const r = reuse ? old : buildRoute(rc, loadMapping(rc.mapping), store, config.health, deps.verifier, config.tenants)
    if (!reuse) for (const p of routePools(r)) watchEjections(p, deps)
    routes.set(rc.name, r)
    fingerprints.set(rc.name, fp)
    if (rc.default) defaultRoute = r
  }
  const pools = [...routes.values()].flatMap(routePools)
  // Each route probes as its mapping's `health` section says, unless its config (or health.active.kind) overrides it.
  const plans = new Map<UpstreamPool, ProbePlan>()
  for (const r of routes.values()) plans.set(r.pool, probePlan(r.config, r.mapping, config.health.active))
  for (const r of routes.values())
    for (const t of r.tees ?? [])
      plans.set(t.runtime.pool, probePlan(t.runtime.config, t.runtime.mapping, config.health.active))
  const prober = new Prober(
    pools,
    config.health.active,
    store,
    {
      checked: (r, ok, refused) => {
        const result = ok ? 'ok' : refused ? 'credential_refused' : 'failed'
        metrics.healthChecks.inc({ route: r.route, upstream: r.name, result })
      },
      changed: (r, st, reason) => {
        metrics.recent.add({ kind: st === 'down' ? 'down' : 'up', route: r.route, upstream: r.name, detail: reason })
        log[st === 'down' ? 'error' : 'info'](
          { event: 'upstream_health', route: r.route, upstream: r.name, state: st, reason },
          `replica ${r.name} is ${st}`
        )
      }
    },
    undefined,
    plans
  )
  const text = new TextHook(routes.values(), { settings: config.text, metrics, log, logLimit: deps.logLimit, store })
  return { config, routes, defaultRoute, text, prober, fingerprints, tlsDigest: tlsDigest(config) }
}

function watchEjections(pool: UpstreamPool, { metrics, log }: GenerationDeps): void {
  pool.onDown((r, source, reason) => {
    if (source === 'probe') return // the prober logs its own verdicts (upstream_health)
    metrics.ejections.inc({ route: r.route, upstream: r.name })
    metrics.recent.add({ kind: 'ejected', route: r.route, upstream: r.name, detail: reason })
    log.warn(
      { event: 'upstream_ejected', route: r.route, upstream: r.name, source, reason },
      'replica ejected after gateway-side failures'
    )
  })
}

/**
 * Keys read only when the listeners, the store or the logger are built: a change is logged and takes
 * effect at the next restart. Everything else (routes, mappings, audio, text, health, log.level,
 * shutdown) applies to new legs and requests at once.
 */
const RESTART_KEYS = [
  'listen',
  'metrics',
  'admin',
  'fleet',
  'redis',
  'uws',
  'store',
  'emulators',
  'tokens',
  'tracing',
  'reload'
] as const

export function restartRequired(prev: Generation, next: Generation): string[] {
  const keys: string[] = RESTART_KEYS.filter(k => JSON.stringify(prev.config[k]) !== JSON.stringify(next.config[k]))
  // uWS cannot replace the default TLS context of a listening SSLApp (addServerName only adds SNI names).
  if (!keys.includes('listen') && prev.tlsDigest !== next.tlsDigest) keys.push('listen.tls (certificate or key file)')
  // The flood cap is set when the process starts (telemetry/log-limit.ts).
  if (JSON.stringify(prev.config.log.flood) !== JSON.stringify(next.config.log.flood)) keys.push('log.flood')
  return keys
}

/**
 * `GET /admin/config`: the config in force, every secret redacted (config/redact.ts). A reload applies the
 * file's other keys at once, but the keys read only at start (RESTART_KEYS, `log.flood`) stay as the process
 * started (`started`) until a restart: they are shown so, and `restartRequired` names those the file changed.
 */
export function configView(started: Config, current: Config): { config: unknown; restartRequired: string[] } {
  const inForce: Record<string, unknown> = { ...current, log: { ...current.log, flood: started.log.flood } }
  const restartRequired: string[] = []
  for (const k of RESTART_KEYS) {
    inForce[k] = started[k]
    if (JSON.stringify(started[k]) !== JSON.stringify(current[k])) restartRequired.push(k)
  }
  if (JSON.stringify(started.log.flood) !== JSON.stringify(current.log.flood)) restartRequired.push('log.flood')
  return { config: redactConfig(inForce, [...new Set([...started.secrets, ...current.secrets])]), restartRequired }
}

/** GET /admin/config on an admin listener (behind its gate). */
export function mountConfigView(admin: uWS.TemplatedApp, view: () => unknown, gate: AdminGate): void {
  admin.get(
    '/admin/config',
    guarded(gate, res => sendJson(res, 200, view()))
  )
}

/** Which route names were added, changed (rebuilt) or removed between two snapshots. */
export function routeChanges(prev: Generation, next: Generation): Pick<ReloadReport, 'added' | 'changed' | 'removed'> {
  const added = [...next.routes.keys()].filter(n => !prev.routes.has(n))
  const removed = [...prev.routes.keys()].filter(n => !next.routes.has(n))
  const changed = [...next.routes.keys()].filter(n => prev.routes.has(n) && prev.routes.get(n) !== next.routes.get(n))
  return { added, changed, removed }
}

/**
 * What a reload of the gateway comes to, counted and logged once for it: by the process that reloaded, or
 * with workers by their main process (each worker reloads without a word: a reload is one event for the
 * operator, whatever the worker count). On a refusal one line names the problems.
 */
export function announceReload(
  { log, metrics }: Pick<GenerationDeps, 'log' | 'metrics'>,
  trigger: string,
  report: ReloadReport
): void {
  if (!report.ok) {
    metrics.configReloads.inc({ result: 'failed' })
    log.error(
      { event: 'config_reload_failed', trigger, problems: report.problems },
      `config reload refused, nothing changed: ${report.problems.join('; ')}`
    )
    return
  }
  metrics.configReloads.inc({ result: 'ok' })
  log.info({ event: 'config_reloaded', trigger, ...report }, 'config reloaded: new legs and requests use it')
  if (report.restartRequired.length > 0)
    log.warn(
      { event: 'config_restart_required', keys: report.restartRequired },
      `changed keys take effect only after a restart: ${report.restartRequired.join(', ')}`
    )
}

/**
 * One reload at a time: re-read and validate (as `check` does), then apply. On any problem nothing
 * changes. `announce`: count and log it here (a worker leaves that to its main process).
 */
export function reloader(
  revalidate: Revalidate,
  apply: (config: Config) => Omit<ReloadReport, 'ok' | 'problems'>,
  deps: GenerationDeps,
  announce = true
): (trigger: string) => Promise<ReloadReport> {
  let queue: Promise<unknown> = Promise.resolve()
  const once = async (trigger: string): Promise<ReloadReport> => {
    const told = (report: ReloadReport): ReloadReport => {
      if (announce) announceReload(deps, trigger, report)
      return report
    }
    forgetMappings() // mapping files are read anew, as `check` reads them
    let checked: Awaited<ReturnType<Revalidate>>
    try {
      checked = await revalidate()
    } catch (err) {
      checked = { ok: false, problems: [{ file: '', pointer: '', message: (err as Error).message }] }
    }
    if (!checked.ok) {
      const problems = checked.problems.map(formatProblem)
      return told({ ok: false, problems, added: [], changed: [], removed: [], restartRequired: [] })
    }
    return told({ ok: true, problems: [], ...apply(checked.config) })
  }
  return async trigger => {
    const run = queue.then(async () => await once(trigger))
    queue = run.catch(() => {})
    return await run
  }
}

/** POST /admin/reload on the admin listener: 200 with the report, or 409 with the problems. */
export function mountReload(
  admin: uWS.TemplatedApp,
  reload: (trigger: string) => Promise<ReloadReport>,
  token: AdminGate
): void {
  admin.post(
    '/admin/reload',
    guarded(token, res => {
      answerWhenSettled(
        res,
        reload('admin'),
        report => sendJson(res, report.ok ? 200 : 409, report),
        err => sendJson(res, 500, { ok: false, problems: [(err as Error).message] })
      )
    })
  )
}
