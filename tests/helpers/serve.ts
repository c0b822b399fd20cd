import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { stringify } from 'yaml'
import { processTree } from '../bench/lib'
import { spawnCli } from './cli'

type T = { teardown: (fn: () => unknown) => void }

export const AUDIO_TOKEN = 'audio-token-s3cr3t-value'
export const TEXT_TOKEN = 'text-token-s3cr3t-value'

/**
 * Log lines of a gateway, parsed: pino's JSON lines (the lines that are not JSON, such as a start-up
 * warning on stderr, are in `raw` only). `raw` keeps the exact text written.
 */
export class LogCapture {
  raw = ''
  get lines(): Record<string, unknown>[] {
    return this.raw
      .split('\n')
      .filter(l => l.startsWith('{'))
      .map(l => JSON.parse(l) as Record<string, unknown>)
  }

  readonly stream = new Writable({
    write: (chunk: Buffer, _enc, cb) => {
      this.raw += chunk.toString('utf8')
      cb()
    }
  })
}

/**
 * The URL of an operator's path: `/admin/*` on the admin listener, the rest (/metrics, /livez, /readyz) on
 * the metrics listener. An empty path is the admin base (`upstreams()` appends its own).
 */
export function opsUrl(metricsPort: number, adminPort: number): (path: string) => string {
  return path => `http://127.0.0.1:${path === '' || path.startsWith('/admin') ? adminPort : metricsPort}${path}`
}

export function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}

/** A `serve` process of the built CLI, as an operator runs it. */
export interface GatewayProcess {
  /** The main process (the gateway itself with one worker). */
  pid: number
  /** The config file it was started with (a test may rewrite it, then `reload()` or SIGHUP). */
  file: string
  /** Same as `file`. */
  configFile: string
  /** The ports it listens on, as its `listening` log line says (the config may say 0). */
  port: number
  metricsPort: number
  adminPort: number
  /** The fleet listener's port (0 when it has none). */
  fleetPort: number
  /** Its instance id (as /admin/calls names it), from its `listening` line. */
  instance: string
  /** How many worker processes serve (1: the gateway is one process). */
  workers: number
  url: (path: string) => string
  adminUrl: (path: string) => string
  /** Its log lines, every process's (the workers write to the same stdout). */
  logs: LogCapture
  /** Everything it wrote, stdout and stderr. */
  output: () => string
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<number | string>
  /** POST /admin/reload, as an operator does (`token`: the admin token, when the config sets one): its report. */
  reload: (token?: string) => Promise<Record<string, unknown>>
  /** SIGTERM (a graceful drain), SIGKILL after `graceMs`; resolves when it exited. */
  close: (graceMs?: number) => Promise<number | string>
}

/**
 * Start `serve --config FILE` (the built CLI) with this config, written as YAML to a folder of its own,
 * with the worker count it picks for the machine unless `env` says GATEWAY_WORKERS. Ready once its
 * `listening` line is written and /livez answers; stopped at teardown. Ports the config leaves at 0 are
 * picked by the gateway itself and read from that line, so no port is found free here and lost to another
 * test before the gateway binds it.
 */
