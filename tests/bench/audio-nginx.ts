/**
 * `npm run bench -- audio --vs-nginx [--legs 500,1000] [--coalesce-ms 0,20,40,100] [--vendor-ping-seconds 1,0] [--floor]
 *                                    [--seconds 10] [--warmup 3] [--rounds 2] [--baseline-seconds 3]
 *                                    [--mapping passthrough|deepgram] [--no-pin]`
 *
 * The gateway next to nginx on the same sink, under the same load generator, in one run: for each leg
 * count, a baseline straight to the sink (for "added" latency), then A B A B rounds: the legs through the
 * gateway (passthrough route), then through nginx (one worker, WebSocket proxy_pass), each connected,
 * warmed up, measured and closed in turn. Per round: CPU per delivered frame (utime+stime from /proc of
 * the gateway, of nginx's master and worker), p50/p99 latency minus the baseline's (added), frames lost,
 * RSS per leg (RSS with the legs connected minus before, over the legs). Pinning as the audio bench: the
 * gateway and nginx on the last core, the load generator and the sink on the others. Without nginx it
 * says so and prints the gateway's absolute figures. `--coalesce-ms 0,20,40,100`: one gateway per `audio.coalesceMs`
 * value, each a target of its own in the same rounds (cost against added latency, to choose from);
 * `--vendor-ping-seconds 1,0` the same per `audio.vendorPingSeconds` (what finding a frozen vendor costs).
 * `--floor`: uWS + `ws` with the default coalescing and nothing else (audio-floor.ts), in the same rounds.
 */
import { randomBytes } from 'node:crypto'
import { type BenchMapping, BENCH_MAPPINGS, type Gateway, startGateway } from './audio'
import {
  exited,
  fmt,
  fmtInt,
  fmtKiB,
  machineLine,
  noisy,
  noisyMark,
  numberFlag,
  pinApart,
  procCpu,
  progress,
  Report,
  round,
  rssBytes,
  runqueueWaitMicros,
  Sink,
  sleep,
  stopChild,
  UsageError,
  type MeasuredTarget
} from './lib'
import { LoadGen } from './loadgen'
import { startAudioFloor } from './audio-floor'
import { findNginx, nginxPids, nginxVersion, startNginx } from './nginx'

export const AUDIO_NGINX_FLAGS = ['rounds', 'vendor-ping-seconds']
export const AUDIO_NGINX_BOOLEANS = ['vs-nginx', 'no-nginx', 'floor']

export interface Target extends MeasuredTarget {
  /** gateway (or `gateway coalesceMs N vendorPingSeconds P`, one per value of those flags), nginx, or the floor. */
  name: string
}

export interface Round {
  legs: number
  streaming: number
  frames: number
  /** Frames delivered per second of the measured window (the sink's clock). */
  framesPerSec: number
  /** How late the load generator's pacing ran at worst in the window (ms): past a frame (20 ms) it fell behind. */
  generatorLateMs: number
  cpuUsPerFrame: number
  cpuPct: number
  p50: number
  p99: number
  lost: number
  outOfOrder: number
  rssPerLeg: number
  rssWithLegs: number
  waitMsPerS: number
}

/** A bench gateway (audio.ts startGateway) as a target: its CPU, RSS and run-queue wait from /proc. */
export function gatewayTarget(name: string, gw: Gateway): Target {
  return {
    name,
    url: `ws://127.0.0.1:${gw.port}/audio/bench`,
    cpuUs: () => procCpu(gw.pid).total,
    rss: () => rssBytes(gw.pid),
    alive: () => !exited(gw.child),
    pids: () => [gw.pid]
  }
}

