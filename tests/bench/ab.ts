/**
 * Two routes of one gateway side by side (`bench join`, `bench tee`): gateway CPU per platform frame, A B A B.
 *
 * One gateway process (bin/assist-gateway.js serve, one worker) holds both routes; the load generator (this
 * process) and the sink (a child) are the platform and the vendor. Each phase opens its own legs on one
 * route (fresh contactIds, so nothing re-attaches) at real-time pace (20 ms frames of 160 bytes), warms up,
 * then reads the gateway's utime + stime (/proc/<pid>/stat) over the measured window and divides by the
 * platform frames sent in it. It then closes its legs and waits until the sink has no connection left, so
 * one phase's closing work does not land in the next one's window. Alternating A B A B spreads the drift of
 * a shared machine (the lead's test runs) over both routes; the figure of a route is its CPU summed over its
 * rounds divided by its frames. Nothing is pinned.
 */
import { loadavg } from 'node:os'
import { startGateway, type BenchRoute } from './audio'
import {
  fmt,
  fmtInt,
  FRAME_BYTES,
  FRAME_MS,
  machineCpu,
  machineLine,
  machineShare,
  numberFlag,
  procCpu,
  progress,
  Report,
  round,
  Sink,
  sleep,
  stopChild,
  type SinkStats
} from './lib'
import { LoadGen } from './loadgen'

/** Flags every A/B bench takes, besides its own count of legs. */
export const AB_FLAGS = ['seconds', 'warmup', 'rounds']
const DRAIN_MS = 15_000

export interface Variant {
  /** Key in BENCH_JSON. */
  key: string
  /** Label in the report. */
  label: string
  route: BenchRoute
}

export interface AbPlan {
  name: string
  title: string
  /** Platform legs per phase (one contact per leg, or per perspectives.length legs). */
  legs: number
  perspectives: readonly ('TX' | 'RX')[]
  variants: readonly [Variant, Variant]
  /** Key of the ratio in BENCH_JSON (second variant / first). */
  ratioKey: string
  flags: Map<string, string>
}

interface Phase {
  streaming: number
  failed: number
  /** Vendor connections the phase's legs opened (primary and tee; one per joined pair). */
  vendorSessions: number
  frames: number
  cpuMicros: number
  windowS: number
  vendorMessages: number
  vendorBytes: number
  /** Whole machine busy over the window, % of all cores: what else ran next to the bench. */
  machineBusy: number
}

const sum = (phases: Phase[], k: keyof Phase): number => phases.reduce((s, p) => s + p[k], 0)

/** Wait until the sink holds no connection (the gateway closed every vendor session of the phase). */
async function drained(sink: Sink): Promise<number> {
  const deadline = performance.now() + DRAIN_MS
  let s = await sink.ask('stats')
  while (s.open > 0 && performance.now() < deadline) {
    await sleep(200)
    s = await sink.ask('stats')
  }
  return s.open
}

async function phase(
  plan: AbPlan,
  v: Variant,
  url: string,
  token: string,
  firstIndex: number,
  pid: number,
  sink: Sink,
  seconds: number,
  warmup: number
): Promise<Phase> {
  const opened0 = (await sink.ask('stats')).opened
  const gen = new LoadGen(url, plan.legs, token, firstIndex, plan.perspectives)
  const conn = await gen.connect()
  if (conn.failed > 0) progress(`${plan.name}: ${v.key}: ${conn.failed} legs failed: ${gen.failures().join('; ')}`)
  await sleep(warmup * 1000)
  const s0: SinkStats = await sink.ask('stats')
  const m0 = machineCpu()
  const cpu0 = procCpu(pid).total
  const sent0 = gen.sent
  const t0 = performance.now()
  await sleep(seconds * 1000)
  const cpu = procCpu(pid).total - cpu0
  const frames = gen.sent - sent0
  const windowS = (performance.now() - t0) / 1000
  const machine = machineShare(m0, machineCpu())
  const s1 = await sink.ask('stats')
  await gen.close()
  const left = await drained(sink)
  if (left > 0) progress(`${plan.name}: ${v.key}: ${left} vendor sessions still open after ${DRAIN_MS / 1000} s`)
  const p: Phase = {
    streaming: conn.streaming,
    failed: conn.failed,
    vendorSessions: s0.opened - opened0,
    frames,
    cpuMicros: cpu,
    windowS,
    vendorMessages: s1.messages - s0.messages,
    vendorBytes: s1.bytes - s0.bytes,
    machineBusy: machine.busy
  }
  progress(
    `${plan.name}: ${v.key}: ${conn.streaming} legs, ${fmt(cpu / Math.max(1, frames), 2)} µs CPU per platform frame, machine ${fmt(machine.busy, 0)} % busy`
  )
  return p
}

