/**
 * `npm run bench -- capacity [--seconds S (8)] [--warmup S (3)] [--baseline-seconds S (3)] [--step N (250)]
 *   [--resolution N (100)] [--max-legs N (5000)] [--coalesce-ms N] [--connections 1,2,4,...,256]
 *   [--only audio|text] [--no-pin]`
 *
 * What one gateway process carries (issue 24): the most legs at real time with p99 added latency
 * ≤ audio.coalesceMs + 10 ms and no loss, and the most text requests per second at p99 ≤ 20 ms, with
 * the machine and date.
 *
 * Audio: one gateway process (GATEWAY_WORKERS=1, passthrough route, no re-attach grace so a step's
 * closed legs end at once; `--coalesce-ms`: its audio.coalesceMs, else the schema's default) for the
 * whole search, pinned as the audio bench pins it. Each step is audio-nginx.ts's baseline (the legs
 * straight to the sink) and measure (the legs through the gateway, `--warmup`, then `--seconds`
 * measured, then closed). A step passes with every leg streaming, p99 added ≤ the bound, 0 frames lost
 * and ≥ 99 % of legs × 50 frames/s delivered. Leg counts go up by `--step` until one fails, then
 * bisect between the last pass and the first fail down to `--resolution` (capacity-search.ts).
 *
 * Text: the text bench's gateway (credential checked, schema validated, passthrough mapping) in front
 * of its upstream (nginx `return 200`, or the vendor emulator without nginx); wrk has no fixed request
 * rate (Debian's 4.1: no -R), so the load is a closed loop over `--connections` counts, each for
 * `--seconds`: the figure is the most req/s among the runs with p99 ≤ 20 ms and no errors; the ladder
 * stops after two failing runs in a row. Without wrk it says so and skips text.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway } from './audio'
import { baseline, gatewayTarget, measure, type Round } from './audio-nginx'
import {
  audioFailures,
  bestText,
  capacityOf,
  nextLegs,
  type SearchOptions,
  type TextRun,
  textLadderOver,
  textPasses
} from './capacity-search'
import {
  FRAME_MS,
  fmt,
  fmtInt,
  machineLine,
  noisy,
  numberFlag,
  onExit,
  configSchema,
  pinApart,
  progress,
  round,
  Sink,
  stopChild,
  waitCell,
  UsageError
} from './lib'
import { findNginx } from './nginx'
import { BODY, childTarget, measureRound, startTextGateway, startTextUpstream } from './text-nginx'
import { findWrk, runWrk, wrkScript } from './wrk'

export const CAPACITY_FLAGS = [
  'seconds',
  'warmup',
  'baseline-seconds',
  'step',
  'resolution',
  'max-legs',
  'coalesce-ms',
  'connections',
  'only'
]
export const CAPACITY_BOOLEANS = ['no-pin']

/** Audio's bound is the coalescing wait plus this; text's is fixed. */
const AUDIO_SLACK_MS = 10
const TEXT_BOUND_MS = 20

/** audio.coalesceMs when the config leaves it out: the schema's default (the loader fills it in). */
function defaultCoalesceMs(): number {
  return configSchema().properties.audio.properties?.coalesceMs.default as number
}

/** A markdown table row (the report's tables paste into docs as they are). */
function tableRow(cells: string[]): string {
  return `| ${cells.join(' | ')} |`
}

function tableHead(cells: string[]): void {
  console.log(tableRow(cells))
  console.log(tableRow(cells.map(() => '---')))
}

/** Pin the gateway apart from the tools unless --no-pin: how (for the report), and the tools' cores (for wrk). */
function pinGateway(
  noPin: boolean,
  gw: number,
  tools: number[],
  what: string
): { pinning: string; tools: string | null } {
  if (noPin) return { pinning: 'off (--no-pin)', tools: null }
  const p = pinApart([gw], tools)
  if (p === null) return { pinning: 'not possible (one core, or taskset unavailable)', tools: null }
  return { pinning: `gateway on core ${p.measured}; ${what} on ${p.tools}`, tools: p.tools }
}

type AudioStepResult = Round & { addedP50: number; addedP99: number; baseP99: number; pass: boolean; why: string[] }

