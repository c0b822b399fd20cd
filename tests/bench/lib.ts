/**
 * Shared helpers of the benchmark (`npm run bench`): child-process bookkeeping, /proc readings,
 * free ports, the latency histogram, the sink's IPC client and report formatting.
 * Nothing here is part of the gateway; it only drives and observes it.
 */
import { execSync, fork, spawn, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { request } from 'node:http'
import os, { cpus } from 'node:os'
import { join } from 'node:path'
import { claimPort } from '../../gateway/server/listen'

// ---- frame layout (load generator → sink) -----------------------------------------------------

/** 20 ms of 8 kHz mu-law. */
export const FRAME_BYTES = 160
export const FRAME_MS = 20
/** Bytes 0-7: float64 LE send time (performance.timeOrigin + performance.now(), ms). */
export const STAMP_OFFSET = 0
/** Bytes 8-11: uint32 LE per-leg sequence number (0, 1, 2, ...). */
export const SEQ_OFFSET = 8
/** Bytes 12-15: uint32 LE leg index, for mappings that forward no init message (deepgram). */
export const LEG_OFFSET = 12
/** contactId of leg i is CONTACT_BASE + i; the sink learns the leg's index from the forwarded init message. */
/** Sink: a replacement's first frames within this window of its first are its backlog (bench failover). */
export const BACKLOG_WINDOW_MS = 250
export const CONTACT_BASE = 1_000_000

/** Wall-clock milliseconds with sub-µs resolution; comparable across processes on one machine. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now()
}

/** Write the layout above into a frame about to be sent: the time now, the leg's sequence number, its index. */
export function stampFrame(frame: Buffer, seq: number, leg: number): void {
  frame.writeDoubleLE(nowMs(), STAMP_OFFSET)
  frame.writeUInt32LE(seq, SEQ_OFFSET)
  frame.writeUInt32LE(leg, LEG_OFFSET)
}

// ---- latency histogram ---------------------------------------------------------------------------

/** Fixed histogram: 0.01 ms buckets up to 1 s (plus one overflow bucket), preallocated. */
export const HIST_BUCKET_MS = 0.01
export const HIST_BUCKETS = 100_000

export interface LatencySummary {
  count: number
  p50: number
  p90: number
  p99: number
  p999: number
  max: number
  mean: number
  /** Samples at or above 1 s (counted in the overflow bucket; max is still exact). */
  overflow: number
  /** Samples whose stamp was later than the sink's clock (clamped to 0). */
  negative: number
}

export class Histogram {
  readonly buckets = new Uint32Array(HIST_BUCKETS + 1)
  count = 0
  sum = 0
  max = 0
  negative = 0

  record(ms: number): void {
    if (ms < 0) {
      this.negative++
      ms = 0
    }
    let b = (ms / HIST_BUCKET_MS) | 0
    if (b > HIST_BUCKETS) b = HIST_BUCKETS
    this.buckets[b]++
    this.count++
    this.sum += ms
    if (ms > this.max) this.max = ms
  }

  reset(): void {
    this.buckets.fill(0)
    this.count = 0
    this.sum = 0
    this.max = 0
    this.negative = 0
  }

  /** Upper edge of the bucket holding the q-quantile (ms). */
  quantile(q: number): number {
    if (this.count === 0) return NaN
    const rank = Math.max(1, Math.ceil(q * this.count))
    let seen = 0
    for (let b = 0; b <= HIST_BUCKETS; b++) {
      seen += this.buckets[b]
      if (seen >= rank) return b === HIST_BUCKETS ? this.max : Math.min((b + 1) * HIST_BUCKET_MS, this.max)
    }
    return this.max
  }

  summary(): LatencySummary {
    return {
      count: this.count,
      p50: this.quantile(0.5),
      p90: this.quantile(0.9),
      p99: this.quantile(0.99),
      p999: this.quantile(0.999),
      max: this.count === 0 ? NaN : this.max,
      mean: this.count === 0 ? NaN : this.sum / this.count,
      overflow: this.buckets[HIST_BUCKETS],
      negative: this.negative
    }
  }
}

// ---- command-line flags ------------------------------------------------------------------------

export class UsageError extends Error {}

/** `--name value` / `--name=value` / `--flag` parsing against a list of known names. */
export function parseFlags(argv: string[], valued: string[], booleans: string[] = []): Map<string, string> {
  const out = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (!a.startsWith('--')) throw new UsageError(`unexpected argument ${a}`)
    const eq = a.indexOf('=')
    const name = a.slice(2, eq === -1 ? undefined : eq)
    if (booleans.includes(name)) {
      if (eq !== -1) throw new UsageError(`--${name} takes no value`)
      out.set(name, 'true')
    } else if (valued.includes(name)) {
      const v = eq !== -1 ? a.slice(eq + 1) : argv[++i]
      if (v === undefined) throw new UsageError(`--${name} needs a value`)
      out.set(name, v)
    } else {
      throw new UsageError(`unknown flag --${name}`)
    }
  }
  return out
}

