/**
 * `npm run bench -- soak [--instances 2] [--vendors 2] [--legs 300] [--minutes 10] [--no-nginx] [--allow-uncounted]
 *   [--windows steady,vendor-freeze,...] [--freeze-seconds 15]`
 *
 * A fleet soak as an SRE runs one before production: N gateway instances (`serve` as it ships, with the
 * worker count it picks for the machine) on their own redis-server, behind nginx (or the bench's TCP balancer), M vendor replicas (the strict
 * Deepgram emulator, each its own process), and platform legs at real rate that reconnect with the same
 * init message on any close they did not make; then a fault per window (faults.ts). Prints per window:
 * legs cut and codes, reconnect times, frames sent / delivered / counted lost by the gateways /
 * uncounted, the longest gap per leg; over the run: RSS and fd slopes per gateway process and vendor
 * streams per replica over time. Exits 1 when any window has frames a gateway read but neither delivered nor
 * counted (--allow-uncounted: 0); frames sent and never read (in flight past a close frame) are printed apart.
 * `--windows` runs only the named windows, in schedule order (issue 32's frozen replica:
 * `--instances 2 --legs 100 --windows steady,vendor-freeze --freeze-seconds 6`).
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { freePort, machineCpu, machineShare, numberFlag, progress, sleep, UsageError } from '../lib'
import { haveRedisServer } from '../../helpers/redis-process'
import { legRecords, windowFrames, type VendorSessionRecord } from './account'
import { GatewayInstance, RedisServer, startFront, VendorReplica, type RouteSpec } from './fleet'
import { plan, schedule, type SoakCtx } from './faults'
import { Platform, type LegMark } from './platform'
import { printSoak, type SoakWindow } from './report'

export const SOAK_FLAGS = ['instances', 'vendors', 'legs', 'minutes', 'windows', 'freeze-seconds']
export const SOAK_BOOLEANS = ['no-nginx', 'allow-uncounted']

const PRIME = "'" // A, A′, A″

function loadAverage(): number {
  return Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0])
}

export async function runSoak(flags: Map<string, string>): Promise<{ json: Record<string, unknown>; code: number }> {
  const instances = numberFlag(flags, 'instances', 2, { integer: true, min: 1, max: 16 })
  const vendorCount = numberFlag(flags, 'vendors', 2, { integer: true, min: 2, max: 16 })
  const legCount = numberFlag(flags, 'legs', 300, { integer: true, min: 1, max: 5000 })
  const minutes = numberFlag(flags, 'minutes', 10, { min: 1, max: 24 * 60 })
  const all0 = schedule(numberFlag(flags, 'freeze-seconds', 15, { min: 1, max: 600 }))
  const names = flags.get('windows')?.split(',')
  const unknown = names?.filter(n => !all0.some(w => w.name === n)) ?? []
  if (unknown.length > 0)
    throw new UsageError(`--windows: no window ${unknown.join(', ')} (${all0.map(w => w.name).join(', ')})`)
  const scheduled = names === undefined ? all0 : all0.filter(w => names.includes(w.name))
  if (!haveRedisServer) throw new UsageError('soak needs redis-server and redis-cli (apt-get install redis-server)')
  const token = `soak-${randomBytes(12).toString('hex')}`
  const env = { SOAK_TOKEN: token, SOAK_VENDOR_KEY: `vendor-${token}` }
  const prefix = `{soak-${randomBytes(4).toString('hex')}}:`

  progress(`soak: redis-server, ${vendorCount} vendor replicas`)
  const redis = await RedisServer.start()
  const vendors: VendorReplica[] = []
  for (let i = 0; i < vendorCount; i++) vendors.push(await VendorReplica.start(`v${i + 1}`, env.SOAK_VENDOR_KEY))
  const spec: RouteSpec = { upstreams: vendors.map(v => ({ name: v.name, port: v.port })), extraRoute: false }
  // Two ports per slot: a successor (A′) starts on the other one while its predecessor drains.
  const slotPorts: [number, number][] = []
  for (let i = 0; i < instances; i++) slotPorts.push([await freePort(), await freePort()])
  const generation = new Array<number>(instances).fill(0)
  const all: GatewayInstance[] = []
  const letter = (i: number): string => String.fromCharCode(65 + i)
  const startInstance = async (slot: number): Promise<GatewayInstance> => {
    const gen = generation[slot]
    const port = slotPorts[slot][gen % 2]
    const g = await GatewayInstance.start(
      `${letter(slot)}${PRIME.repeat(gen)}`,
      port,
      GatewayInstance.config(port, redis.url, prefix, spec),
      env
    )
    all.push(g)
    return g
  }
  progress(`soak: ${instances} gateway instances (serve, its own worker count)`)
  const slots: GatewayInstance[] = []
  for (let i = 0; i < instances; i++) slots.push(await startInstance(i))
  const front = await startFront(slotPorts.flat(), flags.has('no-nginx'))
  progress(`soak: front ${front.kind} on port ${front.port}`)

  const platform = new Platform(`ws://127.0.0.1:${front.port}/audio/soak`, legCount, token)
  const streaming = await platform.start()
  progress(`soak: ${streaming} of ${legCount} legs streaming`)

  // Sampler: every 2 s the gateways' counters and /proc, every 10 s the replicas' open sessions.
  const load: [number, number][] = []
  let sampling = true
  const sampler = (async () => {
    for (let n = 0; sampling; n++) {
      load.push([Date.now(), loadAverage()])
      for (const g of all) g.sample()
      await Promise.all(all.map(g => g.scrape()))
      if (n % 5 === 0) await Promise.all(vendors.map(v => v.sampleOpen()))
      await sleep(2000)
    }
  })()

  const ctx: SoakCtx = {
    redis,
    vendors,
    slots,
    startNext: async slot => {
      generation[slot]++
      const g = await startInstance(slot)
      const end = Date.now() + 30_000
      while (!(await g.ready()) && Date.now() < end) await sleep(200)
      slots[slot] = g
      return g
    },
    addRoute: () => {
      spec.extraRoute = true
      for (const g of slots) g.reload(GatewayInstance.config(g.port, redis.url, prefix, spec))
    },
    note: () => {}
  }

  const lengths = plan(minutes, scheduled)
  const total = lengths.reduce((a, b) => a + b, 0)
  progress(`soak: ${scheduled.length} windows, ${total} s planned (${lengths.join(' + ')})`)
  const marks: LegMark[] = []
  const windows: SoakWindow[] = []
  const runStart = Date.now()
  const machine0 = machineCpu()
  const bench0 = process.cpuUsage()
  // A boundary: every gateway scraped, then the time, then the legs' counters; it ends one window and starts the next.
  const boundary = async (): Promise<number> => {
    await Promise.all(all.map(g => g.scrape()))
    const at = Date.now()
    marks.push(platform.mark())
    const prev = windows.at(-1)
    if (prev !== undefined) prev.end = at
    return at
  }
  for (let w = 0; w < scheduled.length; w++) {
    const fault = scheduled[w]
    const start = await boundary()
    const notes: string[] = []
    ctx.note = text => {
      notes.push(`+${((Date.now() - start) / 1000).toFixed(1)} s ${text}`)
      progress(`soak: ${fault.name}: ${text}`)
    }
    progress(`soak: window ${w + 1}/${scheduled.length} ${fault.name} (${lengths[w]} s): ${fault.what}`)
    await fault.run(ctx, async s => {
      const wait = start + s * 1000 - Date.now()
      if (wait > 0) await sleep(wait)
    })
    const planned = start + lengths[w] * 1000
    await sleep(Math.max(planned, Date.now() + 5000) - Date.now())
    windows.push({ spec: fault, start, end: Date.now(), notes, lengthS: 0 })
  }
  platform.stopSending()
  // Let the last coalesced writes and replays land, then take everything.
  await sleep(3000)
  sampling = false
  await sampler
  await boundary()
  for (const v of vendors) await v.snapshot()
  for (const w of windows) w.lengthS = (w.end - w.start) / 1000
  const runEnd = Date.now()
  const bench1 = process.cpuUsage(bench0)
  const cpu = {
    seconds: (runEnd - runStart) / 1000,
    machineBusy: machineShare(machine0, machineCpu()).busy,
    gateways: all.reduce((s, g) => s + (g.samples.at(-1)?.cpu ?? 0) - (g.samples[0]?.cpu ?? 0), 0),
    vendors: vendors.reduce((s, v) => s + v.cpuUs(), 0),
    front: front.cpuUs(),
    platform: bench1.user + bench1.system
  }
  progress('soak: stopping')
  await platform.close()
  await Promise.all(slots.map(g => g.drain(40_000)))
  await front.stop()
  for (const v of vendors) await v.stop()
  await redis.kill()

  const sessions: VendorSessionRecord[] = vendors.flatMap(v => v.sessions())
  const legs = legRecords(sessions, legCount)
  const perWindow = windows.map((w, i) => ({ ...w, frames: windowFrames(legs, marks[i], marks[i + 1]) }))
  return printSoak({
    instances,
    vendorCount,
    legCount,
    minutes,
    front: front.kind,
    streaming,
    runStart,
    runEnd,
    windows: perWindow,
    marks,
    platform,
    gateways: all,
    vendors,
    sessions,
    legs,
    load,
    allowUncounted: flags.has('allow-uncounted'),
    cpu
  })
}