interface AudioCapacity {
  coalesceMs: number
  boundMs: number
  pinning: string
  legs: number
  at: AudioStepResult | null
  steps: AudioStepResult[]
}

async function audioCapacity(o: {
  coalesceMs: number
  search: SearchOptions
  seconds: number
  warmup: number
  baselineSeconds: number
  noPin: boolean
}): Promise<AudioCapacity> {
  const boundMs = o.coalesceMs + AUDIO_SLACK_MS
  const token = `bench-${randomBytes(12).toString('hex')}`
  const sink = await Sink.start(0)
  const gw = await startGateway(sink.url, token, false, {
    mapping: 'passthrough',
    extra: { audio: { reattachGraceSeconds: 0, coalesceMs: o.coalesceMs } }
  })
  const { pinning } = pinGateway(o.noPin, gw.pid, [sink.pid, process.pid], 'load generator and sink')
  const target = gatewayTarget('gateway', gw)
  const steps: AudioStepResult[] = []
  console.log(
    `\naudio: legs × 50 frames/s × 160 B through one gateway process (passthrough, audio.coalesceMs ${o.coalesceMs}); pass: every leg streaming, p99 added ≤ ${boundMs} ms, 0 lost, ≥ 99 % delivered; ${o.warmup} s warm-up, ${o.seconds} s measured; ${pinning}\n`
  )
  tableHead([
    'legs',
    'streaming',
    'baseline p99',
    'added p50',
    'added p99',
    'lost',
    'delivered/s (of expected)',
    'gateway CPU',
    'run-queue wait',
    'generator late',
    'verdict'
  ])
  try {
    for (let legs = nextLegs(steps, o.search); legs !== null; legs = nextLegs(steps, o.search)) {
      progress(`capacity: ${legs} legs: baseline straight to the sink ${o.baselineSeconds} s, then through the gateway`)
      const base = await baseline(sink, token, legs, o.baselineSeconds)
      const r = await measure(target, sink, token, legs, o.warmup, o.seconds)
      const added = { addedP50: r.p50 - base.p50, addedP99: r.p99 - base.p99 }
      const why = audioFailures({ ...r, ...added }, boundMs)
      const alive = target.alive()
      if (!alive) why.push('the gateway exited')
      const step = { ...r, ...added, baseP99: base.p99, pass: why.length === 0, why }
      steps.push(step)
      const expected = (legs * 1000) / FRAME_MS
      console.log(
        tableRow([
          fmtInt(legs),
          fmtInt(r.streaming),
          `${fmt(base.p99, 1)} ms`,
          `${fmt(step.addedP50, 1)} ms`,
          `${fmt(step.addedP99, 1)} ms`,
          fmtInt(r.lost),
          `${fmtInt(r.framesPerSec)} (${fmt((100 * r.framesPerSec) / expected, 1)} %)`,
          `${fmt(r.cpuPct, 0)} %`,
          waitCell(r.waitMsPerS),
          `${fmt(r.generatorLateMs, 0)} ms`,
          step.pass ? 'pass' : `FAIL: ${why.join(', ')}`
        ])
      )
      if (!alive) break
    }
  } finally {
    await stopChild(gw.child, 5000)
    await sink.stop()
  }
  const legs = capacityOf(steps)
  return { coalesceMs: o.coalesceMs, boundMs, pinning, legs, at: steps.find(s => s.legs === legs) ?? null, steps }
}

type TextRunResult = TextRun & { p50: number; cpuPct: number; cpuUsPerReq: number; waitMsPerS: number }

interface TextCapacity {
  upstream: string
  pinning: string
  at: TextRunResult | null
  runs: TextRunResult[]
}

