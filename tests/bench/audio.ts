/**
 * `npm run bench -- audio [--legs N] [--seconds S] [--warmup S] [--baseline-legs N] [--baseline-seconds S] [--profile] [--no-pin]
 *   [--coalesce-ms N]` (the gateway's audio.coalesceMs; absent: its default)
 *
 * Three processes: the gateway (child: node bin/assist-gateway.js serve), the sink (child:
 * dist/tests/bench/sink.js) and the load generator (this process). First a short baseline with the load
 * generator talking to the sink directly, then the same load through the gateway; "added" latency is the
 * difference of the two. With 2+ cores the gateway is pinned (taskset) to the last core and the load
 * generator and sink to the others, so the gateway's figures are not its neighbours' scheduling noise;
 * --no-pin turns that off. --profile starts the gateway with --cpu-prof and prints its top self-time
 * functions over the measured window.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { stringify } from 'yaml'
import {
  BENCH_DIST,
  benchConfigHead,
  clockTicksPerSecond,
  cpuDelta,
  exited,
  fmt,
  fmtInt,
  fmtKiB,
  fmtMiB,
  FRAME_MS,
  freePort,
  httpStatus,
  numberFlag,
  onExit,
  machineCpu,
  machineShare,
  PACKAGE_ROOT,
  NOISY_WAIT_MS_PER_S,
  pinApart,
  procCpu,
  progress,
  Report,
  round,
  rssBytes,
  gatewayHeap,
  runqueueWaitMicros,
  Sink,
  sleep,
  stopChild,
  Tail,
  track,
  UsageError,
  type LatencySummary,
  type SinkStats
} from './lib'
import { workerExecArgv } from '../../gateway/workers/worker-flags'
import { LoadGen } from './loadgen'

export const AUDIO_FLAGS = ['legs', 'seconds', 'warmup', 'baseline-legs', 'baseline-seconds', 'mapping', 'coalesce-ms']
export const AUDIO_BOOLEANS = ['profile', 'no-pin', 'memory']

const SETTLE_MS = 1000
const BASELINE_WARMUP_MS = 1000

export interface Gateway {
  child: ChildProcess
  pid: number
  port: number
  metricsPort: number
  tail: Tail
  profileDir: string | null
}

/** Mappings the audio bench can drive (both answer CONNECTED without a vendor-specific handshake). */
export const BENCH_MAPPINGS = ['passthrough', 'deepgram'] as const
export type BenchMapping = (typeof BENCH_MAPPINGS)[number]

/** Vendor side of a bench route or tee: `mapping` names a file of mappings/ (no .yaml). */
interface BenchVendor {
  mapping: string
  /** Replicas as name → URL; default one replica "sink" (the sink's URL). */
  upstreams?: { name: string; audio: string }[]
}

/** One route of the bench gateway; join goes as it is. */
export interface BenchRoute extends BenchVendor {
  join?: { channels: ['TX' | 'RX', 'TX' | 'RX']; waitSeconds?: number }
  tee?: (BenchVendor & { name: string; results?: 'drop' | 'forward' })[]
}

export interface GatewayOptions {
  mapping?: BenchMapping
  /** Replicas as name → URL; default one replica "sink". */
  upstreams?: { name: string; audio: string }[]
  /** Extra top-level config (merged shallowly), e.g. audio settings. */
  extra?: Record<string, unknown>
  /** Routes by name instead of the one route "bench" (mapping, upstreams): benches comparing routes. */
  routes?: Record<string, BenchRoute>
  /** Node flags for the gateway process (e.g. --expose-gc for audio --memory). */
  nodeArgs?: string[]
}

/** Path of a mapping file of the package (mappings/<name>.yaml). */
export function mappingFile(name: string): string {
  return join(PACKAGE_ROOT, 'mappings', `${name}.yaml`)
}

/** A route's or tee's config: the mapping's path, and every replica with the bench's vendor credential. */
function vendorConfig<T extends BenchVendor>({ mapping, upstreams, ...rest }: T, sinkUrl: string) {
  return {
    ...rest,
    mapping: mappingFile(mapping),
    upstreams: (upstreams ?? [{ name: 'sink', audio: sinkUrl }]).map(u => ({ ...u, credential: '${BENCH_VENDOR_KEY}' }))
  }
}

