import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { loadConfig } from './config/load'
import type { Config, StoreTls } from './config/types'
import { ConfigError } from './errors'
import { loadMapping } from './mapping/compile'
import { dryRunMapping } from './mapping/dry-run'
import { packageRoot } from './paths'
import { startServer, type RunningServer } from './server/app'
import { createLogger, type Logger } from './telemetry/log'
import { Metrics } from './telemetry/metrics'
import { MemoryStore } from './store/memory'
import type { Store } from './store/port'
import { RedisStore } from './store/redis'
import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import { readAudioClip } from './tools/audio-file'
import { simulateAudio, simulateText } from './tools/simulate'
import { REAL_VENDOR_PATHS, startRealVendor, type RealVendorKind } from './tools/real-vendors'
import { startVendorEmulator, type EmulatorKind, type VendorEmulator } from './tools/vendor-emulator'

const USAGE = `usage:
  assist-gateway serve [--config FILE]
  assist-gateway check [--config FILE]
  assist-gateway simulate audio --url URL [--token T] --file CLIP [--perspective TX|RX|MIX] [--legs N]
                                [--seconds S] [--insecure]
  assist-gateway simulate text --url URL [--token T] [--auth-header] [--participant patron|agent|system] --text "…"
                               [--contact-id N] [--bus-no N] [--tenant ID] [--insecure]
  assist-gateway vendor --kind passthrough|json-events|deepgram|assemblyai|twilio-media|audiohook --port N
                        [--host H] [--result-every-frames N] [--api-key KEY]
Environment: GATEWAY_CONFIG, PORT, ADMIN_PORT, REDIS_URL, LOG_LEVEL (and the \${VAR}s the config names).`

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

export async function serve(config: Config, opts: { log?: Logger } = {}): Promise<Running> {
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
    server = await startServer({ config, log, metrics, store, version: version() })
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
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string' } } })
  const config = loadConfig(configPath(values.config), process.env)
  const running = await serve(config)
  const stop = (signal: string): void => {
    running.log.info(
      { event: 'shutdown', signal },
      'shutting down: ending live legs with 1012 so the platform reconnects elsewhere'
    )
    running
      .close()
      .then(
        () => running.log.flush(),
        () => {}
      )
      .finally(() => setTimeout(() => process.exit(0), 100).unref())
  }
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
  return -1
}

async function cmdCheck(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string' } } })
  const file = configPath(values.config)
  const problems: { file: string; pointer: string; message: string }[] = []
  let config: Config | null = null
  try {
    config = loadConfig(file, process.env)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    problems.push(...err.problems)
  }
  if (config !== null) {
    for (const w of config.warnings) console.log(`warning: ${w}`)
    for (const route of Object.values(config.routes)) {
      try {
        const mapping = loadMapping(route.mapping)
        problems.push(...(await dryRunMapping(mapping, route)))
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err
        problems.push(...err.problems)
      }
    }
  }
  for (const p of problems) console.error(`${p.file}: ${p.pointer || '/'}: ${p.message}`)
  if (problems.length === 0)
    console.log(`ok: ${file} and ${Object.keys(config!.routes).length} route mapping(s) are valid`)
  return problems.length === 0 ? 0 : 1
}

async function cmdSimulate(argv: string[]): Promise<number> {
  const [kind, ...rest] = argv
  if (kind === 'text') return await cmdSimulateText(rest)
  if (kind !== 'audio') throw new UsageError(`simulate ${kind ?? ''}: "audio" or "text"`)
  const { values } = parseArgs({
    args: rest,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      file: { type: 'string' },
      perspective: { type: 'string', default: 'TX' },
      legs: { type: 'string', default: '1' },
      seconds: { type: 'string' },
      insecure: { type: 'boolean', default: false }
    }
  })
  if (values.url === undefined) throw new UsageError('--url is required')
  const clipFile = values.file ?? join(packageRoot(), 'examples', 'hello.ulaw')
  const perspective = values.perspective as 'TX' | 'RX' | 'MIX'
  if (!['TX', 'RX', 'MIX'].includes(perspective)) throw new UsageError('--perspective must be TX, RX or MIX')
  const legs = positive(values.legs!, '--legs')
  const seconds = values.seconds === undefined ? undefined : positive(values.seconds, '--seconds')
  const results = await simulateAudio({
    url: values.url,
    token: values.token,
    clip: readAudioClip(clipFile),
    perspective,
    legs,
    seconds,
    insecure: values.insecure,
    print: line => console.log(line)
  })
  const failed = results.filter(
    l => l.error !== undefined || (l.answer as { command?: string } | null)?.command !== 'CONNECTED'
  )
  return failed.length === 0 ? 0 : 1
}