export function numberFlag(
  flags: Map<string, string>,
  name: string,
  dflt: number,
  opts: { integer?: boolean; min?: number; max?: number } = {}
): number {
  const raw = flags.get(name)
  if (raw === undefined) return dflt
  const n = Number(raw)
  const min = opts.min ?? 0
  if (
    !Number.isFinite(n) ||
    n < min ||
    (opts.max !== undefined && n > opts.max) ||
    (opts.integer === true && !Number.isInteger(n))
  ) {
    throw new UsageError(
      `--${name} must be ${opts.integer === true ? 'an integer' : 'a number'} >= ${min}${opts.max !== undefined ? ` and <= ${opts.max}` : ''} (got ${raw})`
    )
  }
  return n
}

// ---- processes -----------------------------------------------------------------------------------

/** Folder of the package (holds package.json, bin/, mappings/, dist/). dist/tests/bench → ../../.. */
export const PACKAGE_ROOT = join(__dirname, '..', '..', '..')
export const BENCH_DIST = __dirname

/** The gateway's config schema (schemas/gateway-config.schema.json) as far as benches read it: its top-level keys. */
export function configSchema(): {
  properties: Record<string, { properties?: Record<string, { default?: unknown }> }>
} {
  return JSON.parse(readFileSync(join(PACKAGE_ROOT, 'schemas', 'gateway-config.schema.json'), 'utf8'))
}

const children = new Set<ChildProcess>()
const exitHooks: (() => void)[] = []

/** Remember a child so that every exit path of the bench (normal, error, SIGINT) kills it. */
export function track(child: ChildProcess): ChildProcess {
  children.add(child)
  child.once('exit', () => children.delete(child))
  return child
}

/** Synchronous last-resort cleanup (also runs from process 'exit'). */
export function killAllChildren(): void {
  for (const hook of exitHooks.splice(0)) {
    try {
      hook()
    } catch {
      /* cleanup must not throw */
    }
  }
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null && c.pid !== undefined) {
      try {
        c.kill('SIGKILL')
      } catch {
        /* already gone */
      }
    }
  }
  children.clear()
}

/** Also run at exit (e.g. remove a temp folder). */
export function onExit(fn: () => void): void {
  exitHooks.push(fn)
}

let handlersInstalled = false
export function installExitHandlers(): void {
  if (handlersInstalled) return
  handlersInstalled = true
  process.on('exit', killAllChildren)
  for (const [sig, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    ['SIGHUP', 129]
  ] as const) {
    process.on(sig, () => {
      process.stderr.write(`\nbench: ${sig}: stopping child processes\n`)
      killAllChildren()
      process.exit(code)
    })
  }
}

export function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the child is gone. */
export async function stopChild(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (exited(child)) return
  await new Promise<void>(resolve => {
    const timer = setTimeout(() => {
      if (!exited(child)) child.kill('SIGKILL')
    }, graceMs)
    child.once('exit', () => {
      clearTimeout(timer)
      resolve()
    })
    child.kill('SIGTERM')
  })
}