export async function startGateway(
  sinkUrl: string,
  token: string,
  profile: boolean,
  opts: GatewayOptions = {}
): Promise<Gateway> {
  const dir = mkdtempSync(join(tmpdir(), 'assist-gateway-bench-'))
  onExit(() => rmSync(dir, { recursive: true, force: true }))
  const [port, metricsPort] = [await freePort(), await freePort()]
  const config = {
    ...benchConfigHead(port, metricsPort),
    uws: { idleTimeoutSeconds: 0 },
    health: { active: { kind: 'none' } },
    // Exit within stopChild's grace (a SIGKILL would lose --cpu-prof's profile).
    shutdown: { drainDelaySeconds: 0, metricsLingerSeconds: 0 },
    ...opts.extra,
    routes: Object.fromEntries(
      Object.entries(
        opts.routes ?? { bench: { mapping: opts.mapping ?? 'passthrough', upstreams: opts.upstreams } }
      ).map(([name, { tee, ...route }]) => [
        name,
        {
          ...vendorConfig(route, sinkUrl),
          auth: { audio: ['${BENCH_TOKEN}'] },
          ...(tee === undefined ? {} : { tee: tee.map(t => vendorConfig(t, sinkUrl)) })
        }
      ])
    )
  }
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, stringify(config))
  const profileDir = profile ? join(dir, 'profile') : null
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    BENCH_TOKEN: token,
    BENCH_VENDOR_KEY: `vendor-${token}`,
    BENCH_PARENT_PID: String(process.pid),
    // One gateway process unless asked (GATEWAY_WORKERS=N npm run bench): the CPU figures read its pid.
    GATEWAY_WORKERS: process.env.GATEWAY_WORKERS || '1',
    BENCH_TMPDIR: dir
  }
  // These would override the config file.
  for (const k of ['PORT', 'ADMIN_PORT', 'LOG_LEVEL', 'REDIS_URL', 'GATEWAY_CONFIG', 'NODE_OPTIONS']) delete env[k]
  const args = [
    ...(profileDir !== null ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []),
    // Diagnostics only (e.g. `--heapsnapshot-signal=SIGUSR2` to count what a leg holds): node flags for the gateway.
    // The one process serves as a worker of `serve` does, so it gets a worker's node flags (the young
    // generation's size: gateway/workers/worker-flags.ts), unless BENCH_GATEWAY_NODE_ARGS gives its own.
    ...workerExecArgv(
      (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(' ').filter(a => a !== ''),
      ''
    ),
    ...(opts.nodeArgs ?? []),
    '-r',
    join(BENCH_DIST, 'guard.js'),
    join(PACKAGE_ROOT, 'bin', 'assist-gateway.js'),
    'serve',
    '--config',
    file
  ]
  const tail = new Tail()
  const child = track(spawn(process.execPath, args, { cwd: PACKAGE_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] }))
  child.stdout!.on('data', (d: Buffer) => tail.add(d))
  child.stderr!.on('data', (d: Buffer) => tail.add(d))
  const deadline = performance.now() + 15_000
  for (;;) {
    if (exited(child))
      throw new Error(`the gateway exited during start-up (${child.exitCode ?? child.signalCode}):\n${tail.toString()}`)
    if ((await httpStatus(`http://127.0.0.1:${port}/livez`, 500)) === 200) break
    if (performance.now() > deadline)
      throw new Error(`the gateway did not answer /livez within 15 s:\n${tail.toString()}`)
    await sleep(100)
  }
  return { child, pid: child.pid!, port, metricsPort, tail, profileDir }
}

/** Monotonic µs, the clock V8's CPU profile uses for startTime / timeDeltas. */
function monoMicros(): number {
  return Number(process.hrtime.bigint() / 1000n)
}

interface ProfileSummary {
  file: string
  windowSamples: number
  busyMs: number
  top: { fn: string; where: string; selfMs: number; pct: number }[]
  byArea: { area: string; selfMs: number; pct: number }[]
}

