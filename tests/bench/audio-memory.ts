/**
 * `npm run bench -- audio --memory [--legs 500,1000,2000] [--settle S (6)] [--replay-seconds S] [--mapping passthrough]
 *  [--finals-ms N]`
 *
 * What a leg costs in memory: one gateway, legs added in steps (each step's legs connect and stream at
 * real time, 50 frames/s × 160 B, to the local uWS sink), and after each step, once every leg has
 * streamed longer than its replay window (`--settle`, default 6 s: the ring is full), the gateway's RSS
 * (/proc), V8 heap used and external memory (ArrayBuffers: replay rings, queues) from /metrics after a
 * full GC (the bench gateway runs with --expose-gc and collects on SIGUSR2: tests/bench/guard.ts). Per
 * leg: (figure − figure before any leg) / legs, and the step's slope (its growth / the legs it added),
 * which leaves out what the process grows by once (V8's young generation, pools). Kernel socket buffers
 * are not in RSS. `--floor`: the same steps through the audio floor instead (tests/bench/audio-floor.ts:
 * uWS + `ws` + a 2 KiB coalescing buffer per leg, nothing else), what any uWS + `ws` proxy holds per leg.
 * Past what one core carries at real time (about 1,000 legs on a 2-core VM) the legs
 * fall behind and queue audio: the step says so (frames lost, added latency is not measured here).
 * `--finals-ms N` (with `--mapping deepgram`): the sink finalizes every N ms of each leg's audio
 * (Deepgram Results with `start`/`duration`, tests/bench/sink.ts), a vendor that finalizes promptly, so
 * each ring holds what is not yet final (issue 32) instead of its ceiling. Without it, or through
 * passthrough (the platform's interface says nothing of where a result is), the rings hold their ceiling.
 */
import { randomBytes } from 'node:crypto'
import {
  fmt,
  fmtInt,
  fmtKiB,
  fmtMiB,
  gatewayHeap,
  machineLine,
  progress,
  Report,
  round,
  rssBytes,
  Sink,
  sleep,
  stopChild,
  httpText,
  UsageError
} from './lib'
import { startAudioFloor } from './audio-floor'
import { LoadGen } from './loadgen'
import { type BenchMapping, startGateway } from './audio'

export const AUDIO_MEMORY_FLAGS = ['settle', 'replay-seconds', 'finals-ms']

/** The process measured: the bench gateway, or the floor. */
interface Measured {
  pid: number
  port: number
  memory: () => Promise<{ heapUsed: number; external: number } | null>
  stop: () => Promise<void>
}

interface Step {
  legs: number
  streaming: number
  rss: number
  heap: number
  external: number
  behindMs: number
}

/** Ask for a full GC (the bench gateway: SIGUSR2, guard.ts; the floor: its /memory), then read the memory. */
async function settledMemory(m: Measured): Promise<{ rss: number; heap: number; external: number }> {
  const h = await m.memory()
  return { rss: rssBytes(m.pid), heap: h?.heapUsed ?? Number.NaN, external: h?.external ?? Number.NaN }
}

async function gatewayMeasured(
  sinkUrl: string,
  token: string,
  mapping: BenchMapping,
  replaySeconds: number | null
): Promise<Measured> {
  const gw = await startGateway(sinkUrl, token, false, {
    mapping,
    nodeArgs: ['--expose-gc'],
    ...(replaySeconds === null ? {} : { extra: { audio: { replaySeconds } } })
  })
  return {
    pid: gw.pid,
    port: gw.port,
    memory: async () => {
      try {
        process.kill(gw.pid, 'SIGUSR2')
      } catch {
        // gone: the reads say so
      }
      await sleep(500)
      return await gatewayHeap(gw.metricsPort)
    },
    stop: async () => await stopChild(gw.child, 5000)
  }
}

async function floorMeasured(sinkUrl: string): Promise<Measured> {
  const f = await startAudioFloor(sinkUrl, 100, ['--expose-gc'])
  return {
    pid: f.pid,
    port: f.port,
    memory: async () => {
      // The floor collects and reads its heap inside this request: no wait needed.
      const text = await httpText(`http://127.0.0.1:${f.port}/memory`)
      return text === null ? null : (JSON.parse(text) as { heapUsed: number; external: number })
    },
    stop: f.stop
  }
}