/** Connect `legs` legs to `t`, warm up, measure a window, stop, close, count what arrived. */
export async function measure(
  t: Target,
  sink: Sink,
  token: string,
  legs: number,
  warmup: number,
  seconds: number
): Promise<Round> {
  await sink.ask('reset-all')
  const rss0 = t.rss()
  const gen = new LoadGen(t.url, legs, token)
  const conn = await gen.connect()
  if (conn.failed > 0) progress(`audio: ${t.name}: ${conn.failed} legs failed: ${gen.failures().join('; ')}`)
  const rssWithLegs = t.rss()
  await sleep(warmup * 1000)
  gen.markWindow()
  const waitUs = (): number => t.pids().reduce((a, p) => a + (runqueueWaitMicros(p) || 0), 0)
  const c0 = t.cpuUs()
  const q0 = waitUs()
  const s0 = await sink.ask('reset-hist')
  await sleep(seconds * 1000)
  const cpu = t.cpuUs() - c0
  const q = waitUs() - q0
  const s1 = await sink.ask('stats')
  const generatorLateMs = gen.maxLateMs
  gen.stop()
  await sleep(1000)
  const final = await sink.ask('stats')
  await gen.close()
  await drained(sink)
  const frames = s1.received - s0.received
  const windowUs = (s1.at - s0.at) * 1000
  return {
    legs,
    streaming: conn.streaming,
    frames,
    framesPerSec: frames / ((s1.at - s0.at) / 1000),
    generatorLateMs,
    cpuUsPerFrame: cpu / Math.max(1, frames),
    cpuPct: (100 * cpu) / windowUs,
    p50: s1.latency.p50,
    p99: s1.latency.p99,
    lost: gen.sent - final.received,
    outOfOrder: final.outOfOrder,
    rssPerLeg: (rssWithLegs - rss0) / Math.max(1, conn.streaming),
    rssWithLegs,
    waitMsPerS: (q / ((s1.at - s0.at) * 1000)) * 1000
  }
}

/** Wait until the sink stops receiving (a backlog still in flight would count in the next round), ≤ 30 s. */
async function drained(sink: Sink): Promise<void> {
  let last = (await sink.ask('stats')).received
  for (let i = 0; i < 100; i++) {
    await sleep(300)
    const now = (await sink.ask('stats')).received
    if (now === last) return
    last = now
  }
  progress('audio: the sink still receives 30 s after the legs closed; the next round may count some of it')
}

/** Added latency is measured against this: `legs` legs straight to the sink, their p50 and p99 (ms). */
export async function baseline(
  sink: Sink,
  token: string,
  legs: number,
  seconds: number
): Promise<{ p50: number; p99: number }> {
  await sink.ask('reset-all')
  const gen = new LoadGen(sink.url, legs, token)
  await gen.connect()
  await sleep(1000)
  await sink.ask('reset-hist')
  await sleep(seconds * 1000)
  const s = await sink.ask('stats')
  await gen.close()
  await drained(sink)
  return { p50: s.latency.p50, p99: s.latency.p99 }
}

export function legList(raw: string | undefined, fallback = '500,1000'): number[] {
  const list = (raw ?? fallback).split(',').map(s => Number(s.trim()))
  if (list.length === 0 || list.some(n => !Number.isInteger(n) || n < 1 || n > 20000))
    throw new UsageError('--legs must be a comma-separated list of integers 1-20000 (e.g. 500,1000)')
  return list
}