interface CpuProfile {
  nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number } }[]
  startTime: number
  endTime: number
  samples: number[]
  timeDeltas: number[]
}

function areaOf(fn: string, url: string): string {
  if (fn === '(garbage collector)') return 'garbage collector'
  if (fn === '(program)') return '(program: native, outside JS)'
  if (url.includes('/node_modules/ws/')) return 'ws (vendor client)'
  if (url.includes('/node_modules/bufferutil/')) return 'bufferutil'
  if (url.includes('uWebSockets.js') || url.includes('uws-js-unofficial')) return 'uWebSockets.js'
  if (url.includes('/dist/gateway/')) return 'gateway code'
  if (url.includes('/node_modules/')) return 'other node_modules'
  if (url.startsWith('node:')) return 'node core (net, stream, timers, ...)'
  if (url === '') return 'native (addons incl. uWS, V8 builtins)'
  return 'other'
}

/** Self time per function over [w0, w1] (monotonic µs) from a .cpuprofile, idle excluded. */
function summarizeProfile(dir: string, w0: number, w1: number): ProfileSummary | null {
  const files = readdirSync(dir).filter(f => f.endsWith('.cpuprofile'))
  if (files.length === 0) return null
  const file = join(dir, files[0])
  const prof = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(prof.nodes.map(n => [n.id, n]))
  const selfByNode = new Map<number, number>()
  let t = prof.startTime
  let inWindow = 0
  const pass = (restrict: boolean): void => {
    selfByNode.clear()
    t = prof.startTime
    inWindow = 0
    for (let i = 0; i < prof.samples.length; i++) {
      const dt = prof.timeDeltas[i] ?? 0
      t += dt
      if (restrict && (t < w0 || t > w1)) continue
      inWindow++
      // A sample stands for the interval up to the next one.
      const weight = prof.timeDeltas[i + 1] ?? dt
      selfByNode.set(prof.samples[i], (selfByNode.get(prof.samples[i]) ?? 0) + weight)
    }
  }
  pass(true)
  if (inWindow === 0) pass(false) // clocks did not line up: use the whole profile
  const byFn = new Map<string, { fn: string; where: string; us: number }>()
  const byArea = new Map<string, number>()
  let busy = 0
  for (const [id, us] of selfByNode) {
    const cf = byId.get(id)!.callFrame
    if (cf.functionName === '(idle)') continue
    busy += us
    const fn = cf.functionName === '' ? '(anonymous)' : cf.functionName
    const where =
      cf.url === '' ? '' : `${cf.url.replace(/^file:\/\//, '').replace(`${PACKAGE_ROOT}/`, '')}:${cf.lineNumber + 1}`
    const key = `${fn}@${where}`
    const e = byFn.get(key) ?? { fn, where, us: 0 }
    e.us += us
    byFn.set(key, e)
    const area = areaOf(cf.functionName, cf.url)
    byArea.set(area, (byArea.get(area) ?? 0) + us)
  }
  const top = [...byFn.values()]
    .sort((a, b) => b.us - a.us)
    .slice(0, 20)
    .map(e => ({ fn: e.fn, where: e.where, selfMs: e.us / 1000, pct: (100 * e.us) / busy }))
  const areas = [...byArea]
    .sort((a, b) => b[1] - a[1])
    .map(([area, us]) => ({ area, selfMs: us / 1000, pct: (100 * us) / busy }))
  return { file, windowSamples: inWindow, busyMs: busy / 1000, top, byArea: areas }
}

function latencyJson(l: LatencySummary): Record<string, number | null> {
  return {
    count: l.count,
    p50: round(l.p50),
    p90: round(l.p90),
    p99: round(l.p99),
    p999: round(l.p999),
    max: round(l.max),
    mean: round(l.mean),
    overflow: l.overflow,
    negative: l.negative
  }
}

