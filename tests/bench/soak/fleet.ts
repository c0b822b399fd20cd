/**
 * The soak's processes: its own redis-server (killed and started again empty), gateway instances (the
 * built CLI, `serve` with the worker count it picks, started anew on a second port in a rolling restart), vendor replicas
 * (vendor-replica.ts, SIGKILLed, SIGSTOPped, paused and started again on their port) and the front (nginx
 * from Debian's packages when installed, else balancer.ts). Every child is tracked by lib.ts, so every way
 * out of the bench kills it.
 */
import { type ChildProcess, fork, spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { freeRedisPort, redisCli, redisServerArgs } from '../../helpers/redis-process'
import { mappingFile } from '../audio'
import {
  BENCH_DIST,
  exited,
  httpStatus,
  onExit,
  configSchema,
  PACKAGE_ROOT,
  procCpu,
  processTree,
  rssBytes,
  sleep,
  stopChild,
  Tail,
  track
} from '../lib'
import { findNginx, startNginx } from '../nginx'
import type { VendorSessionRecord } from './account'
import type { SequenceRun } from '../../../gateway/tools/vendors/sequence'

/** Temp folder of the run (configs, Redis dir); its name lets guard.js remove it if the bench dies. */
export const SOAK_DIR = mkdtempSync(join(tmpdir(), 'assist-gateway-bench-soak-'))
onExit(() => rmSync(SOAK_DIR, { recursive: true, force: true }))

async function until(what: string, ms: number, fn: () => Promise<boolean> | boolean): Promise<void> {
  const end = Date.now() + ms
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms / 1000} s`)
    await sleep(50)
  }
}

// ---- Redis ---------------------------------------------------------------------------------------

export class RedisServer {
  private child: ChildProcess | null = null
  private constructor(readonly port: number) {}

  static async start(): Promise<RedisServer> {
    const r = new RedisServer(await freeRedisPort())
    await r.up()
    return r
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  get pid(): number | undefined {
    return this.child?.pid
  }

  /** Start (again) on the same port, persisting nothing: it comes back empty. */
  async up(): Promise<void> {
    const dir = join(SOAK_DIR, 'redis')
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir, { recursive: true })
    const child = track(spawn('redis-server', redisServerArgs(this.port, dir), { stdio: 'ignore', cwd: dir }))
    this.child = child
    await until('redis-server answers PING', 15_000, async () => {
      if (exited(child)) throw new Error(`redis-server on ${this.port} exited at start-up`)
      return (await redisCli(this.port, undefined, ['ping'])) === 'PONG'
    })
  }

  async kill(): Promise<void> {
    if (this.child !== null) await stopChild(this.child, 0)
    this.child = null
  }
}

// ---- gateway instances ---------------------------------------------------------------------------

/** Metric families the soak reads (sums per label set). */
const FAMILIES = [
  'assist_gateway_audio_dropped_frames_total',
  'assist_gateway_audio_bytes_total',
  'assist_gateway_audio_failovers_total',
  'assist_gateway_audio_reattach_total',
  'assist_gateway_audio_sessions_active',
  'assist_gateway_config_reloads_total',
  'assist_gateway_store_up',
  'assist_gateway_ws_closes_total'
]

/** Whether this gateway's config has a `metrics:` listener (else /metrics, /livez, /readyz are on the admin port). */
const HAS_METRICS_LISTENER = 'metrics' in configSchema().properties

/** One scrape: series (`name{labels}`, route label dropped) → value. */
export type Scrape = Map<string, number>

export function parseMetrics(text: string): Scrape {
  const out: Scrape = new Map()
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !FAMILIES.some(f => line.startsWith(f))) continue
    const sp = line.lastIndexOf(' ')
    const key = line
      .slice(0, sp)
      .replace(/route="[^"]*",?/, '')
      .replace(',}', '}')
    out.set(key, (out.get(key) ?? 0) + Number(line.slice(sp + 1)))
  }
  return out
}

export interface RouteSpec {
  upstreams: { name: string; port: number }[]
  extraRoute: boolean
}

export interface GatewaySample {
  at: number
  rss: number
  fds: number
  /** CPU used since the process started (µs). */
  cpu: number
}

/** One gateway process (A, A′, ...): its config, ports, samples and scrapes. */
export class GatewayInstance {
  readonly samples: GatewaySample[] = []
  readonly scrapes: { at: number; values: Scrape }[] = []
  readonly startedAt = Date.now()
  /** When it was sent SIGTERM (its drain began). */
  drainedAt: number | null = null
  exitedAt: number | null = null
  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
    readonly port: number,
    /** /metrics, /livez, /readyz: the `listening` line's metricsPort when it has one, else its adminPort. */
    readonly metricsPort: number,
    readonly adminPort: number,
    readonly file: string,
    readonly tail: Tail
  ) {
    child.once('exit', () => {
      this.exitedAt = Date.now()
    })
  }

  get pid(): number {
    return this.child.pid!
  }

  get alive(): boolean {
    return !exited(this.child)
  }

  static config(port: number, redisUrl: string, prefix: string, spec: RouteSpec): Record<string, unknown> {
    const route = {
      mapping: mappingFile('deepgram'),
      auth: { audio: ['${SOAK_TOKEN}'] },
      upstreams: spec.upstreams.map(u => ({
        name: u.name,
        audio: `ws://127.0.0.1:${u.port}/v1/listen`,
        credential: '${SOAK_VENDOR_KEY}'
      }))
    }
    return {
      listen: { host: '127.0.0.1', port },
      admin: { host: '127.0.0.1', port: 0 },
      // Gateways with a scrape listener of its own (`metrics:`) serve /metrics, /livez and /readyz there.
      ...(HAS_METRICS_LISTENER ? { metrics: { host: '127.0.0.1', port: 0 } } : {}),
      log: { level: 'info' },
      redis: redisUrl,
      store: { keyPrefix: prefix },
      routes: { soak: route, ...(spec.extraRoute ? { 'soak-added': route } : {}) }
    }
  }

  static async start(
    name: string,
    port: number,
    config: Record<string, unknown>,
    env: Record<string, string>
  ): Promise<GatewayInstance> {
    const file = join(SOAK_DIR, `gateway-${name}-${port}.yaml`)
    writeFileSync(file, stringify(config))
    const childEnv: NodeJS.ProcessEnv = {
      ...process.env,
      ...env,
      BENCH_PARENT_PID: String(process.pid),
      BENCH_TMPDIR: SOAK_DIR
    }
    for (const k of [
      'PORT',
      'ADMIN_PORT',
      'METRICS_PORT',
      'LOG_LEVEL',
      'REDIS_URL',
      'GATEWAY_CONFIG',
      'NODE_OPTIONS',
      'GATEWAY_WORKERS'
    ])
      delete childEnv[k]
    const args = ['-r', join(BENCH_DIST, 'guard.js'), join(PACKAGE_ROOT, 'bin', 'assist-gateway.js')]
    // As it ships: the worker count `serve` picks for the machine.
    args.push('serve', '--config', file)
    const tail = new Tail(20_000)
    const child = track(
      spawn(process.execPath, args, { cwd: PACKAGE_ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] })
    )
    let ports: { admin: number; metrics: number } | null = null
    let buffered = ''
    child.stdout!.on('data', (d: Buffer) => {
      tail.add(d)
      if (ports !== null) return
      buffered += d.toString()
      for (const line of buffered.split('\n')) {
        if (!line.includes('"event":"listening"')) continue
        const rec = JSON.parse(line) as { adminPort?: number; metricsPort?: number; worker?: number }
        // The instance's own line (its main process), not a worker's.
        if (rec.worker !== undefined) continue
        ports = { admin: rec.adminPort ?? 0, metrics: rec.metricsPort ?? rec.adminPort ?? 0 }
      }
      buffered = buffered.slice(buffered.lastIndexOf('\n') + 1)
    })
    child.stderr!.on('data', (d: Buffer) => tail.add(d))
    await until(`gateway ${name} logs "listening"`, 300_000, () => {
      if (exited(child)) throw new Error(`gateway ${name} exited at start-up:\n${tail.toString()}`)
      return ports !== null
    })
    const p = ports as unknown as { admin: number; metrics: number }
    const g = new GatewayInstance(name, child, port, p.metrics, p.admin, file, tail)
    await until(
      `gateway ${name} /livez`,
      15_000,
      async () => (await httpStatus(`http://127.0.0.1:${p.metrics}/livez`)) === 200
    )
    return g
  }

  async ready(): Promise<boolean> {
    return (await httpStatus(`http://127.0.0.1:${this.metricsPort}/readyz`)) === 200
  }

  /** Rewrite the config file and send SIGHUP. */
  reload(config: Record<string, unknown>): void {
    writeFileSync(this.file, stringify(config))
    this.child.kill('SIGHUP')
  }

  async scrape(): Promise<void> {
    if (!this.alive) return
    try {
      const res = await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`, { signal: AbortSignal.timeout(2000) })
      this.scrapes.push({ at: Date.now(), values: parseMetrics(await res.text()) })
    } catch {
      /* exiting, or too busy: the next scrape counts */
    }
  }

  sample(): void {
    if (!this.alive) return
    try {
      // The instance: its main process and its workers.
      const pids = processTree(this.pid)
      this.samples.push({
        at: Date.now(),
        rss: pids.reduce((n, p) => n + rssBytes(p), 0),
        fds: pids.reduce((n, p) => n + readdirSync(`/proc/${p}/fd`).length, 0),
        cpu: pids.reduce((n, p) => n + procCpu(p).total, 0)
      })
    } catch {
      /* gone between the check and the read */
    }
  }

  /** The sum of series starting with `prefix` at time `at` (its last scrape at or before; 0 before the first). */
  valueAt(prefix: string, at: number): number {
    let best: Scrape | null = null
    for (const s of this.scrapes) if (s.at <= at) best = s.values
    if (best === null) return 0
    let sum = 0
    for (const [k, v] of best) if (k.startsWith(prefix)) sum += v
    return sum
  }

  /** Labels of a family seen in any scrape. */
  seriesOf(prefix: string): string[] {
    const keys = new Set<string>()
    for (const s of this.scrapes) for (const k of s.values.keys()) if (k.startsWith(prefix)) keys.add(k)
    return [...keys]
  }

  /** SIGTERM (the gateway's drain) and wait for the exit, scraping its counters every 500 ms meanwhile. */
  async drain(limitMs = 60_000): Promise<void> {
    this.drainedAt = Date.now()
    this.child.kill('SIGTERM')
    const end = Date.now() + limitMs
    while (this.alive && Date.now() < end) {
      await this.scrape()
      await sleep(500)
    }
    if (this.alive) await stopChild(this.child, 0)
  }
}

// ---- vendor replicas -----------------------------------------------------------------------------

interface Incarnation {
  child: ChildProcess
  tail: Tail
  /** CPU it had used at its last sample (µs). */
  cpu: number
  /** The last report of every session (kept after the process is gone). */
  sessions: VendorSessionRecord[]
}

/** A vendor replica: one port, one process at a time (restarted on the same port). */
export class VendorReplica {
  readonly incarnations: Incarnation[] = []
  /** Open sessions over time: [ms, count]. */
  readonly open: [number, number][] = []
  private seq = 0
  stopped = false
  /** Its port: chosen by the first process, kept by every restart. */
  port = 0
  private constructor(
    readonly name: string,
    private readonly key: string
  ) {}

  static async start(name: string, key: string): Promise<VendorReplica> {
    const r = new VendorReplica(name, key)
    r.port = await r.spawn(0)
    return r
  }

  private get current(): Incarnation {
    return this.incarnations.at(-1)!
  }

  get pid(): number {
    return this.current.child.pid!
  }

  get alive(): boolean {
    return !exited(this.current.child)
  }

  private async spawn(port: number): Promise<number> {
    const tail = new Tail()
    const child = track(
      fork(join(BENCH_DIST, 'soak', 'vendor-replica.js'), [], {
        env: { ...process.env, SOAK_VENDOR_PORT: String(port), SOAK_VENDOR_KEY: this.key, SOAK_VENDOR_NAME: this.name },
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
        execArgv: []
      })
    )
    child.stdout!.on('data', (d: Buffer) => tail.add(d))
    child.stderr!.on('data', (d: Buffer) => tail.add(d))
    this.incarnations.push({ child, tail, sessions: [], cpu: 0 })
    return await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`vendor ${this.name} did not start:\n${tail.toString()}`)),
        15_000
      )
      child.once('message', (m: { listening?: number; error?: string }) => {
        clearTimeout(timer)
        if (typeof m.listening === 'number') resolve(m.listening)
        else reject(new Error(`vendor ${this.name} failed: ${m.error}\n${tail.toString()}`))
      })
    })
  }

  private ask<T>(cmd: 'pause' | 'resume' | 'open' | 'sessions', ms = 10_000): Promise<T | null> {
    const inc = this.current
    if (exited(inc.child) || this.stopped) return Promise.resolve(null)
    const id = ++this.seq
    return new Promise(resolve => {
      const timer = setTimeout(() => {
        inc.child.off('message', on)
        resolve(null)
      }, ms)
      const on = (m: { id?: number } & T): void => {
        if (m.id !== id) return
        clearTimeout(timer)
        inc.child.off('message', on)
        resolve(m)
      }
      inc.child.on('message', on)
      inc.child.send({ id, cmd })
    })
  }

  async pause(): Promise<void> {
    await this.ask('pause')
  }

  async resume(): Promise<void> {
    await this.ask('resume')
  }

  /** Record the open-session count now (skipped while stopped or down). */
  async sampleOpen(): Promise<void> {
    const r = await this.ask<{ open: number }>('open', 2000)
    if (r !== null) this.open.push([Date.now(), r.open])
    this.sampleCpu()
  }

  private sampleCpu(): void {
    try {
      this.current.cpu = procCpu(this.pid).total
    } catch {
      /* gone */
    }
  }

  /** CPU of every process it has had (µs, each as of its last sample). */
  cpuUs(): number {
    return this.incarnations.reduce((s, i) => s + i.cpu, 0)
  }

  /** Fetch and keep every session's report of the current process. */
  async snapshot(): Promise<void> {
    const inc = this.current
    const r = await this.ask<{ sessions: Record<string, unknown>[] }>('sessions', 30_000)
    if (r === null) return
    inc.sessions = r.sessions.map(s => {
      const seq = s.sequence as { stream: number | null; runs: SequenceRun[] } | undefined
      return { replica: this.name, openedAt: s.openedAt as number, stream: seq?.stream ?? null, runs: seq?.runs ?? [] }
    })
  }

  /** Stop reading, keep the reports, SIGKILL: what was unread dies with it, as in a crash. */
  async kill(): Promise<void> {
    await this.pause()
    await sleep(200)
    await this.snapshot()
    this.sampleCpu()
    this.current.child.kill('SIGKILL')
    await until(`vendor ${this.name} exits`, 5000, () => !this.alive)
  }

  async restart(): Promise<void> {
    await this.spawn(this.port)
  }

  signal(sig: 'SIGSTOP' | 'SIGCONT'): void {
    this.stopped = sig === 'SIGSTOP'
    this.current.child.kill(sig)
  }

  sessions(): VendorSessionRecord[] {
    return this.incarnations.flatMap(i => i.sessions)
  }

  async stop(): Promise<void> {
    for (const i of this.incarnations) await stopChild(i.child, 2000)
  }
}

// ---- the front -------------------------------------------------------------------------------------

export interface Front {
  kind: string
  port: number
  /** CPU its processes have used (µs). */
  cpuUs: () => number
  stop: () => Promise<void>
}

/**
 * nginx when installed (least_conn, WebSocket upgrade, max_fails=0, next upstream on a connect error,
 * hour-long read timeout), else the bench's TCP balancer; `noNginx` forces the balancer.
 */
export async function startFront(backends: number[], noNginx: boolean): Promise<Front> {
  const bin = noNginx ? null : findNginx()
  if (bin !== null) {
    const servers = backends.map(p => `    server 127.0.0.1:${p} max_fails=0;`).join('\n')
    const http = `map $http_upgrade $connection_upgrade { default upgrade; '' close; }
  upstream soak_gateways {
    least_conn;
${servers}
  }`
    const server = (): string => `    location / {
      proxy_pass http://soak_gateways;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
      proxy_set_header Host $host;
      proxy_next_upstream error timeout;
      proxy_next_upstream_tries 0;
      proxy_connect_timeout 2s;
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
      proxy_buffering off;
    }`
    const n = await startNginx(bin, 'soak front', server, http)
    return {
      kind: `nginx (${bin})`,
      port: n.port,
      cpuUs: n.cpuUs,
      stop: n.stop
    }
  }
  const child = track(
    fork(join(BENCH_DIST, 'soak', 'balancer.js'), [], {
      env: { ...process.env, SOAK_LB_PORT: '0', SOAK_LB_BACKENDS: backends.join(',') },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      execArgv: []
    })
  )
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { listening?: number; error?: string }) =>
      typeof m.listening === 'number' ? resolve(m.listening) : reject(new Error(`balancer: ${m.error}`))
    )
  })
  let cpu = 0
  return {
    kind: noNginx
      ? 'the bench TCP balancer (least connections; --no-nginx)'
      : 'the bench TCP balancer (least connections; nginx not installed)',
    port,
    cpuUs: () => {
      if (!exited(child)) cpu = procCpu(child.pid!).total
      return cpu
    },
    stop: () => stopChild(child, 2000)
  }
}
