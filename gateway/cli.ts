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
import { readAudioClip } from './tools/audio-file'
import { simulateAudio, simulateText } from './tools/simulate'
import { REAL_VENDOR_PATHS, startRealVendor, type RealVendorKind } from './tools/real-vendors'
import { startVendorEmulator, type EmulatorKind, type VendorEmulator } from './tools/vendor-emulator'

const ENVIRONMENT =
  'Environment: GATEWAY_CONFIG, PORT, ADMIN_PORT, REDIS_URL, LOG_LEVEL (and the ${VAR}s the config names).'
const EXIT_CODES = 'Exit status: 0 ok, 1 runtime failure, 2 usage or config error.'

/** Each command's usage, printed by `<command> --help` (stdout, exit 0) and after a usage error (stderr, exit 2). */
const USAGES = {
  serve: `usage: assist-gateway serve [--config FILE]
  Run the gateway. The config (default $GATEWAY_CONFIG, else ops/gateway.yaml) is first validated as
  \`check\` does: exit 2 on any problem, 1 when serving fails, 0 after SIGTERM or SIGINT.`,
  check: `usage: assist-gateway check [--config FILE]
  Validate the config, every mapping it names (compiled and dry-run on the interface's example messages)
  and the TLS certificate, key and passphrase; print each problem as file: /pointer: message.
  Exit 0 when clean, 2 on any problem.`,
  'simulate audio': `usage: assist-gateway simulate audio --url URL [--token T] [--file CLIP] [--perspective TX|RX|MIX]
                                [--legs N] [--seconds S] [--insecure]
  Act as the platform: open N audio hooks (ws:// or wss://), stream the clip (mu-law or WAV) at real-time
  pace, print every message that comes back. Exit 1 when a leg was refused, never connected or was cut.`,
  'simulate text': `usage: assist-gateway simulate text --url URL --text "…" [--token T] [--auth-header]
                               [--participant patron|agent|system] [--contact-id N] [--bus-no N] [--tenant ID]
                               [--insecure]
  POST one utterance to the text hook (http:// or https://); print the status and the answer.
  Exit 1 unless the answer is a 2xx.`,
  vendor: `usage: assist-gateway vendor --kind passthrough|json-events|deepgram|assemblyai|twilio-media|audiohook
                        --port N [--host H] [--result-every-frames N] [--api-key KEY]
  Run a bundled vendor emulator in the foreground until SIGTERM or SIGINT (--port 0 picks a free port).`
} as const
type Command = keyof typeof USAGES

const USAGE = `usage: assist-gateway <command> [options]    (assist-gateway <command> --help for its options)
  serve       run the gateway
  check       validate a config, its mappings and its TLS material
  simulate    act as the platform: simulate audio | simulate text
  vendor      run a bundled vendor emulator
  --version   print the version
${EXIT_CODES}
${ENVIRONMENT}`

/** `--help`/`-h`, accepted by every command. */
const HELP = { help: { type: 'boolean', short: 'h', default: false } } as const

function help(command: Command | 'simulate' | null): number {
  if (command === null) console.log(USAGE)
  else if (command === 'simulate') console.log(`${USAGES['simulate audio']}\n${USAGES['simulate text']}`)
  else console.log(`${USAGES[command]}\n${EXIT_CODES}`)
  return 0
}

/** A wrong command line: exit 2 with the message and the command's usage on stderr. */
class UsageError extends Error {
  constructor(
    message: string,
    readonly command: Command | 'simulate' | null = null
  ) {
    super(message)
  }
}

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