/** Keeps the last `max` characters a child wrote (shown when it fails). */
export class Tail {
  private text = ''
  constructor(private readonly max = 8000) {}
  add(chunk: Buffer | string): void {
    this.text += chunk.toString()
    if (this.text.length > this.max * 2) this.text = this.text.slice(-this.max)
  }

  toString(): string {
    return this.text.slice(-this.max)
  }
}

/** A bench server started as a child (`node <script> <port> ...args`, printing `listening`): its pid, port, CPU, RSS. */
export interface ListeningChild {
  pid: number
  port: number
  cpuUs: () => number
  rss: () => number
  alive: () => boolean
  stop: () => Promise<void>
}

/** Start `script` on a free port with `args`, wait (≤ 10 s) for it to print `listening`. */
export async function startListeningChild(
  script: string,
  args: string[],
  label: string,
  nodeArgs: string[] = []
): Promise<ListeningChild> {
  const port = await freePort()
  const tail = new Tail()
  const child = track(
    spawn(process.execPath, [...nodeArgs, script, String(port), ...args], {
      env: { ...process.env, BENCH_PARENT_PID: String(process.pid) },
      stdio: ['ignore', 'pipe', 'pipe']
    })
  )
  child.stdout!.on('data', (d: Buffer) => tail.add(d))
  child.stderr!.on('data', (d: Buffer) => tail.add(d))
  const deadline = performance.now() + 10_000
  while (!tail.toString().includes('listening')) {
    if (exited(child) || performance.now() > deadline) throw new Error(`${label} did not start:\n${tail.toString()}`)
    await sleep(50)
  }
  const pid = child.pid!
  return {
    pid,
    port,
    cpuUs: () => procCpu(pid).total,
    rss: () => rssBytes(pid),
    alive: () => !exited(child),
    stop: async () => await stopChild(child, 2000)
  }
}

/** In a bench child: exit when the bench that started it is gone. */
export function exitWithParent(): void {
  const parent = Number(process.env.BENCH_PARENT_PID)
  if (parent > 1)
    setInterval(() => {
      if (process.ppid !== parent) process.exit(0)
    }, 500).unref()
}

export function sleep(ms: number): Promise<void> {
  return new Promise(resolve => setTimeout(resolve, ms))
}

/** A port that was free a moment ago (bind 127.0.0.1:0, read, close). */
export function freePort(): Promise<number> {
  return claimPort('127.0.0.1', 0)
}

/** The top of a bench gateway's config: its listener and metrics on loopback, admin on a free port, warn logs. */
export function benchConfigHead(port: number, metricsPort: number): Record<string, unknown> {
  return {
    listen: { host: '127.0.0.1', port },
    metrics: { host: '127.0.0.1', port: metricsPort },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'warn' }
  }
}

/** Status of GET url, or null on a connection error / timeout. */
export function httpStatus(url: string, timeoutMs = 1000): Promise<number | null> {
  return new Promise(resolve => {
    const req = request(url, { method: 'GET', timeout: timeoutMs, agent: false }, res => {
      res.resume()
      resolve(res.statusCode ?? null)
    })
    req.on('timeout', () => req.destroy())
    req.on('error', () => resolve(null))
    req.end()
  })
}

