/**
 * `npm run bench -- fleet [--instances 4] [--legs 1000] [--seconds 10] [--warmup 3]`: the fleet plan on one
 * box. N gateway instances share one Redis (REDIS_URL, default 127.0.0.1:6379) under their own key prefix
 * and one sink; the legs are spread evenly over the instances (one load generator each, in this process).
 * Prints per instance: legs, CPU % and µs per frame, RSS; for the fleet: frames delivered and lost, p50/p99
 * latency at the sink; for Redis: commands per second, its CPU, its memory and keys under the prefix, per
 * leg. Nothing is pinned (the instances share the cores, as a fleet on one box would).
 */
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import { startGateway } from './audio'
import {
  fmt,
  fmtInt,
  fmtKiB,
  machineLine,
  numberFlag,
  procCpu,
  progress,
  Report,
  round,
  rssBytes,
  Sink,
  sleep,
  stopChild
} from './lib'
import { LoadGen } from './loadgen'

export const FLEET_FLAGS = ['instances', 'legs', 'seconds', 'warmup']

function info(text: string, key: string): number {
  const m = new RegExp(`^${key}:([\\d.]+)`, 'm').exec(text)
  return m === null ? Number.NaN : Number(m[1])
}

/** Keys under the prefix and the bytes they take (MEMORY USAGE: Redis may be shared with other work). */
async function keysUnder(redis: Redis, prefix: string): Promise<{ keys: number; bytes: number }> {
  let cursor = '0'
  let keys = 0
  let bytes = 0
  do {
    const [next, ks] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    keys += ks.length
    // One pipelined batch per SCAN page: a round trip per key would wait on this busy event loop each time.
    const sizes = await Promise.all(ks.map(async k => Number((await redis.memory('USAGE', k)) ?? 0)))
    for (const b of sizes) bytes += b
  } while (cursor !== '0')
  return { keys, bytes }
}

