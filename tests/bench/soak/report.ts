/**
 * The soak's report: one block per fault window, then the run (RSS and fd slopes per gateway process,
 * vendor streams per replica over time), then a SUMMARY line per window and the JSON figures.
 */
import { fmt, fmtInt, machineLine, Report, round } from '../lib'
import {
  missingBeforeCuts,
  quantile,
  slope,
  windowFrames,
  type LegRecord,
  type VendorSessionRecord,
  type WindowFrames
} from './account'
import type { WindowSpec } from './faults'
import type { GatewayInstance, VendorReplica } from './fleet'
import type { LegMark, Platform } from './platform'

export interface SoakWindow {
  spec: WindowSpec
  start: number
  end: number
  lengthS: number
  notes: string[]
}

export interface SoakResult {
  instances: number
  vendorCount: number
  legCount: number
  minutes: number
  front: string
  streaming: number
  runStart: number
  runEnd: number
  windows: (SoakWindow & { frames: WindowFrames })[]
  marks: LegMark[]
  platform: Platform
  gateways: GatewayInstance[]
  vendors: VendorReplica[]
  sessions: VendorSessionRecord[]
  legs: LegRecord[]
  load: [number, number][]
  allowUncounted: boolean
  /** CPU over the run (µs) of each part, the run's length, and the whole machine's busy share (%). */
  cpu: { seconds: number; machineBusy: number; gateways: number; vendors: number; front: number; platform: number }
}

const DROPPED = 'assist_gateway_audio_dropped_frames_total'
const FROM_PLATFORM = 'assist_gateway_audio_bytes_total{direction="from_platform"}'

/** Sum over every gateway process of how much a counter grew in [from, to]. */
function grew(gateways: GatewayInstance[], prefix: string, from: number, to: number): number {
  return gateways.reduce((s, g) => s + g.valueAt(prefix, to) - g.valueAt(prefix, from), 0)
}

function tally(items: string[]): string {
  const by = new Map<string, number>()
  for (const i of items) by.set(i, (by.get(i) ?? 0) + 1)
  return by.size === 0 ? '-' : [...by].map(([k, n]) => `${k} ×${n}`).join(', ')
}

/** A gap of 0 is one shorter than the emulator's run split: none was seen. */
const seconds = (ms: number): string =>
  !Number.isFinite(ms) ? 'n/a' : ms === 0 ? '< 0.25 s' : `${fmt(ms / 1000, 2)} s`
const millis = (ms: number): string => (Number.isFinite(ms) ? `${fmtInt(ms)} ms` : 'n/a')

function openAt(v: VendorReplica, at: number): number | null {
  let n: number | null = null
  for (const [t, c] of v.open) if (t <= at) n = c
  return n
}

