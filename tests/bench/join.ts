/**
 * `node --import=<tap's typescript loader> tests/bench/join.ts [pairs] [rounds]`
 *
 * In-process CPU per platform frame of the gateway's own audio path (no sockets): P contacts, each a TX
 * and an RX leg, R rounds of one 20 ms frame per leg, on the fake clock; once as two plain legs (two
 * vendor sessions) and once joined (one stereo session: the copy into the channel ring, the shared 20 ms
 * tick that interleaves, one relay write per pair). The vendor connections only count bytes. Prints
 * user+system CPU µs per platform frame for each, and the ratio.
 */
import { AudioLeg, type PlatformLeg } from '../../gateway/audio/leg'
import { SessionRegistry } from '../../gateway/audio/registry'
import type { RouteRuntime } from '../../gateway/route'
import { MemoryStore } from '../../gateway/store/memory'
import { createLogger } from '../../gateway/telemetry/log'
import { Metrics } from '../../gateway/telemetry/metrics'
import { initMessage } from '../../gateway/tools/simulate'
import { FakeClock } from '../helpers/fake-clock'
import { FakeConnection, route, SETTINGS } from '../unit/audio/harness'

class CountingConnection extends FakeConnection {
  bytes = 0
  override writeAudio(data: ArrayBuffer | Uint8Array): void {
    this.bytes += data.byteLength
  }
}

const PAIRS = Number(process.argv[2] ?? 100)
const ROUNDS = Number(process.argv[3] ?? 1000)
const log = createLogger({ level: 'error', secrets: [] })
const platform: PlatformLeg = { sendText: () => 1, end: () => {}, bufferedAmount: () => 0 }

function run(joined: boolean): { usPerFrame: number; vendorBytes: number } {
  const clock = new FakeClock()
  const base = route(clock, ['a'], {
    frames: { framing: 'binary', encoding: 'mulaw', sampleRate: 8000, chunkMs: null, channels: joined ? 2 : 1 }
  })
  const r = (
    joined ? { ...base, config: { ...base.config, join: { channels: ['TX', 'RX'], waitSeconds: 0 } } } : base
  ) as RouteRuntime
  const registry = new SessionRegistry()
  const metrics = new Metrics()
  const conns: CountingConnection[] = []
  const legs: AudioLeg[] = []
  let n = 0
  for (let p = 0; p < PAIRS; p++)
    for (const perspective of ['TX', 'RX']) {
      const leg = new AudioLeg(platform, {
        route: r,
        settings: { ...SETTINGS, holdBufferBytes: 1 << 20, bufferBytes: 1 << 20, vendorHighWaterBytes: 1 << 30 },
        metrics,
        store: new MemoryStore('bench'),
        registry,
        log,
        clock,
        legId: `leg-${++n}`,
        platformHighWaterBytes: 1 << 20,
        connect: (_ctx, replica, input, events) => {
          const c = new CountingConnection(replica, input, events)
          conns.push(c)
          return c
        }
      })
      const init = Buffer.from(JSON.stringify(initMessage({ contactId: 1000 + p, busNo: 4594, perspective })))
      leg.onPlatformText(init.buffer.slice(init.byteOffset, init.byteOffset + init.length) as ArrayBuffer)
      legs.push(leg)
    }
  for (const c of conns) c.ready()
  const frame = new Uint8Array(160).fill(0x55).buffer as ArrayBuffer
  const warm = Math.min(100, ROUNDS)
  const round = (): void => {
    for (const l of legs) l.onPlatformBinary(frame)
    clock.advance(20)
  }
  for (let i = 0; i < warm; i++) round()
  const before = process.cpuUsage()
  for (let i = 0; i < ROUNDS; i++) round()
  const used = process.cpuUsage(before)
  return {
    usPerFrame: (used.user + used.system) / (ROUNDS * legs.length),
    vendorBytes: conns.reduce((s, c) => s + c.bytes, 0)
  }
}

const plain = run(false)
const joined = run(true)
const fmt = (x: number): string => x.toFixed(3)
console.log(`pairs ${PAIRS}, rounds ${ROUNDS}, platform frames ${PAIRS * 2 * ROUNDS} per run`)
console.log(`two plain legs: ${fmt(plain.usPerFrame)} µs CPU per platform frame (vendor bytes ${plain.vendorBytes})`)
console.log(`joined pair:    ${fmt(joined.usPerFrame)} µs CPU per platform frame (vendor bytes ${joined.vendorBytes})`)
console.log(`joined / plain: ${fmt(joined.usPerFrame / plain.usPerFrame)}`)