/** V8 heap used and external (ArrayBuffer) memory of a gateway, bytes, from its /metrics (prom-client's defaults). */
export async function gatewayHeap(metricsPort: number): Promise<{ heapUsed: number; external: number } | null> {
  const text = await httpText(`http://127.0.0.1:${metricsPort}/metrics`)
  if (text === null) return null
  const read = (name: string): number => {
    const m = new RegExp(`^\\w*${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, 'm').exec(text)
    return m === null ? Number.NaN : Number(m[1])
  }
  return { heapUsed: read('nodejs_heap_size_used_bytes'), external: read('nodejs_external_memory_bytes') }
}

/** The body of a GET (null on any error or after 3 s). */
export function httpText(url: string): Promise<string | null> {
  return new Promise<string | null>(resolve => {
    const req = request(url, { timeout: 3000, agent: false }, res => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => {
        body += d
      })
      res.on('end', () => resolve(body))
    })
    req.on('timeout', () => req.destroy())
    req.on('error', () => resolve(null))
    req.end()
  })
}

// ---- /proc readings ------------------------------------------------------------------------------

let clkTck: number | null = null
export function clockTicksPerSecond(): number {
  if (clkTck === null) {
    const n = Number(execSync('getconf CLK_TCK', { encoding: 'utf8' }).trim())
    clkTck = Number.isFinite(n) && n > 0 ? n : 100
  }
  return clkTck
}

/** CPU a process has used so far, in µs: utime and stime (/proc/<pid>/stat fields 14 and 15, clock ticks). */
/** What a vs-nginx bench measures of one target process (or processes): CPU, RSS, life, run-queue wait. */
export interface MeasuredTarget {
  url: string
  cpuUs: () => number
  rss: () => number
  alive: () => boolean
  /** Processes whose run-queue wait is read (the gateway; nginx's master and worker). */
  pids: () => number[]
}

export interface ProcCpu {
  user: number
  sys: number
  total: number
}

export function procCpu(pid: number): ProcCpu {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  // fields[0] is field 3 (state), so field n is fields[n - 3].
  const us = 1e6 / clockTicksPerSecond()
  const user = Number(fields[11]) * us
  const sys = Number(fields[12]) * us
  return { user, sys, total: user + sys }
}

export function cpuDelta(a: ProcCpu, b: ProcCpu): ProcCpu {
  return { user: b.user - a.user, sys: b.sys - a.sys, total: b.total - a.total }
}

/** Whole-machine CPU time by kind (first line of /proc/stat), in µs summed over all cores. */
export type MachineCpu = Record<'user' | 'nice' | 'system' | 'idle' | 'iowait' | 'irq' | 'softirq' | 'steal', number>
const MACHINE_FIELDS = ['user', 'nice', 'system', 'idle', 'iowait', 'irq', 'softirq', 'steal'] as const

export function machineCpu(): MachineCpu {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]
  const nums = line.trim().split(/\s+/).slice(1).map(Number)
  const us = 1e6 / clockTicksPerSecond()
  const out = {} as MachineCpu
  MACHINE_FIELDS.forEach((k, i) => {
    out[k] = (nums[i] ?? 0) * us
  })
  return out
}

/** Share of all cores' time per kind between two readings, in % of the machine (100 % = every core busy). */
export function machineShare(a: MachineCpu, b: MachineCpu): MachineCpu & { busy: number } {
  const d = {} as MachineCpu
  let total = 0
  for (const k of MACHINE_FIELDS) {
    d[k] = b[k] - a[k]
    total += d[k]
  }
  const out = {} as MachineCpu & { busy: number }
  for (const k of MACHINE_FIELDS) out[k] = total > 0 ? (100 * d[k]) / total : NaN
  out.busy = total > 0 ? (100 * (total - d.idle - d.iowait)) / total : NaN
  return out
}

/** Main thread's time spent runnable but waiting for a CPU, in µs (/proc/<pid>/schedstat field 2, ns). */
export function runqueueWaitMicros(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1000
  } catch {
    return NaN
  }
}

/**
 * CPU pinning on a small machine: the gateway gets the last core to itself, the load generator and the
 * sink share the others, so the gateway's figures are not its neighbours' scheduling noise.
 * `taskset -a -p -c LIST PID` (all threads). False when taskset is missing or refuses.
 */
export function pin(pid: number, cores: string): boolean {
  try {
    execSync(`taskset -a -p -c ${cores} ${pid}`, { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}

/**
 * `pin` for a run: `measured` (the gateway) on the last core, `tools` (load generator, sink, upstream) on
 * the others. The cores of each, or null when it is not possible (one core, or taskset refuses).
 */
export function pinApart(measured: number[], tools: number[]): { measured: string; tools: string } | null {
  const cores = cpus().length
  if (cores < 2) return null
  const last = String(cores - 1)
  const rest = cores > 2 ? `0-${cores - 2}` : '0'
  return measured.every(p => pin(p, last)) && tools.every(p => pin(p, rest)) ? { measured: last, tools: rest } : null
}

/** Resident set size in bytes (/proc/<pid>/status VmRSS). */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return m === null ? NaN : Number(m[1]) * 1024
}

/** A process and its descendants (a `serve` and its workers), from /proc's children lists; gone ones are left out. */
export function processTree(pid: number): number[] {
  const out: number[] = []
  const visit = (p: number): void => {
    let kids = ''
    try {
      kids = readFileSync(`/proc/${p}/task/${p}/children`, 'utf8')
    } catch {
      return
    }
    out.push(p)
    for (const k of kids.trim().split(/\s+/)) if (k !== '') visit(Number(k))
  }
  visit(pid)
  return out
}

// ---- the sink (tests/bench/sink.ts) as a child process ---------------------------------------------

export interface SinkStats {
  /** Binary frames received since start (or the last reset-all); a message may hold several. */
  received: number
  /** Binary messages received (the gateway's vendor writes). */
  messages: number
  /** Bytes of those binary messages. */
  bytes: number
  /** sink clock (ms, performance.timeOrigin + performance.now()) when the figures were taken. */
  at: number
  /** Connections open now / ever (since the last reset-all). */
  open: number
  opened: number
  /** Frames per leg index (contactId - CONTACT_BASE), for legs that sent an init message. */
  perLeg: number[]
  /** Frames whose sequence number was not the one expected on their leg (reordered or missing before). */
  outOfOrder: number
  /** Init messages the sink could not place (no contactId). */
  unknownLegs: number
  latency: LatencySummary
  /** Connections opened since the last 'mark': [leg, first frame at (ms), first seq, last seq, frames]. */
  sinceMark: number[][]
}

type SinkCommand = 'reset-hist' | 'reset-all' | 'stats' | 'mark'

/** The sink child: `node dist/tests/bench/sink.js --port 0`, spoken to over IPC. */
export class Sink {
  private seq = 0
  private readonly waiting = new Map<number, { resolve: (s: SinkStats) => void; reject: (e: Error) => void }>()

  private constructor(
    readonly child: ChildProcess,
    readonly port: number,
    readonly tail: Tail
  ) {
    child.on('message', (m: { id?: number; stats?: SinkStats }) => {
      if (m.id === undefined || m.stats === undefined) return
      const w = this.waiting.get(m.id)
      this.waiting.delete(m.id)
      w?.resolve(m.stats)
    })
    child.once('exit', (code, signal) => {
      for (const w of this.waiting.values()) w.reject(new Error(`sink exited (${code ?? signal})\n${tail.toString()}`))
      this.waiting.clear()
    })
  }

  get pid(): number {
    return this.child.pid!
  }

  get url(): string {
    return `ws://127.0.0.1:${this.port}/`
  }

  /** `finalsMs`: answer a Deepgram-speaking route's audio with a final every that many ms of audio (sink.ts). */
  static async start(port = 0, finalsMs = 0): Promise<Sink> {
    const tail = new Tail()
    const child = track(
      fork(join(BENCH_DIST, 'sink.js'), ['--port', String(port), '--finals-ms', String(finalsMs)], {
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
        execArgv: []
      })
    )
    child.stdout!.on('data', (d: Buffer) => tail.add(d))
    child.stderr!.on('data', (d: Buffer) => tail.add(d))
    let onExit: (code: number | null, signal: string | null) => void = () => {}
    try {
      const actual = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`sink did not start within 10 s\n${tail.toString()}`)), 10_000)
        onExit = (code, signal) => {
          clearTimeout(timer)
          reject(new Error(`sink exited during start-up (${code ?? signal})\n${tail.toString()}`))
        }
        child.once('exit', onExit)
        child.once('message', (m: { listening?: number; error?: string }) => {
          clearTimeout(timer)
          if (typeof m.listening === 'number') resolve(m.listening)
          else reject(new Error(`sink failed: ${m.error ?? JSON.stringify(m)}`))
        })
      })
      return new Sink(child, actual, tail)
    } catch (err) {
      if (!exited(child)) child.kill('SIGKILL')
      throw err
    } finally {
      child.removeListener('exit', onExit)
    }
  }

  /** Ask the sink; every command answers with its figures (taken before the command's reset, if any). */
  async ask(cmd: SinkCommand): Promise<SinkStats> {
    const id = ++this.seq
    return await new Promise<SinkStats>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(id)
        reject(new Error(`sink did not answer "${cmd}" within 10 s`))
      }, 10_000)
      this.waiting.set(id, {
        resolve: s => {
          clearTimeout(timer)
          resolve(s)
        },
        reject: e => {
          clearTimeout(timer)
          reject(e)
        }
      })
      this.child.send({ id, cmd })
    })
  }

  async stop(): Promise<void> {
    await stopChild(this.child, 2000)
  }
}