export async function runAudio(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const legs = numberFlag(flags, 'legs', 1000, { integer: true, min: 1, max: 20000 })
  const seconds = numberFlag(flags, 'seconds', 20, { min: 1, max: 3600 })
  const warmup = numberFlag(flags, 'warmup', 3, { min: 0, max: 600 })
  const baselineLegs = numberFlag(flags, 'baseline-legs', legs, { integer: true, min: 1, max: 20000 })
  const baselineSeconds = numberFlag(flags, 'baseline-seconds', 3, { min: 1, max: 600 })
  const profile = flags.has('profile')
  const mapping = (flags.get('mapping') ?? 'passthrough') as BenchMapping
  if (!BENCH_MAPPINGS.includes(mapping)) throw new UsageError(`--mapping must be one of ${BENCH_MAPPINGS.join(', ')}`)
  const cores = cpus().length
  const token = `bench-${randomBytes(12).toString('hex')}`
  const tck = clockTicksPerSecond()

  progress(`audio: starting the sink and the gateway${profile ? ' (with --cpu-prof)' : ''}`)
  const sink = await Sink.start(0)
  // --coalesce-ms: the gateway's audio.coalesceMs (absent: its default).
  const coalesce = flags.has('coalesce-ms')
    ? numberFlag(flags, 'coalesce-ms', 0, { integer: true, min: 0, max: 200 })
    : null
  const gw = await startGateway(sink.url, token, profile, {
    mapping,
    ...(coalesce === null ? {} : { extra: { audio: { coalesceMs: coalesce } } })
  })
  progress(`audio: gateway pid ${gw.pid} on 127.0.0.1:${gw.port}, sink pid ${sink.pid} on 127.0.0.1:${sink.port}`)
  let pinning = 'off (--no-pin)'
  let pinned = false
  if (!flags.has('no-pin')) {
    const p = pinApart([gw.pid], [sink.pid, process.pid])
    pinned = p !== null
    pinning =
      p !== null
        ? `gateway on core ${p.measured}; load generator and sink on core ${p.tools}`
        : 'not possible (one core, or taskset unavailable)'
  }
  progress(`audio: CPU pinning: ${pinning}`)

  // ---- baseline: load generator → sink directly ----
  progress(
    `audio: baseline, ${baselineLegs} legs straight to the sink for ${BASELINE_WARMUP_MS / 1000} + ${baselineSeconds} s`
  )
  const base = new LoadGen(sink.url, baselineLegs, token)
  const baseConn = await base.connect()
  await sleep(BASELINE_WARMUP_MS)
  await sink.ask('reset-hist')
  await sleep(baselineSeconds * 1000)
  const baseStats = await sink.ask('stats')
  await base.close()
  await sleep(200)
  await sink.ask('reset-all')
  if (baseConn.failed > 0) progress(`audio: baseline: ${baseConn.failed} legs failed: ${base.failures().join('; ')}`)

  // ---- through the gateway ----
  const rssBefore = rssBytes(gw.pid)
  const heapBefore = await gatewayHeap(gw.metricsPort)
  progress(`audio: connecting ${legs} legs through the gateway`)
  const connectStart = performance.now()
  const gen = new LoadGen(`ws://127.0.0.1:${gw.port}/audio/bench`, legs, token)
  const conn = await gen.connect()
  const connectMs = performance.now() - connectStart
  const rssConnected = rssBytes(gw.pid)
  const heapConnected = await gatewayHeap(gw.metricsPort)
  if (conn.failed > 0) progress(`audio: ${conn.failed} legs failed: ${gen.failures().join('; ')}`)
  progress(
    `audio: ${conn.streaming} legs streaming (connected in ${fmt(connectMs / 1000, 1)} s); warm-up ${warmup} s, then ${seconds} s measured`
  )
  await sleep(warmup * 1000)

  gen.markWindow()
  const gwCpu0 = procCpu(gw.pid)
  const sinkCpu0 = procCpu(sink.pid)
  const selfCpu0 = procCpu(process.pid)
  const machine0 = machineCpu()
  const wait0 = [gw.pid, process.pid, sink.pid].map(runqueueWaitMicros)
  const mono0 = monoMicros()
  const s0: SinkStats = await sink.ask('reset-hist')
  const sent0 = gen.sent
  const rssWarm = rssBytes(gw.pid)
  await sleep(seconds * 1000)
  const gwCpu = cpuDelta(gwCpu0, procCpu(gw.pid))
  const sinkCpu = cpuDelta(sinkCpu0, procCpu(sink.pid))
  const genCpu = cpuDelta(selfCpu0, procCpu(process.pid))
  const machine = machineShare(machine0, machineCpu())
  const [gwWait, genWait, sinkWait] = [gw.pid, process.pid, sink.pid].map(
    (pid, i) => runqueueWaitMicros(pid) - wait0[i]
  )
  const mono1 = monoMicros()
  const s1 = await sink.ask('stats')
  const sent1 = gen.sent
  const rssEnd = rssBytes(gw.pid)
  const heapEnd = await gatewayHeap(gw.metricsPort)
  const late = { max: gen.maxLateMs, lateTicks: gen.lateTicks, ticks: gen.ticks }
  gen.stop()

  progress(`audio: stopped sending; ${SETTLE_MS / 1000} s settle`)
  await sleep(SETTLE_MS)
  const final = await sink.ask('stats')
  let legsShort = 0
  for (const leg of gen.legs) if (leg.state !== 'failed' && (final.perLeg[leg.index] ?? 0) !== leg.sent) legsShort++
  await gen.close()
  const gwAlive = !exited(gw.child)
  await stopChild(gw.child, 5000)
  const prof = gw.profileDir !== null ? summarizeProfile(gw.profileDir, mono0, mono1) : null
  await sink.stop()

  // ---- figures ----
  const windowS = (s1.at - s0.at) / 1000
  const delivered = s1.received - s0.received
  const framesPerSec = delivered / windowS
  const writesPerSec = (s1.messages - s0.messages) / windowS
  const sentPerSec = (sent1 - sent0) / windowS
  const windowUs = mono1 - mono0
  const cpuPerFrame = gwCpu.total / delivered
  const gwCpuPct = (100 * gwCpu.total) / windowUs
  const sinkCpuPct = (100 * sinkCpu.total) / windowUs
  const genCpuPct = (100 * genCpu.total) / windowUs
  const softirqPct = machine.softirq * cores
  // Whatever else ran on the machine meanwhile (other builds, tests): the figures are noisy when it is
  // large. Softirq time is partly charged to the processes too (loopback TCP in their syscalls): a floor.
  const othersPct = Math.max(0, machine.busy * cores - softirqPct - gwCpuPct - sinkCpuPct - genCpuPct)
  const waitMsPerS = (us: number): number => (1000 * us) / windowUs
  const lat = s1.latency
  const bl = baseStats.latency
  const added = { p50: lat.p50 - bl.p50, p99: lat.p99 - bl.p99 }
  const lost = gen.sent - final.received
  const rssPerLeg = (rssConnected - rssBefore) / Math.max(1, conn.streaming)
  const rssPerLegEnd = (rssEnd - rssBefore) / Math.max(1, conn.streaming)
  // V8 heap (JS objects) and external memory (ArrayBuffers: rings, queues, socket buffers) per leg.
  const perLeg = (
    a: { heapUsed: number; external: number } | null,
    b: { heapUsed: number; external: number } | null
  ): { heap: number; external: number } | null =>
    a === null || b === null
      ? null
      : {
          heap: (b.heapUsed - a.heapUsed) / Math.max(1, conn.streaming),
          external: (b.external - a.external) / Math.max(1, conn.streaming)
        }
  const heapPerLeg = perLeg(heapBefore, heapConnected)
  const heapPerLegEnd = perLeg(heapBefore, heapEnd)

  const r = new Report(
    `audio: ${legs} legs × 50 frames/s × 160 B through the gateway (${mapping} mapping) to a local uWS sink`
  )
  r.section('setup')
  r.row(
    'legs streaming / asked',
    `${fmtInt(conn.streaming)} / ${fmtInt(legs)}${conn.failed > 0 ? `  (${conn.failed} failed: ${gen.failures().join('; ')})` : ''}`
  )
  r.row('connect time (all legs)', `${fmt(connectMs / 1000, 2)} s`)
  r.row('warm-up / measured window', `${fmt(warmup, 1)} s / ${fmt(windowS, 2)} s`)
  r.row('CPU pinning (taskset)', pinning)
  r.row('CLK_TCK', String(tck))
  r.section('throughput')
  r.row(
    'frames/s delivered to the sink',
    `${fmtInt(framesPerSec)}  (expected ${fmtInt((conn.streaming * 1000) / FRAME_MS)}; generator sent ${fmtInt(sentPerSec)}/s)`
  )
  r.row('frames delivered in window', fmtInt(delivered))
  r.row(
    'vendor writes/s (sink messages)',
    `${fmtInt(writesPerSec)}  (${fmt(delivered / Math.max(1, s1.messages - s0.messages), 2)} frames per write; audio.coalesceMs ${coalesce ?? 'default'})`
  )
  r.section('gateway CPU (utime+stime from /proc, measured window)')
  r.row(
    'CPU per frame',
    `${fmt(cpuPerFrame, 2)} µs  (user ${fmt(gwCpu.user / delivered, 2)} µs, system ${fmt(gwCpu.sys / delivered, 2)} µs)`
  )
  r.row('CPU use', `${fmt(gwCpuPct, 1)} % of one core`)
  r.row('load generator / sink CPU', `load generator ${fmt(genCpuPct, 1)} %, sink ${fmt(sinkCpuPct, 1)} % of one core`)
  r.row(
    'machine (/proc/stat, all cores)',
    `${fmt(machine.busy, 1)} % busy: user ${fmt(machine.user, 1)}, system ${fmt(machine.system, 1)}, softirq ${fmt(machine.softirq, 1)}, steal ${fmt(machine.steal, 1)}, idle ${fmt(machine.idle, 1)} (${cores} cores)`
  )
  r.row(
    'kernel softirq (loopback TCP)',
    `${fmt(softirqPct, 1)} % of one core (partly also inside the processes' system time)`
  )
  r.row(
    'other programs (approx.)',
    `${fmt(othersPct, 1)} % of one core${othersPct > 25 ? '  ← NOISY: other programs were busy; rerun on a quiet machine' : ''}`
  )
  const gwStarved = pinned && waitMsPerS(gwWait) > NOISY_WAIT_MS_PER_S
  r.row(
    'waiting for a CPU (run queue)',
    `gateway ${fmt(waitMsPerS(gwWait), 1)} ms/s, load generator ${fmt(waitMsPerS(genWait), 1)} ms/s, sink ${fmt(waitMsPerS(sinkWait), 1)} ms/s (main threads, /proc/<pid>/schedstat)${gwStarved ? (profile ? "  (the profiler's sampling thread shares the gateway's core)" : "  ← NOISY: something else ran on the gateway's core") : ''}`
  )
  r.section('latency (send stamp in the generator → sink receive, ms)')
  r.row(
    'baseline (direct, no gateway)',
    `p50 ${fmt(bl.p50, 3)}  p99 ${fmt(bl.p99, 3)}  max ${fmt(bl.max, 3)}  (${baseConn.streaming} legs, ${fmtInt(bl.count)} frames)`
  )
  r.row(
    'through the gateway',
    `p50 ${fmt(lat.p50, 3)}  p99 ${fmt(lat.p99, 3)}  max ${fmt(lat.max, 3)}  (${fmtInt(lat.count)} frames)`
  )
  r.row('added by the gateway', `p50 ${fmt(added.p50, 3)}  p99 ${fmt(added.p99, 3)}`)
  r.row(
    'generator scheduler lateness',
    `max ${fmt(late.max, 1)} ms; ${late.lateTicks} of ${fmtInt(late.ticks)} ticks later than ${FRAME_MS} ms`
  )
  r.section('loss (all frames sent after CONNECTED vs received by the sink, after a 1 s settle)')
  r.row('frames sent / received', `${fmtInt(gen.sent)} / ${fmtInt(final.received)}`)
  r.row('lost frames', `${fmtInt(lost)}  (${legsShort} legs short; ${final.outOfOrder} out of order)`)
  r.section('gateway memory (VmRSS)')
  r.row('RSS before legs', fmtMiB(rssBefore))
  r.row(
    'RSS with legs connected',
    `${fmtMiB(rssConnected)}  (end of warm-up ${fmtMiB(rssWarm)}, end of window ${fmtMiB(rssEnd)})`
  )
  r.row('RSS per leg', `${fmtKiB(rssPerLeg)}  (using end of window: ${fmtKiB(rssPerLegEnd)})`)
  const heapRow = (h: { heap: number; external: number } | null): string =>
    h === null ? 'not read' : `V8 heap ${fmtKiB(h.heap)} + external ${fmtKiB(h.external)}`
  r.row('heap per leg', `${heapRow(heapPerLeg)}  (end of window: ${heapRow(heapPerLegEnd)})`)
  if (!gwAlive) r.row('WARNING', `the gateway had exited before the end of the run:\n${gw.tail.toString()}`)
  if (prof !== null) {
    r.section(
      `gateway CPU profile (--cpu-prof; ${basename(prof.file)}; ${fmtInt(prof.windowSamples)} samples in window, ${fmt(prof.busyMs, 0)} ms busy; profiling inflates the CPU figures above)`
    )
    for (const a of prof.byArea) r.row(`  ${a.area}`, `${fmt(a.pct, 1).padStart(5)} %  ${fmt(a.selfMs, 0)} ms`)
    r.section('  top self-time functions:')
    for (const f of prof.top) r.row(`    ${fmt(f.pct, 1).padStart(5)} %`, `${f.fn}  ${f.where}`)
  }
  r.print()

  return {
    mapping,
    legs,
    legsStreaming: conn.streaming,
    legsFailed: conn.failed,
    connectSeconds: round(connectMs / 1000),
    warmupSeconds: warmup,
    windowSeconds: round(windowS),
    framesPerSecDelivered: round(framesPerSec, 1),
    framesPerSecExpected: (conn.streaming * 1000) / FRAME_MS,
    framesPerSecSent: round(sentPerSec, 1),
    vendorWritesPerSec: round(writesPerSec, 1),
    coalesceMs: coalesce,
    gatewayCpuUsPerFrame: round(cpuPerFrame),
    gatewayCpuUserUsPerFrame: round(gwCpu.user / delivered),
    gatewayCpuSystemUsPerFrame: round(gwCpu.sys / delivered),
    gatewayCpuPercent: round(gwCpuPct, 1),
    generatorCpuPercent: round(genCpuPct, 1),
    sinkCpuPercent: round(sinkCpuPct, 1),
    machineBusyPercent: round(machine.busy, 1),
    machineSoftirqPercent: round(machine.softirq, 1),
    otherCpuPercent: round(othersPct, 1),
    gatewayRunqueueWaitMsPerS: round(waitMsPerS(gwWait), 1),
    cores,
    pinning,
    latencyMs: latencyJson(lat),
    baselineLatencyMs: { ...latencyJson(bl), legs: baseConn.streaming },
    addedLatencyMs: { p50: round(added.p50), p99: round(added.p99) },
    schedulerMaxLateMs: round(late.max, 1),
    framesSent: gen.sent,
    framesReceived: final.received,
    lostFrames: lost,
    legsShort,
    outOfOrder: final.outOfOrder,
    rssBeforeBytes: rssBefore,
    rssConnectedBytes: rssConnected,
    rssEndBytes: rssEnd,
    rssPerLegBytes: Math.round(rssPerLeg),
    rssPerLegEndBytes: Math.round(rssPerLegEnd),
    heapPerLegBytes: heapPerLeg === null ? null : Math.round(heapPerLeg.heap),
    externalPerLegBytes: heapPerLeg === null ? null : Math.round(heapPerLeg.external),
    heapPerLegEndBytes: heapPerLegEnd === null ? null : Math.round(heapPerLegEnd.heap),
    externalPerLegEndBytes: heapPerLegEnd === null ? null : Math.round(heapPerLegEnd.external),
    ...(prof !== null
      ? {
          profileTop: prof.top.slice(0, 10).map(f => ({ fn: f.fn, where: f.where, pct: round(f.pct, 1) })),
          profileAreas: prof.byArea.map(a => ({ area: a.area, pct: round(a.pct, 1) }))
        }
      : {})
  }
}