export async function runFleet(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const instances = numberFlag(flags, 'instances', 4, { integer: true, min: 1, max: 64 })
  const legs = numberFlag(flags, 'legs', 1000, { integer: true, min: instances, max: 20000 })
  const seconds = numberFlag(flags, 'seconds', 10, { min: 1, max: 3600 })
  const warmup = numberFlag(flags, 'warmup', 3, { min: 0, max: 600 })
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379'
  const prefix = `{bench-fleet-${randomBytes(4).toString('hex')}}:`
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await redis.connect()
  const token = `bench-${randomBytes(12).toString('hex')}`
  const sink = await Sink.start(0)
  const gws = []
  for (let i = 0; i < instances; i++) {
    gws.push(
      await startGateway(sink.url, token, false, {
        extra: { redis: url, store: { keyPrefix: prefix } }
      })
    )
  }
  const redisPid = info(await redis.info('server'), 'process_id')
  progress(
    `fleet: ${instances} instances (pids ${gws.map(g => g.pid).join(', ')}), Redis pid ${redisPid}, prefix ${prefix}`
  )
  const rss0 = gws.map(g => rssBytes(g.pid))
  // Disjoint contactIds per instance: each leg is its own call (shared ids would look like re-attaches).
  const per = Math.ceil(legs / instances)
  const gens = gws.map(
    (g, i) => new LoadGen(`ws://127.0.0.1:${g.port}/audio/bench`, Math.min(per, legs - i * per), token, i * per)
  )
  const conns = await Promise.all(gens.map(async g => await g.connect()))
  progress(
    `fleet: ${conns.map(c => c.streaming).join(' + ')} legs streaming; warm-up ${warmup} s, ${seconds} s measured`
  )
  await sleep(warmup * 1000)
  const cpu0 = gws.map(g => procCpu(g.pid).total)
  const rcpu0 = procCpu(redisPid).total
  const cmd0 = info(await redis.info('stats'), 'total_commands_processed')
  const s0 = await sink.ask('reset-hist')
  await sleep(seconds * 1000)
  const s1 = await sink.ask('stats')
  const cmd1 = info(await redis.info('stats'), 'total_commands_processed')
  const rcpu = procCpu(redisPid).total - rcpu0
  const cpu = gws.map((g, i) => procCpu(g.pid).total - cpu0[i])
  const rss1 = gws.map(g => rssBytes(g.pid))
  // Stop sending first: the generators keep this process's event loop busy.
  for (const g of gens) g.stop()
  const { keys, bytes } = await keysUnder(redis, prefix)
  await sleep(1000)
  const final = await sink.ask('stats')
  const sent = gens.reduce((s, g) => s + g.sent, 0)
  await Promise.all(gens.map(async g => await g.close()))
  await sleep(1500)
  const keysAfter = (await keysUnder(redis, prefix)).keys
  for (const g of gws) await stopChild(g.child, 5000)
  await sink.stop()
  // Leave nothing behind under the bench's prefix.
  let cursor = '0'
  do {
    const [next, ks] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
    cursor = next
    if (ks.length > 0) await redis.del(...ks)
  } while (cursor !== '0')
  redis.disconnect()

  const windowS = (s1.at - s0.at) / 1000
  const frames = s1.received - s0.received
  const streaming = conns.reduce((s, c) => s + c.streaming, 0)
  const rep = new Report(
    `fleet: ${instances} gateway instances sharing Redis (${prefix}), ${legs} legs spread evenly, one sink`
  )
  gws.forEach((g, i) => {
    const share = frames * (conns[i].streaming / Math.max(1, streaming))
    rep.row(
      `instance ${i + 1} (pid ${g.pid})`,
      `${conns[i].streaming} legs, ${fmt((100 * cpu[i]) / (windowS * 1e6), 1)} % of a core, ~${fmt(cpu[i] / Math.max(1, share), 2)} µs CPU per frame, RSS ${fmt(rss1[i] / 2 ** 20, 1)} MiB (${fmtKiB((rss1[i] - rss0[i]) / Math.max(1, conns[i].streaming))} per leg)`
    )
  })
  rep.row('frames delivered', `${fmtInt(frames / windowS)}/s (expected ${fmtInt(streaming * 50)}/s)`)
  rep.row('lost / out of order', `${fmtInt(sent - final.received)} / ${fmtInt(final.outOfOrder)}`)
  rep.row(
    'latency at the sink',
    `p50 ${fmt(s1.latency.p50, 3)} ms, p99 ${fmt(s1.latency.p99, 3)} ms (not pinned; shared cores)`
  )
  rep.row(
    'Redis',
    `${fmt((cmd1 - cmd0) / windowS, 1)} commands/s (${fmt((cmd1 - cmd0) / windowS / instances, 1)} per instance), ${fmt((100 * rcpu) / (windowS * 1e6), 2)} % of a core`
  )
  rep.row(
    'Redis memory',
    `${keys} keys under the prefix, ${fmtKiB(bytes)} (${fmt(bytes / Math.max(1, streaming), 0)} B per leg); ${keysAfter} keys after the legs closed`
  )
  rep.print()
  console.log('')
  const summary = new Report(`SUMMARY fleet (${machineLine()})`)
  summary.row(
    `${instances} instances, ${streaming} legs`,
    `${fmtInt(sent - final.received)} lost; p99 ${fmt(s1.latency.p99, 2)} ms; Redis ${fmt((cmd1 - cmd0) / windowS, 0)} cmd/s, ${fmt((100 * rcpu) / (windowS * 1e6), 2)} % CPU, ${keys} keys`
  )
  summary.print()
  return {
    machine: machineLine(),
    instances,
    legs: streaming,
    framesPerSecond: round(frames / windowS, 1),
    lost: sent - final.received,
    latencyMs: { p50: round(s1.latency.p50), p99: round(s1.latency.p99) },
    instanceCpuPercent: cpu.map(c => round((100 * c) / (windowS * 1e6), 1)),
    redisCommandsPerSecond: round((cmd1 - cmd0) / windowS, 1),
    redisCpuPercent: round((100 * rcpu) / (windowS * 1e6), 2),
    redisBytesUnderPrefix: bytes,
    redisKeys: keys,
    redisKeysAfterClose: keysAfter
  }
}