export async function serve(config: Config, opts: { log?: Logger; revalidate?: Revalidate } = {}): Promise<Running> {
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
    server = await startServer({ config, log, metrics, store, version: version(), revalidate: opts.revalidate })
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

async function cmdSimulate(argv: string[]): Promise<number> {
  const [kind, ...rest] = argv
  if (kind === 'text') return await cmdSimulateText(rest)
  if (kind === '--help' || kind === '-h') return help('simulate')
  if (kind !== 'audio')
    throw new UsageError(
      kind === undefined ? 'simulate: "audio" or "text"' : `simulate ${kind}: "audio" or "text"`,
      'simulate'
    )
  const { values } = parseArgs({
    args: rest,
    options: {
      url: { type: 'string' },
      token: { type: 'string' },
      file: { type: 'string' },
      perspective: { type: 'string', default: 'TX' },
      legs: { type: 'string', default: '1' },
      seconds: { type: 'string' },
      insecure: { type: 'boolean', default: false },
      ...HELP
    }
  })
  if (values.help) return help('simulate audio')
  const usage = (message: string): UsageError => new UsageError(message, 'simulate audio')
  const url = requireUrl(values.url, ['ws:', 'wss:'], usage)
  const perspective = values.perspective as 'TX' | 'RX' | 'MIX'
  if (!['TX', 'RX', 'MIX'].includes(perspective)) throw usage('--perspective must be TX, RX or MIX')
  const legs = integer(values.legs!, '--legs', 1, usage)
  const seconds = values.seconds === undefined ? undefined : positive(values.seconds, '--seconds', usage)
  const clipFile = values.file ?? join(packageRoot(), 'examples', 'hello.ulaw')
  let clip: Buffer
  try {
    clip = readAudioClip(clipFile)
  } catch (err) {
    throw usage(`--file ${clipFile}: ${(err as Error).message}`)
  }
  const results = await simulateAudio({
    url,
    token: values.token,
    clip,
    perspective,
    legs,
    seconds,
    insecure: values.insecure,
    print: line => console.log(line)
  })
  const failed = results.filter(
    l => l.error !== undefined || (l.answer as { command?: string } | null)?.command !== 'CONNECTED' || l.cut
  )
  if (failed.length === 0) return 0
  const why = failed.map(l => {
    if (l.error !== undefined) return `leg ${l.index}: ${l.error}`
    if ((l.answer as { command?: string } | null)?.command !== 'CONNECTED') return `leg ${l.index}: not connected`
    return `leg ${l.index}: cut (closed ${l.closeCode ?? '?'} after ${l.framesSent} frames)`
  })
  console.error(`assist-gateway: ${failed.length} of ${results.length} leg(s) failed: ${why.join('; ')}`)
  return 1
}

/** simulate text: one utterance; prints the status and the answer; exit 0 on a 2xx, else 1. */
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
      insecure: { type: 'boolean', default: false },
      ...HELP
    }
  })
  if (values.help) return help('simulate text')
  const usage = (message: string): UsageError => new UsageError(message, 'simulate text')
  const url = requireUrl(values.url, ['http:', 'https:'], usage)
  if (values.text === undefined) throw usage('--text is required')
  const participant = values.participant as 'patron' | 'agent' | 'system'
  if (!['patron', 'agent', 'system'].includes(participant)) throw usage('--participant must be patron, agent or system')
  const contactId = values['contact-id']
  const busNo = values['bus-no']
  const result = await simulateText({
    url,
    token: values.token,
    authHeader: values['auth-header'],
    participant,
    text: values.text,
    insecure: values.insecure,
    contactId: contactId === undefined ? undefined : integer(contactId, '--contact-id', 1, usage),
    busNo: busNo === undefined ? undefined : integer(busNo, '--bus-no', 1, usage),
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
      'api-key': { type: 'string' },
      ...HELP
    }
  })
  if (values.help) return help('vendor')
  const usage = (message: string): UsageError => new UsageError(message, 'vendor')
  const kind = values.kind ?? ''
  const real = REAL_VENDOR_KINDS.includes(kind)
  if (!real && !EMULATOR_KINDS.includes(kind))
    throw usage(`--kind must be one of ${[...EMULATOR_KINDS, ...REAL_VENDOR_KINDS].join(', ')}`)
  if (values.port === undefined) throw usage('--port is required')
  const port = integer(values.port, '--port', 0, usage, 65535)
  const everyFrames = integer(values['result-every-frames']!, '--result-every-frames', 1, usage)
  const apiKey = values['api-key']
  if (!real && apiKey !== undefined) throw usage(`--api-key applies to ${REAL_VENDOR_KINDS.join(', ')}`)
  const log = (line: string): void => console.log(line)
  const emulator: { url: string; httpUrl: string; close: () => Promise<void> } = real
    ? await startRealVendor({
        kind: kind as RealVendorKind,
        port,
        host: values.host,
        apiKey,
        resultEveryMs: everyFrames * 20,
        log
      })
    : await startVendorEmulator({
        kind: kind as EmulatorKind,
        port,
        host: values.host,
        resultEveryFrames: everyFrames,
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

/** A whole number of at least `min` (and at most `max`), written as plain digits: "2.5", "1e3" and "abc" are refused. */
function integer(
  s: string,
  name: string,
  min: number,
  usage: (message: string) => UsageError,
  max = Number.MAX_SAFE_INTEGER
): number {
  const n = /^\d+$/.test(s) ? Number(s) : Number.NaN
  if (!(n >= min && n <= max))
    throw usage(
      `${name} must be a whole number ${max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `${min}-${max}`}, not "${s}"`
    )
  return n
}

function positive(s: string, name: string, usage: (message: string) => UsageError): number {
  const n = Number(s)
  if (s.trim() === '' || !Number.isFinite(n) || n <= 0) throw usage(`${name} must be a positive number, not "${s}"`)
  return n
}

function requireUrl(s: string | undefined, protocols: string[], usage: (message: string) => UsageError): string {
  if (s === undefined) throw usage('--url is required')
  let url: URL
  try {
    url = new URL(s)
  } catch {
    throw usage(`--url ${s} is not a URL`)
  }
  if (!protocols.includes(url.protocol)) throw usage(`--url must be ${protocols.map(p => `${p}//`).join(' or ')}`)
  return s
}

let stdoutGuarded = false

/**
 * A reader that goes away (`… | head`) must not crash the CLI with an EPIPE stack trace: the output has
 * nowhere to go, so the process ends at once and quietly, with status 1 (the run did not complete).
 */
function endQuietlyWhenStdoutCloses(): void {
  if (stdoutGuarded) return
  stdoutGuarded = true
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') console.error(`assist-gateway: stdout: ${err.message}`)
    process.exit(1)
  })
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

/** The command whose options parseArgs refused, for the usage shown under the error. */
function parseArgsCommand(command: string | undefined, rest: string[]): Command | 'simulate' | null {
  if (command === 'simulate') return rest[0] === 'audio' || rest[0] === 'text' ? `simulate ${rest[0]}` : 'simulate'
  return command !== undefined && command in USAGES ? (command as Command) : null
}