async function textCapacity(o: {
  connections: number[]
  seconds: number
  warmup: number
  noPin: boolean
}): Promise<TextCapacity | null> {
  const wrkBin = findWrk()
  if (wrkBin === null) {
    progress('capacity: wrk is not installed (apt-get install wrk): text skipped')
    return null
  }
  const dir = mkdtempSync(join(tmpdir(), 'assist-gateway-capacity-'))
  onExit(() => rmSync(dir, { recursive: true, force: true }))
  const token = `bench-${randomBytes(12).toString('hex')}`
  const upstream = await startTextUpstream(findNginx(), 'passthrough')
  const runs: TextRunResult[] = []
  try {
    const { child: gw, port } = await startTextGateway(dir, 'gateway', {
      mapping: 'passthrough',
      upstreamUrl: upstream.url,
      token
    })
    const { pinning, tools } = pinGateway(o.noPin, gw.pid, [...upstream.pids, process.pid], 'wrk and upstream')
    const prefix = tools === null ? [] : ['taskset', '-c', tools]
    const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` }
    const script = wrkScript(dir, 'text', headers, BODY)
    const target = childTarget('gateway', gw, `http://127.0.0.1:${port}/text/bench`)
    const wrk = (connections: number) => async (t: typeof target, seconds: number) =>
      await runWrk(wrkBin, t.url, script, { connections, threads: 1, seconds: Math.round(seconds), prefix })
    console.log(
      `\ntext: POST /text/bench through one gateway process (credential checked, schema validated, passthrough) to ${upstream.what}; wrk -t1 closed loop per connection count, ${o.seconds} s each; pass: p99 ≤ ${TEXT_BOUND_MS} ms, 0 errors; ${pinning}\n`
    )
    if (o.warmup > 0) await wrk(16)(target, o.warmup)
    tableHead([
      'connections',
      'req/s',
      'p50',
      'p99',
      'errors',
      'gateway CPU',
      'CPU per request',
      'run-queue wait',
      'verdict'
    ])
    for (const connections of o.connections) {
      progress(`capacity: text, ${connections} connections, ${o.seconds} s`)
      const r = await measureRound(target, wrk(connections), o.seconds)
      const run = {
        connections,
        rps: r.rps,
        p50: r.w.p50,
        p99: r.w.p99,
        errors: r.w.non2xx + r.w.socketErrors,
        cpuPct: r.cpuPct,
        cpuUsPerReq: r.cpuUsPerReq,
        waitMsPerS: r.waitMsPerS
      }
      runs.push(run)
      console.log(
        tableRow([
          String(connections),
          fmtInt(run.rps),
          `${fmt(run.p50, 2)} ms`,
          `${fmt(run.p99, 2)} ms`,
          fmtInt(run.errors),
          `${fmt(run.cpuPct, 0)} %`,
          `${fmt(run.cpuUsPerReq, 1)} µs`,
          waitCell(run.waitMsPerS),
          textPasses(run, TEXT_BOUND_MS) ? 'pass' : 'FAIL'
        ])
      )
      if (!target.alive() || textLadderOver(runs, TEXT_BOUND_MS)) break
    }
    await stopChild(gw.child, 10_000)
    return { upstream: upstream.what, pinning, at: bestText(runs, TEXT_BOUND_MS), runs }
  } finally {
    await upstream.stop()
  }
}

function connectionList(raw: string | undefined): number[] {
  const list = (raw ?? '1,2,4,8,16,32,64,128,256').split(',').map(s => Number(s.trim()))
  if (list.some(n => !Number.isInteger(n) || n < 1 || n > 10000))
    throw new UsageError('--connections must be a comma-separated list of integers 1-10000 (e.g. 1,2,4,8)')
  return list
}

function audioSummary(a: AudioCapacity, maxLegs: number): string {
  if (a.at === null) {
    const first = a.steps[0]
    return `audio: no step held real time within ${a.boundMs} ms (${fmtInt(first?.legs ?? 0)} legs: ${first?.why.join(', ') ?? 'not run'})`
  }
  const atLeast = a.legs >= maxLegs
  return `audio ${atLeast ? 'at least ' : ''}${fmtInt(a.legs)} legs per process (p99 added ${fmt(a.at.addedP99, 1)} ms ≤ ${a.boundMs} ms, 0 lost${noisy(a.at.waitMsPerS)}${atLeast ? `; --max-legs ${maxLegs} reached` : ''})`
}

function textSummary(t: TextCapacity | null): string {
  if (t === null) return 'text skipped (wrk is not installed)'
  if (t.at === null) return `text: no run within p99 ≤ ${TEXT_BOUND_MS} ms and 0 errors`
  return `text ${fmtInt(t.at.rps)} req/s per process (p99 ${fmt(t.at.p99, 1)} ms ≤ ${TEXT_BOUND_MS} ms${noisy(t.at.waitMsPerS)})`
}

