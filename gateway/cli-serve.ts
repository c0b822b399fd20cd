// `serve` and `check` (loaded by cli.ts when one of them runs): the only place that wires modules.
import { join } from 'node:path'
import { validateAll } from './check'
import { describeTenants } from './config/tenants'
import type { Config } from './config/types'
import { ConfigError, formatProblem } from './errors'
import { packageRoot, version } from './paths'
import { startServer, type RunningServer } from './server/app'
import type { Revalidate } from './server/reload'
import { installSignals } from './server/signals'
import { createLogger, type Logger } from './telemetry/log'
import { Metrics } from './telemetry/metrics'
import { startTracing } from './telemetry/tracing'
import type { Store } from './store/port'
import { availableParallelism } from 'node:os'
import { startVendorEmulator, type VendorEmulator } from './tools/vendor-emulator'
import { FleetKey } from './auth/fleet-key'
import type { WorkerParts } from './server/app'
import { AdmissionClient } from './workers/admission-client'
import { RelayNonceClient } from './workers/relay-nonces'
import { awaitHello, runAsWorker } from './workers/child'
import { WORKER_ENV, processChannel } from './workers/protocol'
import { startSupervisor } from './workers/supervisor'
import { WorkerStore } from './workers/worker-store'
import { planWorkers } from './workers/capacity'
import { UsageError, integer, parseCommand } from './cli-usage'
import { systemClock } from './clock'
import { createStore, hasRedis, newInstanceId } from './cli-store'
import { type ConfigWatch, configFiles, watchConfig } from './config/watch'

export { createStore, hasRedis } from './cli-store'

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

export async function serve(
  config: Config,
  opts: {
    log?: Logger
    revalidate?: Revalidate
    nowMs?: () => number
    /** A worker of `serve --workers N`: its store, and what its main process handed it (the main process runs the emulators). */
    worker?: { store: (metrics: Metrics) => Store; parts: WorkerParts }
  } = {}
): Promise<Running> {
  const log = opts.log ?? createLogger({ level: config.log.level, secrets: config.secrets })
  for (const w of config.warnings) log.warn({ event: 'config_warning' }, w)
  const emulators = opts.worker === undefined ? await startEmulators(config, log) : []
  const metrics = new Metrics()
  if (opts.worker === undefined) metrics.workers.set(1)
  const store = opts.worker?.store(metrics) ?? createStore(config, log, metrics)
  // Spans name the instance (a worker's is its main process's) and the worker; exported until close.
  const tracing = startTracing(config.tracing, {
    instance: opts.worker?.parts.group ?? store.instanceId,
    worker: opts.worker?.parts.index ?? null,
    version: version()
  })
  if (tracing.enabled) {
    const t = config.tracing
    log.info(
      { event: 'tracing', url: t.url, protocol: t.protocol, sampler: t.sampler, samplerArg: t.samplerArg },
      `exporting spans to ${t.url} (${t.protocol})`
    )
  }
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
      worker: opts.worker?.parts,
      tracing
    })
  } catch (err) {
    await tracing.shutdown()
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
      // The spans of the legs close() just ended, exported before the process goes.
      await tracing.shutdown()
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
  const line = parseCommand('serve', argv, {
    config: { type: 'string' },
    workers: { type: 'string' },
    'watch-config': { type: 'boolean' }
  })
  if (line === null) return 0
  const { values } = line
  // A worker of `serve --workers N` is one process: its main process sized the group.
  const asked = process.env[WORKER_ENV] !== undefined ? { n: 1, source: 'worker' } : workerCount(values.workers)
  // The same validation as `check`: a config `check` rejects never serves.
  const checked = await validateAll(configPath(values.config), process.env)
  if (!checked.ok) throw new ConfigError(checked.problems)
  const workers = process.env[WORKER_ENV] !== undefined ? 1 : asked.n
  const file = configPath(values.config)
  if (process.env[WORKER_ENV] !== undefined && process.send !== undefined)
    return await serveAsWorker(checked.config, file)
  const watch = values['watch-config'] === true
  if (workers > 1) return await serveWorkers(checked.config, file, workers, asked.source, watch)
  const running = await serve(checked.config, { revalidate: async () => await validateAll(file, process.env) })
  running.log.info({ event: 'workers_sized', workers, source: asked.source }, `one process (${asked.source})`)
  const watching = watchFiles(watch, () => running.server.state.config, running.server.reload, running.log)
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
      watching?.close()
      // Drained: the metrics listener stays for one more scrape (shutdown.metricsLingerSeconds), then exit.
      running.server
        .drain(signal)
        .then(async () => await running.server.linger())
        .then(exit, exit)
    },
    stopNow: signal => running.server.stopNow(`second signal (${signal})`)
  })
  return -1
}

