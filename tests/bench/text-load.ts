/**
 * The text bench's processes and its own closed-loop client: the CLI children (gateway, vendor
 * emulator) and N keep-alive connections, each with one request in flight (no pipelining).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { connect as netConnect, type Socket } from 'node:net'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { exited, fmt, Histogram, httpStatus, PACKAGE_ROOT, type Report, sleep, Tail, track } from './lib'

const BIN = join(PACKAGE_ROOT, 'bin', 'assist-gateway.js')

export interface Child {
  child: ChildProcess
  pid: number
  tail: Tail
}

/** `bin`: another checkout's CLI (text --base: the same bench against an earlier build). */
export function spawnCli(args: string[], env: NodeJS.ProcessEnv = {}, nodeArgs: string[] = [], bin = BIN): Child {
  const clean: NodeJS.ProcessEnv = {
    // One gateway process unless asked (GATEWAY_WORKERS=N npm run bench): the CPU figures read its pid.
    GATEWAY_WORKERS: '1',
    ...process.env,
    ...env,
    BENCH_PARENT_PID: String(process.pid)
  }
  for (const k of ['PORT', 'ADMIN_PORT', 'LOG_LEVEL', 'REDIS_URL', 'GATEWAY_CONFIG', 'NODE_OPTIONS']) delete clean[k]
  const tail = new Tail()
  const child = track(
    spawn(process.execPath, [...nodeArgs, bin, ...args], {
      cwd: PACKAGE_ROOT,
      env: clean,
      stdio: ['ignore', 'pipe', 'pipe']
    })
  )
  child.stdout!.on('data', (d: Buffer) => tail.add(d))
  child.stderr!.on('data', (d: Buffer) => tail.add(d))
  return { child, pid: child.pid!, tail }
}

export async function waitOk(c: Child, url: string, what: string): Promise<void> {
  const deadline = performance.now() + 15_000
  for (;;) {
    if (exited(c.child)) throw new Error(`${what} exited during start-up:\n${c.tail.toString()}`)
    if ((await httpStatus(url, 500)) === 200) return
    if (performance.now() > deadline)
      throw new Error(`${what} did not answer ${url} within 15 s:\n${c.tail.toString()}`)
    await sleep(100)
  }
}

/** One keep-alive connection in a closed loop: send, read the whole answer, record, send again. */
export class Conn {
  private buf: Buffer = Buffer.alloc(0)
  private sentAt = 0
  private stopped = false
  constructor(
    private readonly socket: Socket,
    private readonly request: Buffer,
    private readonly run: LoadRun
  ) {
    socket.setNoDelay(true)
    socket.on('data', d => this.onData(d))
    socket.on('error', err => {
      run.errors.set(err.message, (run.errors.get(err.message) ?? 0) + 1)
    })
    socket.on('close', () => {
      if (!this.stopped) run.closed++
    })
  }

  start(): void {
    this.sentAt = performance.now()
    this.socket.write(this.request)
  }

  stop(): void {
    this.stopped = true
    this.socket.destroy()
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d])
    for (;;) {
      const end = this.buf.indexOf('\r\n\r\n')
      if (end === -1) return
      const head = this.buf.toString('latin1', 0, end)
      const m = /\r\ncontent-length: *(\d+)/i.exec(head)
      const total = end + 4 + (m === null ? 0 : Number(m[1]))
      if (this.buf.length < total) return
      const status = Number(head.slice(9, 12))
      this.buf = this.buf.subarray(total)
      this.run.record(status, performance.now() - this.sentAt)
      if (this.stopped) return
      this.start()
    }
  }
}

export class LoadRun {
  readonly hist = new Histogram()
  readonly statuses = new Map<number, number>()
  readonly errors = new Map<string, number>()
  done = 0
  closed = 0
  record(status: number, ms: number): void {
    this.done++
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1)
    if (status === 200) this.hist.record(ms)
  }

  reset(): void {
    this.hist.reset()
    this.statuses.clear()
    this.done = 0
  }
}