function figures(phases: Phase[]): Record<string, unknown> {
  const frames = sum(phases, 'frames')
  return {
    microsPerFrame: round(sum(phases, 'cpuMicros') / frames),
    legs: phases[0]?.streaming ?? 0,
    failedLegs: sum(phases, 'failed'),
    vendorSessions: phases[0]?.vendorSessions ?? 0,
    platformFrames: frames,
    gatewayCpuSeconds: round(sum(phases, 'cpuMicros') / 1e6),
    vendorMessages: sum(phases, 'vendorMessages'),
    vendorBytes: sum(phases, 'vendorBytes'),
    vendorBytesPerPlatformFrame: round(sum(phases, 'vendorBytes') / frames),
    vendorMessagesPerPlatformFrame: round(sum(phases, 'vendorMessages') / frames),
    perRound: phases.map(p => ({
      microsPerFrame: round(p.cpuMicros / p.frames),
      frames: p.frames,
      machineBusyPercent: round(p.machineBusy, 1)
    }))
  }
}

export async function runAb(
  plan: AbPlan,
  gatewayConfig: Record<string, unknown> = {}
): Promise<Record<string, unknown>> {
  const seconds = numberFlag(plan.flags, 'seconds', 10, { min: 1, max: 600 })
  const warmup = numberFlag(plan.flags, 'warmup', 3, { min: 0, max: 600 })
  const rounds = numberFlag(plan.flags, 'rounds', 2, { integer: true, min: 1, max: 20 })
  const token = `bench-${plan.name}-${Date.now().toString(36)}`
  const load0 = loadavg()
  const sink = await Sink.start(0)
  const gw = await startGateway(sink.url, token, false, {
    routes: Object.fromEntries(plan.variants.map(v => [v.key, v.route])),
    extra: gatewayConfig
  })
  progress(
    `${plan.name}: gateway pid ${gw.pid}, sink pid ${sink.pid}; ${rounds} × (${plan.variants.map(v => v.key).join(', ')}), ${plan.legs} legs, ${warmup} + ${seconds} s each`
  )
  const results: Phase[][] = plan.variants.map(() => [])
  let n = 0
  for (let r = 0; r < rounds; r++) {
    for (const [i, v] of plan.variants.entries()) {
      const url = `ws://127.0.0.1:${gw.port}/audio/${v.key}`
      results[i].push(await phase(plan, v, url, token, n++ * plan.legs, gw.pid, sink, seconds, warmup))
    }
  }
  await stopChild(gw.child, 5000)
  await sink.stop()
  const load1 = loadavg()

  const [a, b] = results.map(figures)
  const ratio = (b.microsPerFrame as number) / (a.microsPerFrame as number)
  const rep = new Report(`${plan.title} (${machineLine()})`)
  for (const [i, v] of plan.variants.entries()) {
    const f = i === 0 ? a : b
    const byRound = (f.perRound as { microsPerFrame: number }[]).map(p => fmt(p.microsPerFrame, 2)).join(', ')
    rep.section(`${v.label}:`)
    rep.row('gateway CPU per platform frame', `${fmt(f.microsPerFrame as number, 2)} µs (by round: ${byRound})`)
    rep.row(
      'legs, vendor sessions, frames',
      `${fmtInt(f.legs as number)}, ${fmtInt(f.vendorSessions as number)}, ${fmtInt(f.platformFrames as number)} (${FRAME_BYTES} bytes, ${FRAME_MS} ms each)`
    )
    rep.row(
      'vendor received per platform frame',
      `${fmt(f.vendorBytesPerPlatformFrame as number, 1)} bytes in ${fmt(f.vendorMessagesPerPlatformFrame as number, 3)} WebSocket messages`
    )
  }
  rep.section('')
  rep.row(`${plan.variants[1].key} / ${plan.variants[0].key} (CPU per platform frame)`, fmt(ratio, 3))
  rep.row(
    'machine load average',
    `${load0.map(l => fmt(l, 2)).join(' ')} before, ${load1.map(l => fmt(l, 2)).join(' ')} after; not pinned`
  )
  rep.print()
  return {
    machine: machineLine(),
    seconds,
    warmup,
    rounds,
    [plan.variants[0].key]: a,
    [plan.variants[1].key]: b,
    [plan.ratioKey]: round(ratio),
    loadAverage: { before: load0.map(l => round(l, 2)), after: load1.map(l => round(l, 2)) }
  }
}