function stepJson(s: AudioStepResult): Record<string, unknown> {
  return {
    legs: s.legs,
    streaming: s.streaming,
    baselineP99Ms: round(s.baseP99),
    addedLatencyMs: { p50: round(s.addedP50), p99: round(s.addedP99) },
    lostFrames: s.lost,
    outOfOrder: s.outOfOrder,
    framesPerSecDelivered: round(s.framesPerSec, 1),
    gatewayCpuPercent: round(s.cpuPct, 1),
    cpuUsPerFrame: round(s.cpuUsPerFrame),
    runqueueWaitMsPerS: round(s.waitMsPerS, 1),
    generatorLateMs: round(s.generatorLateMs, 1),
    pass: s.pass,
    why: s.why
  }
}

function runJson(r: TextRunResult): Record<string, unknown> {
  return {
    connections: r.connections,
    requestsPerSecond: round(r.rps, 1),
    latencyMs: { p50: round(r.p50), p99: round(r.p99) },
    errors: r.errors,
    gatewayCpuPercent: round(r.cpuPct, 1),
    cpuUsPerRequest: round(r.cpuUsPerReq, 1),
    runqueueWaitMsPerS: round(r.waitMsPerS, 1)
  }
}

export async function runCapacity(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const seconds = numberFlag(flags, 'seconds', 8, { min: 1, max: 600 })
  const warmup = numberFlag(flags, 'warmup', 3, { min: 0, max: 600 })
  const baselineSeconds = numberFlag(flags, 'baseline-seconds', 3, { min: 1, max: 600 })
  const search: SearchOptions = {
    step: numberFlag(flags, 'step', 250, { integer: true, min: 1, max: 20000 }),
    resolution: numberFlag(flags, 'resolution', 100, { integer: true, min: 1, max: 20000 }),
    maxLegs: numberFlag(flags, 'max-legs', 5000, { integer: true, min: 1, max: 20000 })
  }
  const coalesceMs = flags.has('coalesce-ms')
    ? numberFlag(flags, 'coalesce-ms', 0, { integer: true, min: 0, max: 200 })
    : defaultCoalesceMs()
  const connections = connectionList(flags.get('connections'))
  const only = flags.get('only')
  if (only !== undefined && only !== 'audio' && only !== 'text') throw new UsageError('--only must be audio or text')
  const noPin = flags.has('no-pin')
  const startedAt = new Date().toISOString()
  console.log(`capacity: ${machineLine()}; started ${startedAt}`)

  const audio =
    only === 'text' ? null : await audioCapacity({ coalesceMs, search, seconds, warmup, baselineSeconds, noPin })
  const text = only === 'audio' ? null : await textCapacity({ connections, seconds, warmup, noPin })

  console.log(`\nSUMMARY capacity (${machineLine()}; started ${startedAt})`)
  const parts = [
    ...(audio === null ? [] : [audioSummary(audio, search.maxLegs)]),
    ...(only === 'audio' ? [] : [textSummary(text)])
  ]
  console.log(`capacity: ${parts.join('; ')}`)
  return {
    machine: machineLine(),
    startedAt,
    audio:
      audio === null
        ? null
        : {
            mapping: 'passthrough',
            coalesceMs: audio.coalesceMs,
            boundMs: audio.boundMs,
            seconds,
            warmup,
            baselineSeconds,
            ...search,
            pinning: audio.pinning,
            legs: audio.legs,
            at: audio.at === null ? null : stepJson(audio.at),
            steps: audio.steps.map(stepJson)
          },
    text:
      text === null
        ? only === 'audio'
          ? null
          : { skipped: 'wrk is not installed' }
        : {
            boundMs: TEXT_BOUND_MS,
            seconds,
            upstream: text.upstream,
            pinning: text.pinning,
            requestsPerSecond: text.at === null ? null : round(text.at.rps, 1),
            at: text.at === null ? null : runJson(text.at),
            runs: text.runs.map(runJson)
          }
  }
}
