/**
 * The soak's bookkeeping, from the vendor replicas' sequenced-frame reports (which numbered frames of
 * which leg reached which session, when) and the platform's marks (how far each leg had counted at each
 * window boundary). Pure functions: no I/O.
 *
 * A frame is **delivered** when it reached a vendor session the gateway was still using. A run of frames
 * that reached a session only after a newer session of the same leg had been receiving for more than
 * STRANDED_MS is **stranded**: read late by a session the gateway had already left (a frozen vendor's
 * socket buffer, read after SIGCONT), so it counts as missing, not delivered. The **longest gap** of a
 * leg is the longest time with no delivered arrival (resolution: the emulator's run split, 250 ms).
 */
import type { SequenceRun } from '../../../gateway/tools/vendors/sequence'

export const STRANDED_MS = 1000

/** One vendor session as the bench keeps it (from any replica, any incarnation). */
export interface VendorSessionRecord {
  replica: string
  openedAt: number
  /** The leg (stream id of its frames); null for sessions with no audio (health probes). */
  stream: number | null
  runs: SequenceRun[]
}

/** Closed integer intervals [a, b], sorted and merged (adjacent ones joined). */
export type Intervals = [number, number][]

export function mergeIntervals(list: [number, number][], touching = 1): Intervals {
  const sorted = [...list].sort((x, y) => x[0] - y[0])
  const out: Intervals = []
  for (const [a, b] of sorted) {
    const last = out.at(-1)
    if (last !== undefined && a <= last[1] + touching) last[1] = Math.max(last[1], b)
    else out.push([a, b])
  }
  return out
}

/** Integers of the union in [lo, hi). */
export function countIn(iv: Intervals, lo: number, hi: number): number {
  let n = 0
  for (const [a, b] of iv) {
    const x = Math.max(a, lo)
    const y = Math.min(b, hi - 1)
    if (y >= x) n += y - x + 1
  }
  return n
}

export interface LegRecord {
  /** Sequence numbers delivered (merged). */
  delivered: Intervals
  /** Delivered or stranded (merged). */
  reached: Intervals
  /** Every non-stranded run as a sequence interval (duplicates are their overlap). */
  runs: [number, number][]
  /** Pauses between delivered arrivals: [start (last arrival before), end (next arrival)], ms. */
  gaps: [number, number][]
  /** Vendor sessions with audio of this leg, by replica. */
  sessions: Map<string, number>
  /** First delivered arrival (ms), for legs that had any. */
  firstAt: number
}

/** Per leg (index = stream id) from every session of every replica. */
export function legRecords(sessions: VendorSessionRecord[], legs: number): LegRecord[] {
  const byLeg: VendorSessionRecord[][] = Array.from({ length: legs }, () => [])
  for (const s of sessions) if (s.stream !== null && s.stream < legs && s.runs.length > 0) byLeg[s.stream].push(s)
  return byLeg.map(list => {
    const firstArrival = list.map(s => Math.min(...s.runs.map(r => r[2])))
    const delivered: [number, number][] = []
    const stranded: [number, number][] = []
    const times: [number, number][] = []
    const sessionsByReplica = new Map<string, number>()
    list.forEach((s, i) => {
      sessionsByReplica.set(s.replica, (sessionsByReplica.get(s.replica) ?? 0) + 1)
      for (const r of s.runs) {
        const left = list.some((o, j) => j !== i && o.openedAt > s.openedAt && firstArrival[j] < r[2] - STRANDED_MS)
        if (left) stranded.push([r[0], r[1]])
        else {
          delivered.push([r[0], r[1]])
          times.push([r[2], r[3]])
        }
      }
    })
    const arrivals = mergeIntervals(times, 0)
    const gaps: [number, number][] = []
    for (let i = 1; i < arrivals.length; i++) gaps.push([arrivals[i - 1][1], arrivals[i][0]])
    return {
      delivered: mergeIntervals(delivered),
      reached: mergeIntervals([...delivered, ...stranded]),
      runs: delivered,
      gaps,
      sessions: sessionsByReplica,
      firstAt: arrivals[0]?.[0] ?? Number.NaN
    }
  })
}

export interface WindowFrames {
  sent: number
  delivered: number
  /** Reached a vendor only in a session the gateway had left (see STRANDED_MS). */
  stranded: number
  /** Delivered more than once (replayed on a new session). */
  duplicates: number
  /** Due while the platform leg was down (never sent). */
  notSent: number
  /** Per leg: the longest gap (ms) that started in the window; 0 when none. */
  longestGap: number[]
}

/** Frames of the window between two marks (each leg's sequence numbers [lo, hi)), and its gaps by time. */
export function windowFrames(
  legs: LegRecord[],
  from: { at: number; seq: number[]; notSent: number[] },
  to: { at: number; seq: number[]; notSent: number[] }
): WindowFrames {
  const out: WindowFrames = { sent: 0, delivered: 0, stranded: 0, duplicates: 0, notSent: 0, longestGap: [] }
  legs.forEach((leg, i) => {
    const lo = from.seq[i]
    const hi = to.seq[i]
    out.sent += hi - lo
    out.notSent += to.notSent[i] - from.notSent[i]
    const d = countIn(leg.delivered, lo, hi)
    out.delivered += d
    out.stranded += countIn(leg.reached, lo, hi) - d
    let all = 0
    for (const r of leg.runs) all += countIn([r], lo, hi)
    out.duplicates += all - d
    let longest = 0
    for (const [a, b] of leg.gaps) if (a >= from.at && a < to.at && b - a > longest) longest = b - a
    out.longestGap.push(longest)
  })
  return out
}

/** Least-squares slope of y over x (per unit of x); NaN with fewer than 3 points. */
export function slope(points: [number, number][]): number {
  const n = points.length
  if (n < 3) return Number.NaN
  let sx = 0
  let sy = 0
  for (const [x, y] of points) {
    sx += x
    sy += y
  }
  const mx = sx / n
  const my = sy / n
  let num = 0
  let den = 0
  for (const [x, y] of points) {
    num += (x - mx) * (y - my)
    den += (x - mx) ** 2
  }
  return den === 0 ? Number.NaN : num / den
}

/** The q-quantile of values (nearest rank); NaN when empty. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN
  const s = [...values].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]
}

/** Frames a cut socket carried last: the second before each cut. */
export const BEFORE_CUT_FRAMES = 50

/**
 * Missing frames among the last BEFORE_CUT_FRAMES a leg sent before each cut (`seq`: its next sequence
 * number when it saw the close): audio in flight when the socket closed. Total, and the most at one cut.
 */
export function missingBeforeCuts(
  legs: LegRecord[],
  cuts: { leg: number; seq: number }[]
): { total: number; most: number } {
  let total = 0
  let most = 0
  for (const c of cuts) {
    const leg = legs[c.leg]
    if (leg === undefined) continue
    const lo = Math.max(0, c.seq - BEFORE_CUT_FRAMES)
    const n = c.seq - lo - countIn(leg.delivered, lo, c.seq)
    total += n
    if (n > most) most = n
  }
  return { total, most }
}