// ---- report formatting -------------------------------------------------------------------------

/** Run-queue wait (ms per s, /proc/<pid>/schedstat) above which other programs took a measured process's core. */
export const NOISY_WAIT_MS_PER_S = 50

/** A warning for the summary when the measured process waited for its core (others' work in its figures). */
export function noisy(waitMsPerS: number): string {
  return waitMsPerS > NOISY_WAIT_MS_PER_S ? `; NOISY: waited ${fmt(waitMsPerS, 0)} ms/s for its core` : ''
}

/** The mark after a report row of the wait itself, above the bound. */
export function noisyMark(waitMsPerS: number): string {
  return waitMsPerS > NOISY_WAIT_MS_PER_S ? '  ← NOISY: other programs took its core; figures are not its own' : ''
}

/** The same wait as a table cell, marked NOISY above the bound. */
export function waitCell(waitMsPerS: number): string {
  return `${fmt(waitMsPerS, 0)} ms/s${waitMsPerS > NOISY_WAIT_MS_PER_S ? ' NOISY' : ''}`
}

export function fmt(n: number, digits = 2): string {
  if (!Number.isFinite(n)) return 'n/a'
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
}

export function fmtInt(n: number): string {
  if (!Number.isFinite(n)) return 'n/a'
  return Math.round(n).toLocaleString('en-US')
}

