/**
 * `npm run bench -- failover [--legs N (500)] [--warmup S (3)] [--after S (5)]`: N legs stream through the
 * gateway to two sink replicas; one replica is killed (SIGKILL: its sockets die without a close
 * frame). Prints, over the legs that were on it, the time from the kill to the first frame on the
 * surviving replica (p50/p99/max), and frames lost: the gateway's own count of undelivered audio, gaps
 * inside the replacement streams, and any gap between what the dead replica had and the first replayed
 * frame. Figures only; never passes or fails.
 */
import { randomBytes } from 'node:crypto'
import { startGateway } from './audio'
import {
  BACKLOG_WINDOW_MS,
  fmt,
  fmtInt,
  numberFlag,
  progress,
  Report,
  round,
  Sink,
  sleep,
  stopChild,
  nowMs
} from './lib'
import { LoadGen } from './loadgen'

export const FAILOVER_FLAGS = ['legs', 'warmup', 'after']

/** audio.replayRate of the bench gateway (× real time). */
const REPLAY_RATE = 4

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}

async function metric(metricsPort: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
  let sum = 0
  for (const line of text.split('\n')) if (line.startsWith(name)) sum += Number(line.slice(line.lastIndexOf(' ') + 1))
  return sum
}

export async function runFailover(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const legs = numberFlag(flags, 'legs', 500, { integer: true, min: 2, max: 20000 })
  const warmup = numberFlag(flags, 'warmup', 3, { min: 1, max: 600 })
  const after = numberFlag(flags, 'after', 5, { min: 2, max: 600 })
  const token = `bench-${randomBytes(12).toString('hex')}`
  progress('failover: starting two sinks and the gateway')
  const a = await Sink.start(0)
  const b = await Sink.start(0)
  const gw = await startGateway(a.url, token, false, {
    upstreams: [
      { name: 'a', audio: a.url },
      { name: 'b', audio: b.url }
    ],
    // Pings every second: the sinks never send a message, so a pong is their only sign of life.
    extra: {
      audio: {
        replaySeconds: 1,
        replayRate: REPLAY_RATE,
        vendorPingSeconds: 1,
        failoverTimeoutSeconds: 30,
        reattachGraceSeconds: 0
      }
    }
  })
  const gen = new LoadGen(`ws://127.0.0.1:${gw.port}/audio/bench`, legs, token)
  const conn = await gen.connect()
  progress(`failover: ${conn.streaming} legs streaming; warm-up ${warmup} s`)
  await sleep(warmup * 1000)
  await a.ask('mark')
  const beforeKill = await b.ask('stats')
  const onB = beforeKill.perLeg.map((n, leg) => [leg, n]).filter(([, n]) => n > 0)
  const killAt = nowMs()
  b.child.kill('SIGKILL')
  progress(`failover: killed replica b (${onB.length} legs on it); streaming ${after} s more`)
  await sleep(after * 1000)
  const sentPerLeg = gen.legs.map(l => l.sent)
  gen.stop()
  await sleep(1000)
  const final = await a.ask('stats')
  const droppedByGateway = await metric(gw.metricsPort, 'assist_gateway_audio_dropped_frames_total')
  const unconfirmed = await metric(
    gw.metricsPort,
    'assist_gateway_audio_dropped_frames_total{route="bench",reason="failover_unreplayed"}'
  )
  const failovers = await metric(gw.metricsPort, 'assist_gateway_audio_failovers_total{route="bench",result="ok"}')
  await gen.close()
  await stopChild(gw.child, 5000)
  await a.stop()

  // Per failed-over leg: its replacement connection on a.
  const replacement = new Map<number, number[]>()
  for (const r of final.sinceMark) if (!replacement.has(r[0])) replacement.set(r[0], r)
  const gaps: number[] = []
  // Backlog rate per replacement, by the survivor's own clock: audio ms received in its first window.
  const rates: number[] = []
  for (const r of final.sinceMark) rates.push((r[5] * 20) / BACKLOG_WINDOW_MS)
  rates.sort((x, y) => x - y)
  const sessionsPerIncident = onB.length === 0 ? NaN : final.sinceMark.length / onB.length
  let missingTail = 0
  let seamGap = 0
  let replayed = 0
  let notMoved = 0
  for (const [leg, countOnB] of onB) {
    const r = replacement.get(leg)
    if (r === undefined) {
      notMoved++
      continue
    }
    const [, firstAt, firstSeq, lastSeq] = r
    gaps.push(firstAt - killAt)
    const lastOnB = countOnB - 1
    if (firstSeq <= lastOnB) replayed += lastOnB - firstSeq + 1
    else seamGap += firstSeq - lastOnB - 1
    missingTail += Math.max(0, sentPerLeg[leg] - 1 - lastSeq)
  }
  gaps.sort((x, y) => x - y)
  const lost = missingTail + seamGap + final.outOfOrder

  const rep = new Report(
    `failover: ${legs} legs × 50 frames/s through the gateway to replicas a and b; b killed mid-stream`
  )
  rep.section('setup')
  rep.row('legs streaming / on the killed replica', `${fmtInt(conn.streaming)} / ${fmtInt(onB.length)}`)
  rep.row('replay ring / vendor ping / failover timeout', '1 s / 1 s / 30 s')
  rep.section('time from the kill to the first frame on the survivor (per failed-over leg)')
  rep.row(
    'p50 / p99 / max',
    `${fmt(percentile(gaps, 50), 1)} / ${fmt(percentile(gaps, 99), 1)} / ${fmt(gaps.at(-1) ?? NaN, 1)} ms`
  )
  rep.row('legs moved / not moved', `${fmtInt(gaps.length)} / ${fmtInt(notMoved)}`)
  rep.row('gateway: failovers ok', fmtInt(failovers))
  rep.row('vendor sessions opened per incident', fmt(sessionsPerIncident, 2))
  rep.section(
    `replay and queued audio to the survivor (audio.replayRate ${REPLAY_RATE}; first ${BACKLOG_WINDOW_MS} ms, survivor's clock)`
  )
  rep.row(
    'backlog rate p50 / max (× real time)',
    `${fmt(percentile(rates, 50), 2)} / ${fmt(rates.at(-1) ?? NaN, 2)}  (${rates.length} replacements measured)`
  )
  rep.section('audio')
  rep.row(
    'frames lost',
    `${fmtInt(lost)}  (tail missing ${missingTail}, gap at the seam ${seamGap}, gaps inside ${final.outOfOrder})`
  )
  rep.row(
    'gateway count of undelivered frames',
    `${fmtInt(droppedByGateway)}  (of which failover_unreplayed ${fmtInt(unconfirmed)}: written since the ` +
      'last sign of life and not in the replay; a vendor that dies at once may have had them)'
  )
  rep.row(
    'frames replayed (sent twice)',
    `${fmtInt(replayed)}  (the dead replica's last second, re-sent to the survivor)`
  )
  rep.print()
  return {
    legs,
    legsOnKilledReplica: onB.length,
    legsMoved: gaps.length,
    legsNotMoved: notMoved,
    kill_to_first_frame_ms: {
      p50: round(percentile(gaps, 50)),
      p99: round(percentile(gaps, 99)),
      max: round(gaps.at(-1) ?? NaN)
    },
    framesLost: lost,
    gatewayDroppedFrames: droppedByGateway,
    gatewayUnreplayedFrames: unconfirmed,
    framesReplayed: replayed,
    failovers,
    sessionsPerIncident: round(sessionsPerIncident),
    replayRate: { configured: REPLAY_RATE, p50: round(percentile(rates, 50)), max: round(rates.at(-1) ?? NaN) }
  }
}
