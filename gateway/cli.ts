import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { validateAll } from './check'
import type { Config, StoreTls } from './config/types'
import { ConfigError } from './errors'
import { packageRoot } from './paths'
import { startServer, type RunningServer } from './server/app'
import type { Revalidate } from './server/reload'
import { installSignals } from './server/signals'
import { createLogger, type Logger } from './telemetry/log'
import { Metrics } from './telemetry/metrics'
import { MemoryStore } from './store/memory'
import type { Store } from './store/port'
import { RedisStore } from './store/redis'
import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import { startVendorEmulator, type VendorEmulator } from './tools/vendor-emulator'
import { cmdSimulate, cmdVendor } from './cli-tools'
import {
  HELP,
  USAGE,
  USAGES,
  UsageError,
  endQuietlyWhenStdoutCloses,
  help,
  parseArgsCommand,
  type Command
} from './cli-usage'

export function version(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version
}

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
export function createStore(config: Config, log: Logger, metrics: Metrics): Store {
  const instanceId = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`
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
  opts: { log?: Logger; revalidate?: Revalidate; nowMs?: () => number } = {}
): Promise<Running> {
  const log = opts.log ?? createLogger({ level: config.log.level, secrets: config.secrets })
  for (const w of config.warnings) log.warn({ event: 'config_warning' }, w)
  const emulators: VendorEmulator[] = []
  for (const e of config.emulators) {
    emulators.push(
      await startVendorEmulator({ kind: e.kind, port: e.port, host: e.host, resultEveryFrames: e.resultEveryFrames })
    )
    log.info({ event: 'emulator_started', kind: e.kind, port: e.port }, `bundled ${e.kind} vendor emulator listening`)
  }
  const metrics = new Metrics()
  const store = createStore(config, log, metrics)
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
      nowMs: opts.nowMs
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

async function cmdServe(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string' }, ...HELP } })
  if (values.help) return help('serve')
  // The same validation as `check`: a config `check` rejects never serves.
  const checked = await validateAll(configPath(values.config), process.env)
  if (!checked.ok) throw new ConfigError(checked.problems)
  const file = configPath(values.config)
  const running = await serve(checked.config, { revalidate: async () => await validateAll(file, process.env) })
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

async function cmdCheck(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string' }, ...HELP } })
  if (values.help) return help('check')
  const file = configPath(values.config)
  const checked = await validateAll(file, process.env)
  for (const w of checked.config?.warnings ?? []) console.log(`warning: ${w}`)
  if (checked.ok) {
    console.log(`ok: ${file} and ${Object.keys(checked.config.routes).length} route mapping(s) are valid`)
    return 0
  }
  for (const p of checked.problems) console.error(`${p.file}: ${p.pointer || '/'}: ${p.message}`)
  return 2
}

export async function main(argv: string[]): Promise<number> {
  endQuietlyWhenStdoutCloses()
  const [command, ...rest] = argv
  try {
    switch (command) {
      case 'serve':
        return await cmdServe(rest)
      case 'check':
        return await cmdCheck(rest)
      case 'simulate':
        return await cmdSimulate(rest)
      case 'vendor':
        return await cmdVendor(rest)
      case '--version':
        console.log(version())
        return 0
      case '-h':
      case '--help':
      case 'help':
        if (rest[0] !== undefined && (rest[0] in USAGES || rest[0] === 'simulate'))
          return help(rest[0] as Command | 'simulate')
        return help(null)
      case undefined:
        throw new UsageError('a command is required')
      default:
        throw new UsageError(`unknown command ${command}`)
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message)
      return 2
    }
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      const cmd = err instanceof UsageError ? err.command : parseArgsCommand(command, rest)
      const usage =
        cmd === null
          ? USAGE
          : cmd === 'simulate'
            ? `${USAGES['simulate audio']}\n${USAGES['simulate text']}`
            : USAGES[cmd]
      console.error(`assist-gateway: ${(err as Error).message}\n${usage}`)
      return 2
    }
    console.error(`assist-gateway: ${(err as Error).message}`)
    return 1
  }
}