/** The main process of `serve --workers N`: forks the workers, serves the metrics and admin listeners, fans signals out. */
async function serveWorkers(
  config: Config,
  file: string,
  workers: number,
  source: string,
  watch: boolean
): Promise<number> {
  const log = createLogger({ level: config.log.level, secrets: config.secrets })
  log.info({ event: 'workers_sized', workers, source }, `${workers} worker processes (${source})`)
  for (const w of config.warnings) log.warn({ event: 'config_warning' }, w)
  const emulators = await startEmulators(config, log)
  const instanceId = newInstanceId()
  // Its own connection to Redis, when the config has one: the fleet-wide failure count of the admission it
  // runs, and /admin/calls. It never takes the prober lease: its workers probe (holding the lease, it would
  // have left the fleet's replicas unprobed).
  const fleetStore = hasRedis(config) ? createStore(config, log, new Metrics(), instanceId, false) : null
  let supervisor: Awaited<ReturnType<typeof startSupervisor>>
  try {
    await fleetStore?.start()
    supervisor = await startSupervisor({
      config,
      workerArgs: [process.argv[1], 'serve', '--config', file],
      workers,
      log,
      instanceId,
      fleetStore,
      revalidate: async () => {
        const r = await validateAll(file, process.env)
        return r.ok ? { ok: true, config: r.config } : { ok: false }
      }
    })
  } catch (err) {
    await fleetStore?.close()
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
  const watching = watchFiles(watch, supervisor.config, supervisor.reload, log)
  installSignals({
    log,
    reload: async trigger => await supervisor.reload(trigger),
    drain: signal => {
      watching?.close()
      supervisor.drain(signal).then(exit, exit)
    },
    stopNow: signal => supervisor.stopNow(`second signal (${signal})`)
  })
  return -1
}

/**
 * `--watch-config` or `reload.watch`: a change of the config's files reloads it (config/watch.ts), in the
 * process that reloads (the one process, or the main process, which reloads every worker); null when
 * neither asks. Reloads are queued by `reload` itself, as SIGHUP's are.
 */
function watchFiles(
  asked: boolean,
  current: () => Config,
  reload: (trigger: string) => Promise<unknown>,
  log: Logger
): ConfigWatch | null {
  const config = current()
  if (!asked && !config.reload.watch) return null
  const seconds = config.reload.watchIntervalSeconds
  const watching = watchConfig({
    files: () => configFiles(current()),
    reload: () => {
      log.info({ event: 'config_changed' }, 'the config files changed: reloading')
      reload('watch').catch(err => log.error({ event: 'config_reload_bug', err }, 'config reload failed'))
    },
    clock: systemClock,
    intervalMs: seconds * 1000,
    onWatchError: (dir, err) =>
      log.warn(
        { event: 'config_watch_failed', dir, error: err.message },
        `cannot watch ${dir} for changes; comparing the files every ${seconds} s instead`
      )
  })
  log.info(
    { event: 'config_watch', files: configFiles(config), intervalSeconds: seconds },
    'watching the config files: a change reloads'
  )
  return watching
}

/**
 * One worker process of `serve --workers N`: the whole gateway on the ports its main process handed it
 * (workers/protocol.ts `Hello`), its admin listener internal (127.0.0.1, an ephemeral port the main
 * process forwards to with a token only it holds), no metrics listener (the main process scrapes it),
 * its store the main process's memory (or Redis, as any instance), its admission the main process's.
 */
async function serveAsWorker(config: Config, file: string): Promise<number> {
  const index = Number(process.env[WORKER_ENV])
  const channel = processChannel()
  const hello = await awaitHello(channel)
  // The config as the file says (a reload compares it, listen.port included); the port it listens on is the main process's.
  const internal = (c: Config): Config => ({ ...c, emulators: [] })
  const log = createLogger({ level: config.log.level, secrets: config.secrets })
  log.setBindings({ worker: index })
  // A restarted worker is a new owner: the sessions of the one it replaces died with it.
  const id = `${hello.group}/w${index}.${process.pid}`
  const admission = new AdmissionClient(m => channel.send(m))
  const nonces = new RelayNonceClient(m => channel.send(m))
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
        parts: {
          group: hello.group,
          index,
          workers: hello.workers,
          fleetKey: FleetKey.fromHex(hello.fleetKey, hello.fleetKeySource),
          admission,
          adminToken: hello.adminToken,
          port: hello.port,
          fleetPort: hello.fleetPort,
          usedNonces: nonces
        },
        store: metrics => {
          if (hasRedis(config)) return createStore(config, log, metrics, id)
          shared = new WorkerStore(id, m => channel.send(m))
          return shared
        }
      }
    })
  } catch (err) {
    channel.send({ t: 'failed', message: (err as Error).message })
    throw err
  }
  runAsWorker(running, { store: shared, admission, nonces, channel })
  return -1
}

export async function cmdCheck(argv: string[]): Promise<number> {
  const line = parseCommand('check', argv, { config: { type: 'string' } })
  if (line === null) return 0
  const { values } = line
  const file = configPath(values.config)
  const checked = await validateAll(file, process.env)
  for (const w of checked.config?.warnings ?? []) console.log(`warning: ${w}`)
  if (checked.ok) {
    console.log(`ok: ${file} and ${Object.keys(checked.config.routes).length} route mapping(s) are valid`)
    const tenants = Object.keys(checked.config.tenants ?? {})
    if (tenants.length > 0)
      for (const route of Object.values(checked.config.routes)) console.log(describeTenants(route, tenants))
    return 0
  }
  for (const p of checked.problems) console.error(formatProblem(p))
  return 2
}
