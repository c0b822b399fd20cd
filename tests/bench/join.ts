/**
 * `npm run bench -- join [--pairs N (200)] [--seconds S (10)] [--warmup S (3)] [--rounds 2]`
 *
 * Gateway CPU per platform frame of a joined pair (the TX and RX legs of a contact in one stereo vendor
 * session: mappings/deepgram-stereo.yaml, join [TX, RX]) against the same two legs plain (two mono vendor
 * sessions: mappings/deepgram.yaml, the same vendor protocol with one channel), on one gateway process,
 * A B A B (ab.ts). The sink is the vendor (Deepgram needs no handshake: the socket open is the session
 * ready). Also prints what the vendor received per platform frame: the same bytes, in half the messages.
 *
 * `npm run bench -- join --in-process [--pairs N (100)] [--frames N (1000)]`: the micro-bench of the audio
 * path alone, in this process (no sockets): P contacts, each a TX and an RX leg, N rounds of one 20 ms frame
 * per leg on the fake clock; once as two plain legs (two vendor sessions) and once joined (one stereo
 * session: the copy into the channel ring, the shared 20 ms tick that interleaves, one relay write per
 * pair). The vendor connections only count bytes. Prints user+system CPU µs per platform frame for each.
 */
import { AudioLeg } from '../../gateway/audio/leg/leg'
import type { PlatformLeg } from '../../gateway/audio/leg/leg-contract'
import type { RouteRuntime } from '../../gateway/route'
import { createLogger } from '../../gateway/telemetry/log'
import { Metrics } from '../../gateway/telemetry/metrics'
import { initMessage } from '../../gateway/tools/simulate'
import { FakeClock } from '../helpers/fake-clock'
import { connectInto, FakeConnection, fakeLegDeps, route, SETTINGS } from '../unit/audio/harness'
import { AB_FLAGS, runAb } from './ab'
import { fmt, machineLine, numberFlag, Report, round, UsageError } from './lib'
import { loneGateway } from '../helpers/leg-deps'

export const JOIN_FLAGS = ['pairs', 'frames', ...AB_FLAGS]
export const JOIN_BOOLEANS = ['in-process']
/** As tests/integration/join.test.ts; the default audio.holdBufferBytes (64000) covers (2 + 1) × 16000. */
const JOIN = { channels: ['TX', 'RX'] as ['TX', 'RX'], waitSeconds: 2 }

export async function runJoin(flags: Map<string, string>): Promise<Record<string, unknown>> {
  if (flags.has('in-process')) {
    for (const f of AB_FLAGS) if (flags.has(f)) throw new UsageError(`join --in-process takes no --${f}`)
    return runJoinInProcess(flags)
  }
  if (flags.has('frames')) throw new UsageError('--frames goes with join --in-process')
  const pairs = numberFlag(flags, 'pairs', 200, { integer: true, min: 1, max: 5000 })
  return {
    pairs,
    ...(await runAb(
      {
        name: 'join',
        title: `join: ${pairs} contacts (TX + RX legs), two plain legs vs a joined pair, gateway CPU per platform frame`,
        legs: 2 * pairs,
        perspectives: ['TX', 'RX'],
        variants: [
          { key: 'plain', label: 'two plain legs (deepgram)', route: { mapping: 'deepgram' } },
          { key: 'joined', label: 'joined pair (deepgram-stereo)', route: { mapping: 'deepgram-stereo', join: JOIN } }
        ],
        ratioKey: 'joinedOverPlain',
        flags
      },
      // No re-attach: a closed phase's vendor sessions go at once instead of lingering into the next one.
      { audio: { reattachGraceSeconds: 0 } }
    ))
  }
}

class CountingConnection extends FakeConnection {
  bytes = 0
  override writeAudio(data: ArrayBuffer | Uint8Array): void {
    this.bytes += data.byteLength
  }
}

const log = createLogger({ level: 'error', secrets: [] })
const platform: PlatformLeg = { sendText: () => 1, end: () => {}, bufferedAmount: () => 0 }

function inProcess(joined: boolean, pairs: number, frames: number): { usPerFrame: number; vendorBytes: number } {
  const clock = new FakeClock()
  const base = route(clock, ['a'], {
    frames: { framing: 'binary', encoding: 'mulaw', sampleRate: 8000, chunkMs: null, channels: joined ? 2 : 1 }
  })
  const r = (
    joined ? { ...base, config: { ...base.config, join: { channels: ['TX', 'RX'], waitSeconds: 0 } } } : base
  ) as RouteRuntime
  const gw = loneGateway(clock)
  const metrics = new Metrics()
  const conns: CountingConnection[] = []
  const legs: AudioLeg[] = []
  let n = 0
  for (let p = 0; p < pairs; p++)
    for (const perspective of ['TX', 'RX']) {
      const settings = { ...SETTINGS, holdBufferBytes: 1 << 20, bufferBytes: 1 << 20, vendorHighWaterBytes: 1 << 30 }
      const deps = { settings, legId: `leg-${++n}`, connect: connectInto(conns, CountingConnection) }
      const leg = new AudioLeg(platform, fakeLegDeps({ clock, route: r, gw, metrics, log, conns }, deps))
      const init = Buffer.from(JSON.stringify(initMessage({ contactId: 1000 + p, busNo: 4594, perspective })))
      leg.onPlatformText(init.buffer.slice(init.byteOffset, init.byteOffset + init.length) as ArrayBuffer)
      legs.push(leg)
    }
  for (const c of conns) c.ready()
  const frame = new Uint8Array(160).fill(0x55).buffer as ArrayBuffer
  const warm = Math.min(100, frames)
  const tick = (): void => {
    for (const l of legs) l.onPlatformBinary(frame)
    clock.advance(20)
  }
  for (let i = 0; i < warm; i++) tick()
  const before = process.cpuUsage()
  for (let i = 0; i < frames; i++) tick()
  const used = process.cpuUsage(before)
  return {
    usPerFrame: (used.user + used.system) / (frames * legs.length),
    vendorBytes: conns.reduce((s, c) => s + c.bytes, 0)
  }
}

function runJoinInProcess(flags: Map<string, string>): Record<string, unknown> {
  const pairs = numberFlag(flags, 'pairs', 100, { integer: true, min: 1, max: 100_000 })
  const frames = numberFlag(flags, 'frames', 1000, { integer: true, min: 1, max: 1_000_000 })
  const plain = inProcess(false, pairs, frames)
  const joined = inProcess(true, pairs, frames)
  const rep = new Report(
    `join --in-process: ${pairs} contacts × ${frames} frames per leg, no sockets, fake clock (${machineLine()})`
  )
  rep.row('two plain legs', `${fmt(plain.usPerFrame, 3)} µs CPU per platform frame (vendor bytes ${plain.vendorBytes})`)
  rep.row('joined pair', `${fmt(joined.usPerFrame, 3)} µs CPU per platform frame (vendor bytes ${joined.vendorBytes})`)
  rep.row('joined / plain', fmt(joined.usPerFrame / plain.usPerFrame, 3))
  rep.print()
  return {
    machine: machineLine(),
    inProcess: true,
    pairs,
    frames,
    plain: { microsPerFrame: round(plain.usPerFrame), vendorBytes: plain.vendorBytes },
    joined: { microsPerFrame: round(joined.usPerFrame), vendorBytes: joined.vendorBytes },
    joinedOverPlain: round(joined.usPerFrame / plain.usPerFrame)
  }
}