/** simulate text: one utterance; prints the status and the answer; exit 0 on a 2xx. */
async function cmdSimulateText(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      'auth-header': { type: 'boolean', default: false },
      participant: { type: 'string', default: 'patron' },
      text: { type: 'string' },
      'contact-id': { type: 'string' },
      'bus-no': { type: 'string' },
      tenant: { type: 'string' },
      insecure: { type: 'boolean', default: false }
    }
  })
  if (values.url === undefined) throw new UsageError('--url is required')
  if (values.text === undefined) throw new UsageError('--text is required')
  const participant = values.participant as 'patron' | 'agent' | 'system'
  if (!['patron', 'agent', 'system'].includes(participant))
    throw new UsageError('--participant must be patron, agent or system')
  const result = await simulateText({
    url: values.url,
    token: values.token,
    authHeader: values['auth-header'],
    participant,
    text: values.text,
    insecure: values.insecure,
    contactId: values['contact-id'] === undefined ? undefined : positive(values['contact-id'], '--contact-id'),
    busNo: values['bus-no'] === undefined ? undefined : positive(values['bus-no'], '--bus-no'),
    tenantId: values.tenant,
    print: line => console.log(line)
  })
  return result.status >= 200 && result.status < 300 ? 0 : 1
}

const EMULATOR_KINDS: readonly string[] = ['passthrough', 'json-events']
const REAL_VENDOR_KINDS: readonly string[] = Object.keys(REAL_VENDOR_PATHS)

/**
 * A vendor emulator in the foreground: the bundled demo vendors (passthrough, json-events) or a strict
 * emulator of a real streaming API (deepgram, assemblyai, twilio-media, audiohook; `--api-key` makes it
 * check the credential, `--result-every-frames` counts 20 ms frames of audio between results).
 */
async function cmdVendor(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      kind: { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      'result-every-frames': { type: 'string', default: '50' },
      'api-key': { type: 'string' }
    }
  })
  const kind = values.kind ?? ''
  const real = REAL_VENDOR_KINDS.includes(kind)
  if (!real && !EMULATOR_KINDS.includes(kind))
    throw new UsageError(`--kind must be one of ${[...EMULATOR_KINDS, ...REAL_VENDOR_KINDS].join(', ')}`)
  if (values.port === undefined) throw new UsageError('--port is required')
  const apiKey = values['api-key']
  if (!real && apiKey !== undefined) throw new UsageError(`--api-key applies to ${REAL_VENDOR_KINDS.join(', ')}`)
  const log = (line: string): void => console.log(line)
  const emulator: { url: string; httpUrl: string; close: () => Promise<void> } = real
    ? await startRealVendor({
        kind: kind as RealVendorKind,
        port: Number(values.port),
        host: values.host,
        apiKey,
        resultEveryMs: Number(values['result-every-frames']) * 20,
        log
      })
    : await startVendorEmulator({
        kind: kind as EmulatorKind,
        port: Number(values.port),
        host: values.host,
        resultEveryFrames: Number(values['result-every-frames']),
        log
      })
  const credential = apiKey !== undefined ? '; credential required' : ''
  console.log(`${kind} vendor emulator on ${emulator.url} (reports: ${emulator.httpUrl}/sessions)${credential}`)
  const stop = (): void => {
    emulator.close().finally(() => process.exit(0))
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
  return -1
}

class UsageError extends Error {}

function positive(s: string, name: string): number {
  const n = Number(s)
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`${name} must be a positive number`)
  return n
}

export async function main(argv: string[]): Promise<number> {
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
      case undefined:
      case '-h':
      case '--help':
      case 'help':
        console.log(USAGE)
        return command === undefined ? 2 : 0
      default:
        throw new UsageError(`unknown command ${command}`)
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message)
      return 2
    }
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`assist-gateway: ${(err as Error).message}\n${USAGE}`)
      return 2
    }
    console.error(`assist-gateway: ${(err as Error).message}`)
    return 1
  }
}