export async function openConns(
  n: number,
  port: number,
  tls: boolean,
  request: Buffer,
  run: LoadRun,
  ca: string | null
): Promise<Conn[]> {
  const conns: Conn[] = []
  for (let i = 0; i < n; i++) {
    const socket = await new Promise<Socket>((resolve, reject) => {
      const s: Socket = tls
        ? tlsConnect({ host: '127.0.0.1', port, ca: ca!, servername: 'localhost' }, () => resolve(s))
        : netConnect({ host: '127.0.0.1', port }, () => resolve(s))
      s.once('error', reject)
    })
    conns.push(new Conn(socket, request, run))
  }
  return conns
}

/** --profile: the gateway's top self-time functions over its whole run (warm-up and start-up included). */
/** Where a profile frame's time belongs, for the text profile's summary by area. */
function textArea(fn: string, url: string): string {
  if (fn === '(garbage collector)') return 'garbage collector'
  if (fn === '(program)') return '(program: native, outside JS)'
  if (fn === 'writev' || fn === 'writevGeneric' || url.includes('/node_modules/undici/'))
    return 'undici (and its writev)'
  if (url.includes('/dist/gateway/server/http.')) return 'uWS answer write (server/http send)'
  if (url.includes('/node_modules/prom-client/')) return 'prom-client'
  if (url.includes('/node_modules/ajv/') || /^validate\d+$/.test(fn)) return 'ajv (schema)'
  if (url.includes('/dist/gateway/')) return 'gateway code (the rest)'
  if (url.includes('/node_modules/')) return 'other node_modules'
  if (url.startsWith('node:')) return 'node core (streams, timers, crypto, ...)'
  return 'native (uWS, V8 builtins, wasm)'
}

/**
 * The gateway's profile: self time by area, the gateway's own steps by inclusive time (a flat flame:
 * each step with everything it called), and the top functions by self time.
 */
export function topFunctions(dir: string, r: Report): void {
  const file = existsSync(dir) ? readdirSync(dir).find(f => f.endsWith('.cpuprofile')) : undefined
  if (file === undefined) {
    r.row('profile', `none written in ${dir} (the gateway did not exit cleanly)`)
    return
  }
  const prof = JSON.parse(readFileSync(join(dir, file), 'utf8')) as {
    nodes: {
      id: number
      callFrame: { functionName: string; url: string; lineNumber: number }
      children?: number[]
    }[]
    samples: number[]
    timeDeltas: number[]
  }
  const self = new Map<number, number>()
  prof.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (prof.timeDeltas[i + 1] ?? 0)))
  const parent = new Map<number, number>()
  const byId = new Map(prof.nodes.map(n => [n.id, n]))
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const label = (n: (typeof prof.nodes)[number]): string =>
    `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^file:\/\//, '').replace(`${PACKAGE_ROOT}/`, '')}:${n.callFrame.lineNumber + 1}`
  const byFn = new Map<string, number>()
  const byArea = new Map<string, number>()
  const inclusive = new Map<string, number>()
  let busy = 0
  for (const n of prof.nodes) {
    const us = self.get(n.id) ?? 0
    if (us === 0 || n.callFrame.functionName === '(idle)') continue
    busy += us
    byFn.set(label(n), (byFn.get(label(n)) ?? 0) + us)
    const area = textArea(n.callFrame.functionName, n.callFrame.url)
    byArea.set(area, (byArea.get(area) ?? 0) + us)
    // Inclusive time of the gateway's own functions: each counted once per sample stack.
    const seen = new Set<string>()
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      const f = byId.get(id)!
      if (!f.callFrame.url.includes('/dist/gateway/')) continue
      const k = label(f)
      if (seen.has(k)) continue
      seen.add(k)
      inclusive.set(k, (inclusive.get(k) ?? 0) + us)
    }
  }
  const pct = (us: number): string => `${fmt((100 * us) / busy, 1).padStart(5)} %`
  r.section(`gateway CPU profile (${fmt(busy / 1000, 0)} ms busy; profiling slows the gateway): self time by area`)
  for (const [k, us] of [...byArea].sort((a, b) => b[1] - a[1])) r.row(`  ${pct(us)}`, k)
  r.section("the gateway's own steps, inclusive (each with everything it called)")
  for (const [k, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 20)) r.row(`  ${pct(us)}`, k)
  r.section('top functions, self time')
  for (const [k, us] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, 30)) r.row(`  ${pct(us)}`, k)
}
