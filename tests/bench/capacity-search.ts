/**
 * The capacity bench's decisions (capacity.ts), apart from any process: whether a step passes, which
 * leg count to try next, which text run is the figure. Unit-tested in tests/unit/bench.
 */
import { FRAME_MS } from './lib'

/** What one audio step measured (audio-nginx.ts `Round`, with the added p99 against its baseline). */
export interface AudioStep {
  legs: number
  streaming: number
  /** p99 added latency, ms (through the gateway minus straight to the sink). */
  addedP99: number
  lost: number
  framesPerSec: number
}

/** Why `s` fails the real-time bound (empty: it passes): p99 added ≤ boundMs, no loss, every leg streaming, ≥ 99 % delivered. */
export function audioFailures(s: AudioStep, boundMs: number): string[] {
  const why: string[] = []
  if (s.streaming < s.legs) why.push(`${s.legs - s.streaming} legs not streaming`)
  if (!(s.addedP99 <= boundMs)) why.push(`p99 added > ${boundMs} ms`)
  if (s.lost !== 0) why.push(`${s.lost} frames lost`)
  const expected = (s.legs * 1000) / FRAME_MS
  if (!(s.framesPerSec >= 0.99 * expected)) why.push(`delivered < 99 % of ${expected}/s`)
  return why
}

export interface SearchOptions {
  /** Leg counts go up by this (the first step is `step`) until a step fails. */
  step: number
  /** Bisection stops when the lowest failing count is within this of the highest passing one. */
  resolution: number
  maxLegs: number
}

/** The highest passing count below the lowest failing one (0 when none passed), and that failing one. */
function bounds(tried: { legs: number; pass: boolean }[]): { lo: number; hi: number } {
  const hi = Math.min(Infinity, ...tried.filter(t => !t.pass).map(t => t.legs))
  const lo = Math.max(0, ...tried.filter(t => t.pass && t.legs < hi).map(t => t.legs))
  return { lo, hi }
}

/** The most legs that passed (0 when none did): the search's answer. */
export function capacityOf(tried: { legs: number; pass: boolean }[]): number {
  return bounds(tried).lo
}

/**
 * The next leg count to try, or null when the search is over: up by `step` while every step passes (to
 * `maxLegs` at most), then halfway between the highest pass and the lowest fail (on a multiple of 10
 * when the gap is wide) until they are within `resolution`.
 */
export function nextLegs(tried: { legs: number; pass: boolean }[], o: SearchOptions): number | null {
  const { lo, hi } = bounds(tried)
  if (hi === Infinity) return lo >= o.maxLegs ? null : Math.min(lo + o.step, o.maxLegs)
  if (hi - lo <= o.resolution) return null
  const mid = hi - lo > 40 ? Math.round((lo + hi) / 20) * 10 : Math.floor((lo + hi) / 2)
  return mid > lo && mid < hi ? mid : Math.floor((lo + hi) / 2)
}

/** One wrk run of the text ladder. */
export interface TextRun {
  connections: number
  rps: number
  /** ms */
  p99: number
  errors: number
}

export function textPasses(r: TextRun, boundMs: number): boolean {
  return r.p99 <= boundMs && r.errors === 0
}

/** The run with the most requests per second among those within the bound, or null. */
export function bestText<T extends TextRun>(runs: T[], boundMs: number): T | null {
  let best: T | null = null
  for (const r of runs) if (textPasses(r, boundMs) && (best === null || r.rps > best.rps)) best = r
  return best
}

/** More connections only queue more (a closed loop): the ladder stops after two failing runs in a row. */
export function textLadderOver(runs: TextRun[], boundMs: number): boolean {
  return runs.length >= 2 && runs.slice(-2).every(r => !textPasses(r, boundMs))
}