export async function runAudioVsNginx(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const legsList = legList(flags.get('legs'))
  const seconds = numberFlag(flags, 'seconds', 10, { min: 1, max: 3600 })
  const warmup = numberFlag(flags, 'warmup', 3, { min: 0, max: 600 })
  const rounds = numberFlag(flags, 'rounds', 2, { integer: true, min: 1, max: 20 })
  const baselineSeconds = numberFlag(flags, 'baseline-seconds', 3, { min: 1, max: 600 })
  const mapping = (flags.get('mapping') ?? 'passthrough') as BenchMapping
  if (!BENCH_MAPPINGS.includes(mapping)) throw new UsageError(`--mapping must be one of ${BENCH_MAPPINGS.join(', ')}`)
  const nginxBin = flags.has('no-nginx') ? null : findNginx()
  if (nginxBin === null)
    progress(
      flags.has('no-nginx')
        ? 'audio: --no-nginx: the gateway alone'
        : 'audio: nginx is not installed: absolute figures only'
    )
  const token = `bench-${randomBytes(12).toString('hex')}`

  const sink = await Sink.start(0)
  // No re-attach grace: a round's closed legs end at once instead of waiting 30 s for their callers, so
  // the next round measures only its own legs (nginx has no re-attach either). Otherwise as `audio`.
  // --coalesce-ms 0,20,40,100 / --vendor-ping-seconds 1,0: one gateway per value (each combination),
  // side by side (its cost against its added latency, or against the time to find a frozen vendor).
  const list = (flag: string, max: number, example: string): (number | null)[] =>
    flags.has(flag)
      ? (flags.get(flag) ?? '').split(',').map(x => {
          const v = Number(x.trim())
          if (x.trim() === '' || !Number.isInteger(v) || v < 0 || v > max)
            throw new UsageError(`--${flag} must be a comma-separated list of integers 0-${max} (e.g. ${example})`)
          return v
        })
      : [null]
  const gws: { gw: Gateway; name: string }[] = []
  for (const c of list('coalesce-ms', 200, '0,20,40,100'))
    for (const p of list('vendor-ping-seconds', 60, '1,0')) {
      const audio = {
        reattachGraceSeconds: 0,
        ...(c === null ? {} : { coalesceMs: c }),
        ...(p === null ? {} : { vendorPingSeconds: p })
      }
      const name = `gateway${c === null ? '' : ` coalesceMs ${c}`}${p === null ? '' : ` vendorPingSeconds ${p}`}`
      gws.push({ name, gw: await startGateway(sink.url, token, false, { mapping, extra: { audio } }) })
    }
  const proxy =
    nginxBin === null
      ? null
      : await startNginx(
          nginxBin,
          'audio proxy',
          () => `    location / {
      proxy_pass http://127.0.0.1:${sink.port};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_read_timeout 3600s;
      proxy_send_timeout 3600s;
    }`
        )
  // --floor: uWS + ws with the default coalescing and nothing else (audio-floor.ts), the same rounds.
  const FLOOR = 'floor (uWS + ws)'
  const floor = flags.has('floor') ? await startAudioFloor(sink.url, 100) : null
  let pinning = 'off (--no-pin)'
  if (!flags.has('no-pin')) {
    const measured = [
      ...gws.map(g => g.gw.pid),
      ...(proxy === null ? [] : nginxPids(proxy)),
      ...(floor === null ? [] : [floor.pid])
    ]
    const p = pinApart(measured, [sink.pid, process.pid])
    pinning =
      p !== null
        ? `gateway${proxy !== null ? ' and nginx' : ''} on core ${p.measured}; load generator and sink on ${p.tools}`
        : 'not possible (one core, or taskset unavailable)'
  }
  progress(`audio: pinning: ${pinning}`)
  const targets: Target[] = gws.map(({ gw, name }) => gatewayTarget(name, gw))
  if (proxy !== null)
    targets.push({
      name: 'nginx',
      url: `ws://127.0.0.1:${proxy.port}/audio/bench`,
      cpuUs: proxy.cpuUs,
      rss: proxy.rss,
      alive: () => !exited(proxy.child),
      pids: () => nginxPids(proxy)
    })

  if (floor !== null)
    targets.push({ name: FLOOR, url: `ws://127.0.0.1:${floor.port}/audio/bench`, ...floor, pids: () => [floor.pid] })

  const results: { legs: number; base: { p50: number; p99: number }; by: Map<string, Round[]> }[] = []
  for (const legs of legsList) {
    progress(`audio: ${legs} legs: baseline straight to the sink, ${baselineSeconds} s`)
    const base = await baseline(sink, token, legs, baselineSeconds)
    const by = new Map<string, Round[]>(targets.map(t => [t.name, []]))
    for (let r = 0; r < rounds; r++) {
      for (const t of targets) {
        progress(
          `audio: ${legs} legs, round ${r + 1}/${rounds}: ${t.name} (warm-up ${warmup} s, ${seconds} s measured)`
        )
        by.get(t.name)!.push(await measure(t, sink, token, legs, warmup, seconds))
      }
    }
    results.push({ legs, base, by })
  }
  const alive = targets.map(t => t.alive())
  for (const { gw } of gws) await stopChild(gw.child, 5000)
  if (proxy !== null) await proxy.stop()
  if (floor !== null) await floor.stop()
  await sink.stop()

  // ---- report ----
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length
  const agg = (rs: Round[], base: { p50: number; p99: number }) => ({
    cpuUsPerFrame: mean(rs.map(r => r.cpuUsPerFrame)),
    cpuEach: rs.map(r => r.cpuUsPerFrame),
    cpuPct: mean(rs.map(r => r.cpuPct)),
    addedP50: mean(rs.map(r => r.p50)) - base.p50,
    addedP99: mean(rs.map(r => r.p99)) - base.p99,
    lost: rs.reduce((s, r) => s + r.lost, 0),
    outOfOrder: rs.reduce((s, r) => s + r.outOfOrder, 0),
    failedLegs: rs.reduce((s, r) => s + (r.legs - r.streaming), 0),
    rssPerLeg: rs[0].rssPerLeg,
    rssWithLegs: Math.max(...rs.map(r => r.rssWithLegs)),
    waitMsPerS: mean(rs.map(r => r.waitMsPerS))
  })
  const rep = new Report(
    `audio: legs × 50 frames/s × 160 B, gateway (${mapping} route) vs nginx (WebSocket proxy_pass, 1 worker), same uWS sink`
  )
  rep.row('nginx', nginxBin !== null ? nginxVersion(nginxBin) : 'not installed (or --no-nginx): no comparison')
  rep.row(
    'rounds',
    `${rounds} × (${targets.map(t => t.name).join(', ')}) per leg count; ${warmup} s warm-up, ${seconds} s measured`
  )
  rep.row('CPU pinning', pinning)
  const json: Record<string, unknown>[] = []
  const summary = new Report(`SUMMARY audio (${machineLine()})`)
  for (const res of results) {
    rep.section(
      `${res.legs} legs (baseline straight to the sink: p50 ${fmt(res.base.p50, 3)} ms, p99 ${fmt(res.base.p99, 3)} ms)`
    )
    const figs = targets.map(t => ({ name: t.name, ...agg(res.by.get(t.name)!, res.base) }))
    for (const f of figs) {
      rep.row(
        `${f.name} CPU per frame`,
        `${fmt(f.cpuUsPerFrame, 2)} µs (rounds ${f.cpuEach.map(x => fmt(x, 2)).join(', ')}); ${fmt(f.cpuPct, 1)} % of one core`
      )
      rep.row(`${f.name} waiting for a CPU`, `${fmt(f.waitMsPerS, 1)} ms/s in the run queue${noisyMark(f.waitMsPerS)}`)
      rep.row(`${f.name} added latency`, `p50 ${fmt(f.addedP50, 3)} ms, p99 ${fmt(f.addedP99, 3)} ms`)
      rep.row(
        `${f.name} loss`,
        `${fmtInt(f.lost)} frames lost, ${fmtInt(f.outOfOrder)} out of order, ${fmtInt(f.failedLegs)} legs failed`
      )
      rep.row(
        `${f.name} RSS`,
        `${fmtKiB(f.rssPerLeg)} per leg (first round); ${fmt(f.rssWithLegs / 2 ** 20, 1)} MiB with the legs`
      )
    }
    const gFigs = figs.filter(f => f.name !== 'nginx' && f.name !== FLOOR)
    const g = gFigs[0]
    const n = figs.find(f => f.name === 'nginx') ?? null
    const fl = figs.find(f => f.name === FLOOR) ?? null
    for (const x of gFigs)
      summary.row(
        `${res.legs} legs ${x.name}`,
        `${fmt(x.cpuUsPerFrame, 2)} µs CPU/frame, added p50 ${fmt(x.addedP50, 2)} ms p99 ${fmt(x.addedP99, 2)} ms, ${fmtKiB(x.rssPerLeg)}/leg, ${fmtInt(x.lost)} lost${noisy(x.waitMsPerS)}${n !== null ? `; ${fmt(x.cpuUsPerFrame / n.cpuUsPerFrame, 2)}× nginx` : ''}`
      )
    if (n !== null) {
      summary.row(
        `${res.legs} legs nginx`,
        `${fmt(n.cpuUsPerFrame, 2)} µs CPU/frame, added p50 ${fmt(n.addedP50, 2)} ms p99 ${fmt(n.addedP99, 2)} ms, ${fmtKiB(n.rssPerLeg)}/leg, ${fmtInt(n.lost)} lost${noisy(n.waitMsPerS)}`
      )
      // With --coalesce-ms or --vendor-ping-seconds each gateway row carries its own ratio.
      if (gFigs.length === 1)
        summary.row(
          `${res.legs} legs ratio`,
          `gateway CPU per frame = ${fmt(g.cpuUsPerFrame / n.cpuUsPerFrame, 2)}× nginx's (target ≤ 0.8×)`
        )
    }
    if (fl !== null)
      summary.row(
        `${res.legs} legs ${FLOOR}`,
        `${fmt(fl.cpuUsPerFrame, 2)} µs CPU/frame, ${fmtInt(fl.lost)} lost${noisy(fl.waitMsPerS)}${n !== null ? `; ${fmt(fl.cpuUsPerFrame / n.cpuUsPerFrame, 2)}× nginx` : ''}; the gateway = ${fmt(g.cpuUsPerFrame / fl.cpuUsPerFrame, 2)}× the floor (+${fmt(g.cpuUsPerFrame - fl.cpuUsPerFrame, 2)} µs)`
      )
    const js = (f: (typeof figs)[number]): Record<string, unknown> => ({
      cpuUsPerFrame: round(f.cpuUsPerFrame),
      cpuUsPerFrameRounds: f.cpuEach.map(x => round(x)),
      cpuPercent: round(f.cpuPct, 1),
      addedLatencyMs: { p50: round(f.addedP50), p99: round(f.addedP99) },
      lostFrames: f.lost,
      outOfOrder: f.outOfOrder,
      failedLegs: f.failedLegs,
      rssPerLegBytes: Math.round(f.rssPerLeg),
      runqueueWaitMsPerS: round(f.waitMsPerS, 1)
    })
    json.push({
      legs: res.legs,
      baselineLatencyMs: { p50: round(res.base.p50), p99: round(res.base.p99) },
      gateway: js(g),
      ...(gFigs.length > 1 ? { byVariant: Object.fromEntries(gws.map((x, i) => [x.name, js(gFigs[i])])) } : {}),
      nginx: n === null ? null : js(n),
      floor: fl === null ? null : js(fl),
      ratioCpuPerFrame: n === null ? null : round(g.cpuUsPerFrame / n.cpuUsPerFrame)
    })
  }
  targets.forEach((t, i) => {
    if (!alive[i]) rep.row('WARNING', `${t.name} exited during the run`)
  })
  if (nginxBin === null) summary.row('nginx', 'not installed: no ratio')
  rep.print()
  console.log('')
  summary.print()
  return { machine: machineLine(), mapping, rounds, seconds, warmup, pinning, byLegs: json }
}