export function fmtMiB(bytes: number): string {
  return Number.isFinite(bytes) ? `${fmt(bytes / (1024 * 1024), 1)} MiB` : 'n/a'
}

export function fmtKiB(bytes: number): string {
  return Number.isFinite(bytes) ? `${fmt(bytes / 1024, 1)} KiB` : 'n/a'
}

/** A two-column block: labels padded to one width. */
export class Report {
  private readonly rows: ([string, string] | string)[] = []
  constructor(private readonly title: string) {}
  row(label: string, value: string): this {
    this.rows.push([label, value])
    return this
  }

  section(text: string): this {
    this.rows.push(text)
    return this
  }

  print(): void {
    const width = Math.max(...this.rows.map(r => (typeof r === 'string' ? 0 : r[0].length)))
    const lines = [this.title, '='.repeat(this.title.length)]
    for (const r of this.rows) lines.push(typeof r === 'string' ? r : `  ${r[0].padEnd(width)}  ${r[1]}`)
    console.log(lines.join('\n'))
  }
}

/** Round floats for the JSON line (3 significant decimals is plenty). */
export function round(n: number, digits = 3): number | null {
  if (!Number.isFinite(n)) return null
  const f = 10 ** digits
  return Math.round(n * f) / f
}

/** Progress lines go to stderr so stdout holds only the report. */
export function progress(line: string): void {
  process.stderr.write(`bench: ${line}\n`)
}

/** Which machine and day the figures come from: date, CPU model, cores, kernel, Node. */
export function machineLine(): string {
  let model = 'unknown CPU'
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))
    if (m !== null) model = m[1].replace(/\s+/g, ' ').trim()
  } catch {
    /* not Linux */
  }
  const cores = cpus().length
  return `${new Date().toISOString().slice(0, 10)}, ${model}, ${cores} cores, ${os.release()}, Node ${process.version}`
}