export async function runAudioMemory(
  legsList: number[],
  settleSeconds: number,
  mapping: BenchMapping,
  /** audio.replaySeconds for the gateway (null: its default, sized from vendor liveness: 3.5 s). */
  replaySeconds: number | null = null,
  /** Measure the audio floor (uWS + ws) instead of the gateway. */
  floor = false,
  /** The sink finalizes every this many ms of a leg's audio (0: never; needs the deepgram mapping). */
  finalsMs = 0
): Promise<Record<string, unknown>> {
  if (finalsMs > 0 && (mapping !== 'deepgram' || floor))
    throw new UsageError('--finals-ms needs --mapping deepgram (the sink answers with Deepgram finals), and no --floor')
  const token = `bench-${randomBytes(12).toString('hex')}`
  const sink = await Sink.start(0, finalsMs)
  const gw = floor ? await floorMeasured(sink.url) : await gatewayMeasured(sink.url, token, mapping, replaySeconds)
  const gens: LoadGen[] = []
  const steps: Step[] = []
  try {
    await sleep(1000)
    const before = await settledMemory(gw)
    let total = 0
    for (const target of legsList) {
      const add = target - total
      if (add <= 0) continue
      progress(`audio --memory: adding ${add} legs (to ${target}), then ${settleSeconds} s of streaming`)
      // Disjoint leg indexes (contactIds): the same identity again would take the earlier leg's place.
      const gen = new LoadGen(`ws://127.0.0.1:${gw.port}/audio/bench`, add, token, total)
      gens.push(gen)
      // Two minutes to open them: on a loaded box 30 s leaves legs out of the step (it says how many stream).
      await gen.connect(100, 120_000)
      total = target
      await sleep(settleSeconds * 1000)
      const m = await settledMemory(gw)
      steps.push({
        legs: target,
        streaming: gens.reduce((s, g) => s + g.legs.filter(l => l.state === 'streaming').length, 0),
        rss: m.rss,
        heap: m.heap,
        external: m.external,
        behindMs: Math.max(...gens.map(g => g.maxLateMs))
      })
    }
    const r = new Report(
      floor
        ? 'audio --memory --floor: legs streaming at real time through the audio floor (uWS + ws, 2 KiB buffer per leg), memory after each step'
        : `audio --memory: legs streaming at real time through one gateway process (${mapping} mapping, replaySeconds ${replaySeconds ?? 'default'}, ${finalsMs > 0 ? `a final every ${finalsMs} ms of audio` : 'no finals'}), memory after each step`
    )
    r.row('machine', machineLine())
    r.row(
      'before any leg',
      `RSS ${fmtMiB(before.rss)}, V8 heap ${fmtMiB(before.heap)}, external ${fmtMiB(before.external)} (after a full GC)`
    )
    let prev = { legs: 0, ...before }
    for (const s of steps) {
      const per = (now: number, then: number, n: number): number => (now - then) / Math.max(1, n)
      r.section(`${fmtInt(s.legs)} legs (${fmtInt(s.streaming)} streaming)`)
      r.row(
        'per leg',
        `RSS ${fmtKiB(per(s.rss, before.rss, s.legs))}; V8 heap ${fmtKiB(per(s.heap, before.heap, s.legs))}; external ${fmtKiB(per(s.external, before.external, s.legs))}`
      )
      r.row(
        `slope from ${fmtInt(prev.legs)}`,
        `RSS ${fmtKiB(per(s.rss, prev.rss, s.legs - prev.legs))}; V8 heap ${fmtKiB(per(s.heap, prev.heap, s.legs - prev.legs))}; external ${fmtKiB(per(s.external, prev.external, s.legs - prev.legs))} per leg added`
      )
      r.row('total', `RSS ${fmtMiB(s.rss)}, V8 heap ${fmtMiB(s.heap)}, external ${fmtMiB(s.external)}`)
      if (s.behindMs > 100)
        r.row('NOTE', `the load generator fell ${fmt(s.behindMs, 0)} ms behind: the box is saturated at this count`)
      prev = { legs: s.legs, rss: s.rss, heap: s.heap, external: s.external }
    }
    r.print()
    return {
      machine: machineLine(),
      target: floor ? 'floor' : 'gateway',
      mapping,
      settleSeconds,
      replaySeconds,
      finalsMs,
      before: { rssBytes: before.rss, heapBytes: before.heap, externalBytes: before.external },
      steps: steps.map(s => ({
        legs: s.legs,
        streaming: s.streaming,
        rssBytes: s.rss,
        heapBytes: s.heap,
        externalBytes: s.external,
        rssPerLegBytes: round((s.rss - before.rss) / s.legs, 0),
        heapPerLegBytes: round((s.heap - before.heap) / s.legs, 0),
        externalPerLegBytes: round((s.external - before.external) / s.legs, 0)
      }))
    }
  } finally {
    for (const g of gens) g.stop()
    await Promise.all(gens.map(async g => await g.close()))
    await gw.stop()
    await sink.stop()
  }
}