export async function spawnServe(
  t: T,
  config: Record<string, unknown>,
  env: Record<string, string> = {},
  /** Files written beside the config (a mapping of the test's own: name it `./<file>` in the config). */
  files: Record<string, string> = {}
): Promise<GatewayProcess> {
  const secure = (config.listen as { tls?: unknown } | undefined)?.tls != null
  // One test may start several, and t.testdir() is one folder per test (made anew on each call).
  const dir = mkdtempSync(join(tmpdir(), 'assist-gateway-test-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, stringify(config))
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
  const child = spawnCli(['serve', '--config', file], {
    env: {
      ...process.env,
      AUDIO_TOKEN,
      TEXT_TOKEN,
      ...env,
      PORT: '',
      ADMIN_PORT: '',
      METRICS_PORT: '',
      REDIS_URL: '',
      GATEWAY_CONFIG: ''
    }
  })
  const logs = new LogCapture()
  let out = ''
  // 'close', not 'exit': everything it wrote has been read by then (its last lines come after its exit).
  const exited = new Promise<number | string>(resolve => {
    child.once('close', (code, signal) => resolve(code ?? signal ?? -1))
  })
  let listening: ((line: Record<string, unknown>) => void) | null = null
  let partial = ''
  child.stdout!.on('data', d => {
    const text = String(d)
    out += text
    logs.raw += text
    if (listening === null) return
    partial += text
    const lines = partial.split('\n')
    partial = lines.pop()!
    for (const l of lines) {
      // The gateway's own line: the main process's, or the one process's (a worker's carries `worker`).
      if (!l.startsWith('{') || !l.includes('"event":"listening"')) continue
      const line = JSON.parse(l) as Record<string, unknown>
      if (line.worker === undefined) listening(line)
    }
  })
  child.stderr!.on('data', d => {
    out += String(d)
  })
  const close = async (graceMs = 3000): Promise<number | string> => {
    if (child.exitCode !== null || child.signalCode !== null) return await exited
    // Its workers too, when the grace runs out: killed alone, the main process would leave them holding
    // its stdout, and its 'close' (what `exited` waits for) would never come.
    const tree = processTree(child.pid!)
    child.kill('SIGTERM')
    const timer = setTimeout(() => {
      for (const pid of new Set([...processTree(child.pid!), ...tree]))
        try {
          process.kill(pid, 'SIGKILL')
        } catch {}
    }, graceMs)
    const how = await exited
    clearTimeout(timer)
    return how
  }
  t.teardown(async () => await close())
  const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
    listening = resolve
    void exited.then(how => reject(new Error(`gateway process exited (${how}) before listening: ${out}`)))
  })
  listening = null
  const port = Number(line.port)
  const metricsPort = Number(line.metricsPort)
  const adminPort = Number(line.adminPort)
  const adminUrl = opsUrl(metricsPort, adminPort)
  // Polled: it returns as soon as /livez answers; the limit only names a start that never comes.
  const deadline = Date.now() + 60_000
  for (;;) {
    try {
      if ((await fetch(adminUrl('/livez'))).status === 200) break
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error(`gateway process did not answer /livez within 60 s: ${out}`)
    await sleep(50)
  }
  return {
    pid: child.pid!,
    file,
    configFile: file,
    port,
    metricsPort,
    adminPort,
    fleetPort: Number(line.fleetPort ?? 0),
    instance: String(line.instance),
    workers: typeof line.workers === 'number' ? line.workers : 1,
    url: path => `${path.startsWith('/audio/') ? 'ws' : 'http'}${secure ? 's' : ''}://127.0.0.1:${port}${path}`,
    adminUrl,
    logs,
    output: () => out,
    exited,
    reload: async token => {
      const r = await fetch(adminUrl('/admin/reload'), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-requested-with': 'assist-gateway',
          ...(token !== undefined ? { authorization: `Bearer ${token}` } : {})
        },
        body: '{}'
      })
      return (await r.json()) as Record<string, unknown>
    },
    close
  }
}

/** A bundled vendor emulator in a process of its own (`assist-gateway vendor`), read over its HTTP side. */
export interface VendorProcess {
  url: string
  httpUrl: string
  /** Its session reports (GET /sessions). */
  sessions: () => Promise<Record<string, unknown>[]>
}

/**
 * `assist-gateway vendor --kind <kind> --port 0 …` as a process of its own: for a test whose own process is
 * busy being the platform (hundreds of legs and requests), so the gateway's health probes of the vendor
 * measure the vendor, not the test's event loop.
 */
export async function spawnVendorProcess(t: T, args: string[]): Promise<VendorProcess> {
  const child = spawnCli(['vendor', ...args, '--port', '0'])
  const exited = new Promise(resolve => child.once('close', resolve))
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
    await exited
  })
  let out = ''
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', d => {
      out += String(d)
      const m = / on (ws:\/\/127\.0\.0\.1:\d+\/stream)/.exec(out)
      if (m !== null) resolve(m[1])
    })
    child.stderr!.on('data', d => {
      out += String(d)
    })
    void exited.then(() => reject(new Error(`vendor emulator exited before listening: ${out}`)))
  })
  const httpUrl = url.replace(/^ws:/, 'http:').replace(/\/stream$/, '')
  return {
    url,
    httpUrl,
    sessions: async () => (await (await fetch(`${httpUrl}/sessions`)).json()) as Record<string, unknown>[]
  }
}
