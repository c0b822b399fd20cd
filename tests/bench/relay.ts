/**
 * `npm run bench -- relay [--pairs N (100)] [--seconds S (10)] [--warmup S (3)] [--rounds 2]`
 *
 * What a relayed leg costs (issue 20): two gateway instances (one process each) on Redis (REDIS_URL, a key
 * prefix of the bench's own), each with a fleet listener, and N joined calls (mappings/deepgram-stereo.yaml,
 * join [TX, RX]) at real time. `local`: both legs of every call on instance A (one process holds the
 * session). `relayed`: TX on A, RX on B, so one leg of every call reaches its session through the relay
 * (audio/placement/relay-link.ts) over the WebSocket between the instances. A B A B; the figure is the CPU of both
 * gateway processes per platform frame, and the difference per relayed frame (half the frames are relayed).
 */
import { randomUUID } from 'node:crypto'
import { loadavg } from 'node:os'
import { AB_FLAGS } from './ab'
import { type BenchRoute, type Gateway, startGateway } from './audio'
import {
  fmt,
  fmtInt,
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
  stopChild
} from './lib'
import { LoadGen } from './loadgen'

export const RELAY_FLAGS = ['pairs', ...AB_FLAGS]

interface RelayPhase {
  streaming: number
  frames: number
  cpuMicros: number
  machineBusy: number
}

async function phase(
  key: 'local' | 'relayed',
  a: Gateway,
  b: Gateway,
  pairs: number,
  token: string,
  first: number,
  sink: Sink,
  seconds: number,
  warmup: number
): Promise<RelayPhase> {
  const url = (gw: Gateway): string => `ws://127.0.0.1:${gw.port}/audio/joined`
  const tx = new LoadGen(url(a), pairs, token, first, ['TX'])
  const rx = new LoadGen(url(key === 'local' ? a : b), pairs, token, first, ['RX'])
  const [ct, cr] = await Promise.all([tx.connect(), rx.connect()])
  const failed = ct.failed + cr.failed
  if (failed > 0) progress(`relay: ${key}: ${failed} legs failed: ${[...tx.failures(), ...rx.failures()].join('; ')}`)
  await sleep(warmup * 1000)
  const cpu = (): number => procCpu(a.pid).total + procCpu(b.pid).total
  const m0 = machineCpu()
  const cpu0 = cpu()
  const sent0 = tx.sent + rx.sent
  await sleep(seconds * 1000)
  const cpuMicros = cpu() - cpu0
  const frames = tx.sent + rx.sent - sent0
  const machine = machineShare(m0, machineCpu())
  await Promise.all([tx.close(), rx.close()])
  if (failed > 0)
    for (const gw of [a, b]) {
      const text = await (await fetch(`http://127.0.0.1:${gw.metricsPort}/metrics`)).text()
      progress(
        `relay: ${key}: pid ${gw.pid}: ${text
          .split('\n')
          .filter(l => /auth_failures_total\{|sessions_total\{/.test(l))
          .join('; ')}`
      )
    }
  for (let i = 0; i < 75 && (await sink.ask('stats')).open > 0; i++) await sleep(200)
  progress(
    `relay: ${key}: ${ct.streaming + cr.streaming} legs, ${fmt(cpuMicros / Math.max(1, frames), 2)} µs CPU per platform frame (both instances), machine ${fmt(machine.busy, 0)} % busy`
  )
  return { streaming: ct.streaming + cr.streaming, frames, cpuMicros, machineBusy: machine.busy }
}

export async function runRelay(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const pairs = numberFlag(flags, 'pairs', 100, { integer: true, min: 1, max: 2000 })
  const seconds = numberFlag(flags, 'seconds', 10, { min: 1, max: 600 })
  const warmup = numberFlag(flags, 'warmup', 3, { min: 0, max: 600 })
  const rounds = numberFlag(flags, 'rounds', 2, { integer: true, min: 1, max: 20 })
  const redis = process.env.REDIS_URL || 'redis://127.0.0.1:6379'
  const token = `bench-relay-${Date.now().toString(36)}`
  const load0 = loadavg()
  const sink = await Sink.start(0)
  const extra = {
    redis,
    store: { keyPrefix: `bench:relay:${randomUUID()}:` },
    fleet: { advertiseUrl: 'ws://127.0.0.1' },
    audio: { reattachGraceSeconds: 0 }
  }
  const routes: Record<string, BenchRoute> = {
    joined: { mapping: 'deepgram-stereo', join: { channels: ['TX', 'RX'], waitSeconds: 2 } }
  }
  const a = await startGateway(sink.url, token, false, { routes, extra })
  const b = await startGateway(sink.url, token, false, { routes, extra })
  progress(
    `relay: instances A pid ${a.pid}, B pid ${b.pid} on ${redis.replace(/\/\/[^@]*@/, '//')}; ${rounds} × (local, relayed), ${pairs} calls, ${warmup} + ${seconds} s each`
  )
  const results: Record<'local' | 'relayed', RelayPhase[]> = { local: [], relayed: [] }
  let n = 0
  for (let r = 0; r < rounds; r++)
    for (const key of ['local', 'relayed'] as const)
      results[key].push(await phase(key, a, b, pairs, token, n++ * pairs, sink, seconds, warmup))
  await Promise.all([stopChild(a.child, 5000), stopChild(b.child, 5000)])
  await sink.stop()
  const load1 = loadavg()

  const per = (ps: RelayPhase[]): number =>
    ps.reduce((s, p) => s + p.cpuMicros, 0) / ps.reduce((s, p) => s + p.frames, 0)
  const local = per(results.local)
  const relayed = per(results.relayed)
  // Half the platform frames of a relayed phase come through the relay: the extra CPU per relayed frame.
  const perRelayedFrame = (relayed - local) * 2
  const rep = new Report(
    `relay: ${pairs} joined calls on two instances, a leg on its session's instance vs relayed (${machineLine()})`
  )
  const byRound = (ps: RelayPhase[]): string => ps.map(p => fmt(p.cpuMicros / p.frames, 2)).join(', ')
  rep.row('local: CPU per platform frame', `${fmt(local, 2)} µs (by round: ${byRound(results.local)}), both instances`)
  rep.row('relayed: CPU per platform frame', `${fmt(relayed, 2)} µs (by round: ${byRound(results.relayed)})`)
  rep.row('a relayed frame costs more by', `${fmt(perRelayedFrame, 2)} µs (relayed/local ${fmt(relayed / local, 2)})`)
  rep.row('legs streaming per phase', fmtInt(results.local[0]?.streaming ?? 0))
  rep.row('load average (1 min) before, after', `${fmt(load0[0], 2)}, ${fmt(load1[0], 2)}`)
  rep.print()
  return {
    pairs,
    localMicrosPerFrame: round(local),
    relayedMicrosPerFrame: round(relayed),
    extraMicrosPerRelayedFrame: round(perRelayedFrame),
    machineBusyPercent: round(
      [...results.local, ...results.relayed].reduce((s, p) => s + p.machineBusy, 0) / (2 * rounds),
      1
    )
  }
}
