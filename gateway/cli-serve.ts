import { readFileSync } from 'node:fs'
// `serve` and `check` (loaded by cli.ts when one of them runs): the only place that wires modules.
import { dirname, join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { validateAll } from './check'
import type { Config, StoreTls } from './config/types'
import { ConfigError, formatProblem } from './errors'
import { packageRoot, version } from './paths'
import { startServer, type RunningServer } from './server/app'
import type { Revalidate } from './server/reload'
import { installSignals } from './server/signals'
import { createLogger, type Logger } from './telemetry/log'
import { Metrics } from './telemetry/metrics'
import { MemoryStore } from './store/memory'
import type { Store } from './store/port'
import { RedisStore } from './store/redis'
import { randomUUID } from 'node:crypto'
import { availableParallelism, hostname } from 'node:os'
import { startVendorEmulator, type VendorEmulator } from './tools/vendor-emulator'
import type { SessionRegistry } from './audio/registry'
import { WorkerStore } from './store/worker-store'
import { runAsWorker } from './workers/child'
import { WORKER_ENV, WORKER_INSTANCE_ENV, WORKER_PORT_ENV, processChannel } from './workers/protocol'
import { WorkerRegistry } from './workers/remote-session'
import { startSupervisor } from './workers/supervisor'
import { planWorkers } from './workers/capacity'
import { HELP, UsageError, help, integer } from './cli-usage'

function configPath(given: string | undefined): string {
  return given ?? process.env.GATEWAY_CONFIG ?? join(packageRoot(), 'ops', 'gateway.yaml')
}

/** A running gateway and the bundled emulators its config asked for. The only place that wires modules. */
export interface Running {
  server: RunningServer
  emulators: VendorEmulator[]
  log: Logger
  metrics: Metrics
  store: Store
  close: () => Promise<void>
}

/** In-memory without `redis`, else the Redis store (URL, Sentinel or Cluster from config). */
function newInstanceId(): string {
  return `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`
}

export function createStore(config: Config, log: Logger, metrics: Metrics, id?: string): Store {
  const instanceId = id ?? newInstanceId()
  const s = config.store
  if (config.redis === null && s.sentinels === undefined && s.clusterNodes === undefined)
    return new MemoryStore(instanceId)
  // TLS settings become node:tls options here; the CA file is read once, relative to the config file.
  const tls = (
    t: StoreTls | undefined,
    key: string
  ): { ca?: Buffer; servername?: string; rejectUnauthorized?: boolean } | undefined => {
    if (t === undefined || t === false) return undefined
    if (t === true) return {}
    let ca: Buffer | undefined
    if (t.ca !== undefined) {
      const file = resolve(dirname(config.file), t.ca)
      try {
        ca = readFileSync(file)
      } catch (err) {
        throw new Error(`store.${key}.ca: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
      }
    }
    return {
      ...(ca !== undefined ? { ca } : {}),
      ...(t.servername !== undefined ? { servername: t.servername } : {}),
      ...(t.rejectUnauthorized !== undefined ? { rejectUnauthorized: t.rejectUnauthorized } : {})
    }
  }
  return new RedisStore(instanceId, {
    url: config.redis,
    keyPrefix: s.keyPrefix,
    syncIntervalMs: s.syncIntervalSeconds * 1000,
    leaseMs: s.leaseSeconds * 1000,
    sentinels: s.sentinels,
    sentinelName: s.sentinelName,
    clusterNodes: s.clusterNodes,
    username: s.username,
    password: s.password,
    tls: tls(s.tls, 'tls'),
    sentinelUsername: s.sentinelUsername,
    sentinelPassword: s.sentinelPassword,
    sentinelTls: tls(s.sentinelTls, 'sentinelTls'),
    log,
    onUp: up => metrics.storeUp.set(up ? 1 : 0),
    onError: op => metrics.storeErrors.inc({ op })
  })
}

export async function serve(
  config: Config,
  opts: {
    log?: Logger
    revalidate?: Revalidate
    nowMs?: () => number
    /** A worker of `serve --workers N`: its store and session registry (the main process runs the emulators). */
    worker?: { store: (metrics: Metrics) => Store; sessions: SessionRegistry; group: string }
  } = {}
): Promise<Running> {
  const log = opts.log ?? createLogger({ level: config.log.level, secrets: config.secrets })
  for (const w of config.warnings) log.warn({ event: 'config_warning' }, w)
  const emulators = opts.worker === undefined ? await startEmulators(config, log) : []
  const metrics = new Metrics()
  if (opts.worker === undefined) metrics.workers.set(1)
  const store = opts.worker?.store(metrics) ?? createStore(config, log, metrics)
  let server: RunningServer
  try {
    await store.start()
    server = await startServer({
      config,
      log,
      metrics,
      store,
      version: version(),
      revalidate: opts.revalidate,
      nowMs: opts.nowMs,
      sessions: opts.worker?.sessions,
      workerOf: opts.worker?.group
    })
  } catch (err) {
    await store.close()
    await Promise.all(emulators.map(async e => await e.close()))
    throw err
  }
  return {
    server,
    emulators,
    log,
    metrics,
    store,
    close: async () => {
      server.close()
      await store.close()
      await Promise.all(emulators.map(async e => await e.close()))
    }
  }
}

async function startEmulators(config: Config, log: Logger): Promise<VendorEmulator[]> {
  const emulators: VendorEmulator[] = []
  for (const e of config.emulators) {
    emulators.push(
      await startVendorEmulator({
        kind: e.kind,
        port: e.port,
        host: e.host,
        resultEveryFrames: e.resultEveryFrames,
        resultsByAudio: true
      })
    )
    log.info({ event: 'emulator_started', kind: e.kind, port: e.port }, `bundled ${e.kind} vendor emulator listening`)
  }
  return emulators
}

/** `--workers N`, else $GATEWAY_WORKERS, else the CPU the container may use; refused past its memory limit. */
function workerCount(given: string | undefined): { n: number; source: string } {
  const usage = (m: string): UsageError => new UsageError(m, 'serve')
  const env = process.env.GATEWAY_WORKERS ?? ''
  const explicit =
    given !== undefined
      ? { workers: integer(given, '--workers', 1, usage, 256), from: '--workers' }
      : env !== ''
        ? { workers: integer(env, 'GATEWAY_WORKERS', 1, usage, 256), from: 'GATEWAY_WORKERS' }
        : undefined
  const plan = planWorkers({ explicit, parallelism: availableParallelism() })
  if (!plan.ok) throw usage(plan.error)
  return { n: plan.value.workers, source: plan.value.source }
}

export async function cmdServe(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { config: { type: 'string' }, workers: { type: 'string' }, ...HELP }
  })
  if (values.help) return help('serve')
  // A worker of `serve --workers N` is one process: its main process sized the group.
  const asked = process.env[WORKER_ENV] !== undefined ? { n: 1, source: 'worker' } : workerCount(values.workers)
  // The same validation as `check`: a config `check` rejects never serves.
  const checked = await validateAll(configPath(values.config), process.env)
  if (!checked.ok) throw new ConfigError(checked.problems)
  const workers = process.env[WORKER_ENV] !== undefined ? 1 : asked.n
  const file = configPath(values.config)
  if (process.env[WORKER_ENV] !== undefined && process.send !== undefined)
    return await serveAsWorker(checked.config, file)
  if (workers > 1) return await serveWorkers(checked.config, file, workers, asked.source)
  const running = await serve(checked.config, { revalidate: async () => await validateAll(file, process.env) })
  running.log.info({ event: 'workers_sized', workers, source: asked.source }, `one process (${asked.source})`)
  // The store, emulators and logger close once the server is done (drained, cut at the deadline, or stopped).
  const exit = (): void => {
    running
      .close()
      .then(
        () => running.log.flush(),
        () => {}
      )
      .finally(() => setTimeout(() => process.exit(0), 100).unref())
  }
  installSignals({
    log: running.log,
    reload: async trigger => await running.server.reload(trigger),
    drain: signal => {
      running.server.drain(signal).then(exit, exit)
    },
    stopNow: signal => running.server.stopNow(`second signal (${signal})`)
  })
  return -1
}

/** The main process of `serve --workers N`: forks the workers, serves the admin listener, fans signals out. */
async function serveWorkers(config: Config, file: string, workers: number, source: string): Promise<number> {
  const log = createLogger({ level: config.log.level, secrets: config.secrets })
  log.info({ event: 'workers_sized', workers, source }, `${workers} worker processes (${source})`)
  for (const w of config.warnings) log.warn({ event: 'config_warning' }, w)
  const emulators = await startEmulators(config, log)
  let supervisor: Awaited<ReturnType<typeof startSupervisor>>
  try {
    supervisor = await startSupervisor({
      config,
      workerArgs: [process.argv[1], 'serve', '--config', file],
      workers,
      log,
      instanceId: newInstanceId()
    })
  } catch (err) {
    await Promise.all(emulators.map(async e => await e.close()))
    throw err
  }
  const exit = (): void => {
    Promise.all(emulators.map(async e => await e.close()))
      .then(
        () => log.flush(),
        () => {}
      )
      .finally(() => setTimeout(() => process.exit(0), 100).unref())
  }
  installSignals({
    log,
    reload: async trigger => await supervisor.reload(trigger),
    drain: signal => {
      supervisor.drain(signal).then(exit, exit)
    },
    stopNow: signal => supervisor.stopNow(`second signal (${signal})`)
  })
  return -1
}

/**
 * One worker process of `serve --workers N`: the whole gateway on the port the main process chose, its
 * admin listener internal (127.0.0.1, an ephemeral port the main process forwards to), its store the
 * main process's memory (or Redis, as any instance), its sessions findable by the other workers.
 */
async function serveAsWorker(config: Config, file: string): Promise<number> {
  const index = Number(process.env[WORKER_ENV])
  const port = Number(process.env[WORKER_PORT_ENV])
  const internal = (c: Config): Config => ({
    ...c,
    listen: { ...c.listen, port },
    admin: { host: '127.0.0.1', port: 0 },
    emulators: []
  })
  const channel = processChannel()
  const log = createLogger({ level: config.log.level, secrets: config.secrets })
  log.setBindings({ worker: index })
  const sessions = new WorkerRegistry(index, channel.send, log)
  const group = process.env[WORKER_INSTANCE_ENV] ?? newInstanceId()
  const id = `${group}/w${index}`
  let shared: WorkerStore | null = null
  let running: Running
  try {
    running = await serve(internal(config), {
      log,
      revalidate: async () => {
        const r = await validateAll(file, process.env)
        return r.ok ? { ok: true, config: internal(r.config) } : r
      },
      worker: {
        sessions,
        group,
        store: metrics => {
          const c = internal(config)
          if (c.redis !== null || c.store.sentinels !== undefined || c.store.clusterNodes !== undefined)
            return createStore(c, log, metrics, id)
          shared = new WorkerStore(id, channel)
          return shared
        }
      }
    })
  } catch (err) {
    channel.send({ t: 'failed', message: (err as Error).message })
    throw err
  }
  const store = shared ?? new WorkerStore(id, { send: () => {} })
  runAsWorker(running, { store, sessions, channel })
  return -1
}

export async function cmdCheck(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string' }, ...HELP } })
  if (values.help) return help('check')
  const file = configPath(values.config)
  const checked = await validateAll(file, process.env)
  for (const w of checked.config?.warnings ?? []) console.log(`warning: ${w}`)
  if (checked.ok) {
    console.log(`ok: ${file} and ${Object.keys(checked.config.routes).length} route mapping(s) are valid`)
    return 0
  }
  for (const p of checked.problems) console.error(formatProblem(p))
  return 2
}