export function printSoak(r: SoakResult): { json: Record<string, unknown>; code: number } {
  const clock = (t: number): string => {
    const s = Math.round((t - r.runStart) / 1000)
    return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`
  }
  const out: Record<string, unknown>[] = []
  let anyUncounted = false
  /** A valid leg answered ERROR in some window (issue 29: the failure budget refused reconnects after a drain). */
  let anyRefused = false
  const summary = new Report(`SUMMARY soak (${machineLine()})`)
  r.windows.forEach((w, i) => {
    const to = w.end
    const f = w.frames
    const counted = grew(r.gateways, DROPPED, w.start, to)
    const reasons = new Set(r.gateways.flatMap(g => g.seriesOf(DROPPED)))
    const byReason = [...reasons]
      .map(k => [/reason="([^"]*)"/.exec(k)?.[1] ?? k, grew(r.gateways, k, w.start, to)] as const)
      .filter(([, n]) => n !== 0)
    const read = grew(r.gateways, FROM_PLATFORM, w.start, to) / 160
    const missing = f.sent - f.delivered
    const atCuts = missingBeforeCuts(
      r.legs,
      r.platform.cuts.filter(c => c.at >= w.start && c.at < w.end)
    )
    const uncounted = missing - counted
    // Of the uncounted: frames the platform sent that no gateway read (in flight past a close frame: the
    // WebSocket layer discards them unread), and frames a gateway read that reached no vendor and no counter.
    const neverRead = Math.max(0, Math.round(f.sent - read))
    const readUncounted = Math.round(read - f.delivered - counted)
    if (uncounted > 0) anyUncounted = true
    const cuts = r.platform.cuts.filter(c => c.at >= w.start && c.at < w.end)
    const rec = r.platform.reconnects.filter(c => c.cutAt >= w.start && c.cutAt < w.end).map(c => c.ms)
    const failed = r.platform.failed.filter(c => c.at >= w.start && c.at < w.end)
    const gaps = f.longestGap
    const opened = r.vendors.map(
      v =>
        r.sessions.filter(s => s.replica === v.name && s.stream !== null && s.openedAt >= w.start && s.openedAt < w.end)
          .length
    )
    const openEnd = r.vendors.map(v => openAt(v, w.end))
    const loads = r.load.filter(([t]) => t >= w.start && t < w.end).map(([, l]) => l)
    const failovers = grew(r.gateways, 'assist_gateway_audio_failovers_total{result="ok"}', w.start, to)
    const failoversFailed = grew(r.gateways, 'assist_gateway_audio_failovers_total{result="failed"}', w.start, to)
    const reattach = grew(r.gateways, 'assist_gateway_audio_reattach_total', w.start, to)
    const reloadsOk = grew(r.gateways, 'assist_gateway_config_reloads_total{result="ok"}', w.start, to)
    const reloadsFailed = grew(r.gateways, 'assist_gateway_config_reloads_total{result="failed"}', w.start, to)

    const rep = new Report(
      `window ${i + 1}/${r.windows.length} ${w.spec.name}: ${w.spec.what}  [${clock(w.start)}–${clock(w.end)}, ${fmt(w.lengthS, 0)} s]`
    )
    for (const n of w.notes) rep.row('action', n)
    const twice = [...new Set(cuts.map(c => c.leg))].filter(l => cuts.filter(c => c.leg === l).length > 1).length
    rep.row(
      'legs cut',
      `${cuts.length} (close code / ERROR before it: ${tally(cuts.map(c => `${c.code}${c.error ? ` ${c.error}` : ''}`))}); legs cut more than once: ${twice}`
    )
    rep.row('failed reconnect attempts', `${failed.length} (${tally(failed.map(c => c.why))})`)
    const refused = failed.filter(c => c.refused)
    if (refused.length > 0) anyRefused = true
    rep.row('legs refused (ERROR to a valid init; must be 0)', String(refused.length))
    rep.row(
      'reconnect (cut → CONNECTED)',
      rec.length === 0
        ? '-'
        : `p50 ${millis(quantile(rec, 0.5))}, p95 ${millis(quantile(rec, 0.95))}, max ${millis(quantile(rec, 1))} (${rec.length}; the platform's 200 ms wait included)`
    )
    rep.row('frames sent', `${fmtInt(f.sent)} (due while a leg was down, never sent: ${fmtInt(f.notSent)})`)
    rep.row('read by the gateways', `${fmtInt(read)} (from_platform bytes / 160)`)
    rep.row(
      'delivered',
      `${fmtInt(f.delivered)} (${fmt((100 * f.delivered) / Math.max(1, f.sent), 3)} %); sent twice (replayed): ${fmtInt(f.duplicates)}`
    )
    rep.row(
      'missing (sent − delivered)',
      `${fmtInt(missing)}; of them stranded in a session the gateway had left: ${fmtInt(f.stranded)}`
    )
    if (atCuts.total > 0)
      rep.row(
        '  of them just before a cut',
        `${fmtInt(atCuts.total)} (in the last second each cut socket carried; at most ${atCuts.most} at one cut)`
      )
    rep.row(
      'counted lost by the gateways',
      `${fmtInt(counted)} (${byReason.map(([k, n]) => `${k} ${fmtInt(n)}`).join(', ') || '-'})`
    )
    rep.row(
      'UNCOUNTED (missing − counted)',
      `${fmtInt(uncounted)}${uncounted < 0 ? ' (negative: counted more than was missing)' : ''}`
    )
    rep.row('  sent, never read', `${fmtInt(neverRead)} (sent − read: in flight past a close frame)`)
    rep.row(
      '  read, not accounted',
      `${fmtInt(readUncounted)} (read − delivered − counted; ± scrape skew, exact for the run below)`
    )
    rep.row(
      'longest gap per leg',
      `p50 ${seconds(quantile(gaps, 0.5))}, p95 ${seconds(quantile(gaps, 0.95))}, max ${seconds(quantile(gaps, 1))}; legs with a gap > 1 s: ${gaps.filter(g => g > 1000).length}`
    )
    const hit = gaps.filter(g => g > 1000)
    if (hit.length > 0)
      rep.row(
        '  of the legs a fault stalled (> 1 s)',
        `p50 ${seconds(quantile(hit, 0.5))}, max ${seconds(quantile(hit, 1))}`
      )
    rep.row(
      'vendor streams',
      `open at the end ${r.vendors.map((v, j) => `${v.name} ${openEnd[j] ?? '?'}`).join(', ')}; sessions opened ${r.vendors.map((v, j) => `${v.name} ${opened[j]}`).join(', ')}`
    )
    rep.row(
      'gateways',
      `failovers ok ${fmtInt(failovers)}, failed ${fmtInt(failoversFailed)}; re-attaches ${fmtInt(reattach)}; config reloads ok ${fmtInt(reloadsOk)}, failed ${fmtInt(reloadsFailed)}`
    )
    const live = r.gateways.filter(g => g.startedAt < w.end && (g.exitedAt ?? Number.POSITIVE_INFINITY) > w.end)
    rep.row(
      'legs per instance at the end',
      live.map(g => `${g.name} ${fmtInt(g.valueAt('assist_gateway_audio_sessions_active', w.end))}`).join(', ')
    )
    const gone = r.gateways.filter(g => g.exitedAt !== null && g.exitedAt >= w.start && g.exitedAt < w.end)
    for (const g of gone) {
      const lastScrape = g.scrapes.at(-1)?.at ?? g.startedAt
      rep.row(
        `${g.name} exited`,
        `${fmt((g.exitedAt! - lastScrape) / 1000, 2)} s after its last scrape (counted since then: not seen)`
      )
    }
    rep.row(
      'load average (1 min)',
      loads.length === 0 ? 'n/a' : `${fmt(Math.min(...loads), 2)}–${fmt(Math.max(...loads), 2)}`
    )
    rep.print()
    console.log('')
    summary.row(
      w.spec.name,
      `cut ${cuts.length}, reconnect p95 ${millis(quantile(rec, 0.95))}; sent ${fmtInt(f.sent)}, missing ${fmtInt(missing)}, counted ${fmtInt(counted)}, uncounted ${fmtInt(uncounted)}; longest gap max ${seconds(quantile(gaps, 1))}`
    )
    out.push({
      name: w.spec.name,
      startS: round((w.start - r.runStart) / 1000, 1),
      lengthS: round(w.lengthS, 1),
      actions: w.notes,
      cuts: cuts.length,
      cutCodes: Object.fromEntries(
        [...new Set(cuts.map(c => c.code))].map(c => [c, cuts.filter(x => x.code === c).length])
      ),
      failedAttempts: failed.length,
      refused: refused.length,
      reconnectMs: { p50: round(quantile(rec, 0.5)), p95: round(quantile(rec, 0.95)), max: round(quantile(rec, 1)) },
      sent: f.sent,
      notSent: f.notSent,
      read: Math.round(read),
      delivered: f.delivered,
      duplicates: f.duplicates,
      stranded: f.stranded,
      missing,
      missingBeforeCuts: atCuts.total,
      countedLost: counted,
      countedByReason: Object.fromEntries(byReason),
      uncounted,
      neverRead,
      readUncounted,
      longestGapMs: {
        p50: round(quantile(gaps, 0.5)),
        p95: round(quantile(gaps, 0.95)),
        max: round(quantile(gaps, 1))
      },
      legsWithGapOver1s: gaps.filter(g => g > 1000).length,
      vendorOpenAtEnd: Object.fromEntries(r.vendors.map((v, j) => [v.name, openEnd[j]])),
      failovers,
      failoversFailed,
      reattach,
      reloadsOk,
      loadAverage: loads.length === 0 ? null : [Math.min(...loads), Math.max(...loads)]
    })
  })

  // ---- the run ----
  const run = new Report(
    `soak: ${r.instances} instances, ${r.vendorCount} vendor replicas, ${r.streaming}/${r.legCount} legs, ${fmt((r.runEnd - r.runStart) / 60000, 1)} min, front: ${r.front}`
  )
  run.section(
    'gateway processes (RSS and open fds sampled every 2 s; slope by least squares from each process’s first minute to its SIGTERM)'
  )
  const procs = r.gateways.map(g => {
    const s = g.samples.filter(x => x.at >= g.startedAt + 60_000 && x.at < (g.drainedAt ?? Number.POSITIVE_INFINITY))
    const rssSlope = slope(s.map(x => [(x.at - g.startedAt) / 60_000, x.rss / 2 ** 20]))
    const fdSlope = slope(s.map(x => [(x.at - g.startedAt) / 60_000, x.fds]))
    const first = g.samples[0]
    const lastS = g.samples.at(-1)
    run.row(
      `${g.name} (pid ${g.pid})`,
      `${fmt(((g.exitedAt ?? r.runEnd) - g.startedAt) / 60000, 1)} min; RSS ${fmt((first?.rss ?? NaN) / 2 ** 20, 0)} → ${fmt((lastS?.rss ?? NaN) / 2 ** 20, 0)} MiB, slope ${fmt(rssSlope, 2)} MiB/min; fds ${first?.fds ?? '?'} → ${lastS?.fds ?? '?'}, slope ${fmt(fdSlope, 2)} per min (${s.length} samples)`
    )
    return { name: g.name, rssMiBPerMin: round(rssSlope), fdsPerMin: round(fdSlope), samples: s.length }
  })
  // The whole run, exactly: every process's last scrape (a drained one's final, after its drain) against
  // every frame sent since the legs started. Per window, scrapes and marks are some ms apart (skew).
  const lastMark = r.marks.at(-1)!
  const zero = { at: 0, seq: lastMark.seq.map(() => 0), notSent: lastMark.notSent.map(() => 0) }
  const all = windowFrames(r.legs, zero, lastMark)
  const readAll = r.gateways.reduce((n, g) => n + g.valueAt(FROM_PLATFORM, r.runEnd), 0) / 160
  const countedAll = r.gateways.reduce((n, g) => n + g.valueAt(DROPPED, r.runEnd), 0)
  const runReadUncounted = Math.round(readAll - all.delivered - countedAll)
  const runNeverRead = Math.round(all.sent - readAll)
  run.section('every frame of the run (exact: each process’s last scrape, a drained one’s after its drain)')
  run.row(
    'sent / read / delivered',
    `${fmtInt(all.sent)} / ${fmtInt(readAll)} / ${fmtInt(all.delivered)}; counted lost ${fmtInt(countedAll)}`
  )
  run.row('READ, NOT ACCOUNTED', `${fmtInt(runReadUncounted)} (read − delivered − counted)`)
  run.row('sent, never read', `${fmtInt(runNeverRead)} (in flight past a close frame; the WebSocket layer drops them)`)
  run.section('vendor streams per replica (open sessions, sampled every 10 s; shown about every minute)')
  const timeline: string[] = []
  const step = Math.max(1, Math.round(r.vendors[0].open.length / Math.max(1, (r.runEnd - r.runStart) / 60_000)))
  for (let k = 0; k < r.vendors[0].open.length; k += step) {
    const t = r.vendors[0].open[k][0]
    timeline.push(`${clock(t)} ${r.vendors.map(v => openAt(v, t + 1000) ?? '?').join('/')}`)
  }
  run.row(r.vendors.map(v => v.name).join('/'), timeline.join('  '))
  const finals = r.vendors.map(v => v.open.at(-1)?.[1] ?? 0)
  const spread = Math.max(...finals) - Math.min(...finals)
  run.row('final spread', `${finals.join(' / ')} (max − min ${spread})`)
  const loads = r.load.map(([, l]) => l)
  run.row(
    'load average (1 min) over the run',
    `${fmt(Math.min(...loads), 2)}–${fmt(Math.max(...loads), 2)}, mean ${fmt(loads.reduce((a, b) => a + b, 0) / Math.max(1, loads.length), 2)}`
  )
  const share = (us: number): string => `${fmt((100 * us) / (r.cpu.seconds * 1e6), 0)} %`
  run.row(
    'CPU over the run (% of one core)',
    `gateways ${share(r.cpu.gateways)}, vendor replicas ${share(r.cpu.vendors)}, front ${share(r.cpu.front)}, ` +
      `platform legs and bench ${share(r.cpu.platform)}; the whole machine busy ${fmt(r.cpu.machineBusy, 0)} % of its cores`
  )
  run.row(
    'platform scheduler',
    `ticks later than 20 ms: ${r.platform.lateTicks}, latest ${fmt(r.platform.maxLateMs, 0)} ms`
  )
  run.row('vendor results received by the legs', fmtInt(r.platform.results))
  run.print()
  console.log('')
  const anyReadUncounted = runReadUncounted > 0
  summary.row(
    'run',
    `sent ${fmtInt(all.sent)}, read ${fmtInt(readAll)}, delivered ${fmtInt(all.delivered)}, counted ${fmtInt(countedAll)}; ` +
      `read and not accounted ${fmtInt(runReadUncounted)}, never read ${fmtInt(runNeverRead)}`
  )
  summary.row(
    'verdict',
    anyUncounted
      ? anyReadUncounted
        ? 'frames READ and not accounted for in some window'
        : 'every frame read was delivered or counted; uncounted frames are ones never read (in flight past a close)'
      : '0 uncounted frames in every window'
  )
  summary.row(
    'legs refused',
    anyRefused ? 'some valid legs were answered ERROR (see the windows)' : '0 in every window'
  )
  summary.print()
  const code = (anyReadUncounted && !r.allowUncounted) || anyRefused ? 1 : 0
  return {
    code,
    json: {
      machine: machineLine(),
      instances: r.instances,
      vendors: r.vendorCount,
      legs: r.legCount,
      streaming: r.streaming,
      minutes: round((r.runEnd - r.runStart) / 60000, 2),
      front: r.front,
      windows: out,
      processes: procs,
      vendorFinalOpen: finals,
      vendorSpread: spread,
      loadAverage: { min: Math.min(...loads), max: Math.max(...loads) },
      cpuPercentOfCore: {
        gateways: round((100 * r.cpu.gateways) / (r.cpu.seconds * 1e6), 1),
        vendors: round((100 * r.cpu.vendors) / (r.cpu.seconds * 1e6), 1),
        front: round((100 * r.cpu.front) / (r.cpu.seconds * 1e6), 1),
        platform: round((100 * r.cpu.platform) / (r.cpu.seconds * 1e6), 1)
      },
      machineBusyPercent: round(r.cpu.machineBusy, 1),
      uncounted: anyUncounted,
      run: {
        sent: all.sent,
        read: Math.round(readAll),
        delivered: all.delivered,
        counted: countedAll,
        readUncounted: runReadUncounted,
        neverRead: runNeverRead
      }
    }
  }
}
