import { readFileSync } from 'node:fs'
import t from 'tap'
import { createHash } from 'node:crypto'
import { resolve } from 'node:path'
import { WebSocket } from 'ws'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { initMessage } from '../../gateway/tools/simulate'
import { uniqueFrame, uniqueFramesHash } from '../helpers/audio'
import {
  AUDIO_TOKEN,
  platformLeg,
  routeTo,
  startVendor,
  until,
  type PlatformLegClient,
  ADMIN_WRITE
} from '../helpers/gateway'
import { runCli } from '../helpers/cli'
import { spawnGateway, type GatewayProcess } from '../helpers/process'
import { audioInit } from '../helpers/legs'

// One gateway process with `serve --workers 2` (the built CLI), one json-events emulator in this process.
const scrape = async (g: GatewayProcess): Promise<string> => await (await fetch(g.adminUrl('/metrics'))).text()
const sample = (text: string, series: string): number => {
  const line = text.split('\n').find(l => l.startsWith(`${series} `))
  return line === undefined ? Number.NaN : Number(line.slice(series.length + 1))
}
const perWorker = async (g: GatewayProcess): Promise<[number, number]> => {
  const text = await scrape(g)
  return [
    sample(text, 'assist_gateway_worker_legs_active{worker="0"}'),
    sample(text, 'assist_gateway_worker_legs_active{worker="1"}')
  ]
}
/** Every series of a metric, summed. */
const total = (text: string, metric: string): number =>
  text
    .split('\n')
    .filter(l => l.startsWith(`${metric}{`))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)
const count = (out: string, event: string): number => out.split(`"event":"${event}"`).length - 1
interface Workers {
  workers: { worker: number; up: boolean; pid: number; restarts: number }[]
}
const workers = async (g: GatewayProcess): Promise<Workers['workers']> =>
  ((await (await fetch(g.adminUrl('/admin/workers'))).json()) as Workers).workers

t.test('serve --workers 2: one port, one admin port, sessions across workers, a killed worker restarted', async t => {
  // Results by 20 ms of audio received (not by vendor writes, which coalescing batches by time), and no
  // health probes (a probe is a short session the emulator would count among the call's).
  const v = await startVendor(t, { kind: 'json-events', resultEveryFrames: 5, resultsByAudio: true })
  const gw = await spawnGateway(
    t,
    {
      health: { active: { kind: 'none' } },
      audio: { reattachGraceSeconds: 30 },
      // The drain subtest scrapes the main process once its workers are gone (the final scrape ends it).
      shutdown: { metricsLingerSeconds: 60, deadlineSeconds: 120 },
      routes: { demo: routeTo([v], 'mappings/json-events.yaml') }
    },
    { GATEWAY_WORKERS: '2' }
  )
  t.ok(await until(async () => (await workers(gw)).every(w => w.up)), 'both workers are up')
  t.match(await scrape(gw), /^assist_gateway_workers 2$/m)
  // Each worker runs with a 1 MiB young generation (gateway/workers/worker-flags.ts): what its RSS per leg rests on.
  for (const w of await workers(gw))
    t.ok(
      readFileSync(`/proc/${w.pid}/cmdline`, 'utf8').split('\0').includes('--max-semi-space-size=1'),
      `worker ${w.worker} runs with --max-semi-space-size=1`
    )

  await t.test('the workers share the public port: legs land on both, the admin port sums them', async t => {
    const legs: PlatformLegClient[] = []
    for (let i = 0; i < 12; i++) legs.push(platformLeg(t, gw.url('/audio/demo'), audioInit(800000 + i)))
    for (const leg of legs) t.equal((await leg.answer).command, 'CONNECTED')
    t.ok(await until(async () => (await perWorker(gw)).reduce((a, b) => a + b) === 12), 'every leg is counted once')
    const [w0, w1] = await perWorker(gw)
    t.ok(w0 > 0 && w1 > 0, `connections land on both workers (${w0} and ${w1})`)
    t.equal(sample(await scrape(gw), 'assist_gateway_audio_sessions_active{route="demo"}'), 12, 'summed across workers')
    const view = (await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as {
      workers: number
      routes: { replicas: { activeStreams: number; workers: unknown[] }[] }[]
    }
    t.equal(view.workers, 2, '/admin/upstreams merges both workers')
    t.equal(
      view.routes[0].replicas.reduce((n, r) => n + r.activeStreams, 0),
      12,
      "/admin/upstreams counts every worker's streams"
    )

    // A killed worker: its legs are cut, the other worker's are untouched, it is restarted and counted.
    const before = await workers(gw)
    const cut: PlatformLegClient[] = []
    for (const leg of legs) leg.closed.then(() => cut.push(leg))
    process.kill(before[0].pid, 'SIGKILL')
    t.ok(await until(() => cut.length === w0), `the ${w0} legs of the killed worker are cut`)
    t.ok(
      await until(async () => {
        const now = await workers(gw)
        return now[0].up && now[0].pid !== before[0].pid
      }),
      'the worker is restarted'
    )
    t.equal(cut.length, w0, 'no leg of the other worker was cut')
    t.ok(
      legs.filter(l => !cut.includes(l)).every(l => l.ws.readyState === WebSocket.OPEN),
      'the other legs are open'
    )
    const after = await workers(gw)
    t.same(
      after.map(w => w.restarts),
      [1, 0],
      'the restart is counted'
    )
    t.match(await scrape(gw), 'assist_gateway_worker_restarts_total{worker="0"} 1')
    t.match(gw.output(), '"event":"worker_exited"')
    // The cut legs come back (on any worker) and are served: a new vendor session each, the old one died with its worker.
    const back = cut.map(l => platformLeg(t, gw.url('/audio/demo'), audioInit(800000 + legs.indexOf(l))))
    for (const leg of back) t.equal((await leg.answer).command, 'CONNECTED', 'a cut leg re-attaches')
    t.ok(
      await until(() => v.sessions().filter(s => !s.closed).length === 12),
      'the vendor has one open session per live leg: those of the killed worker closed with it'
    )
    for (const leg of [...legs, ...back]) leg.ws.close(1000)
    await Promise.all([...legs, ...back].map(async l => await l.closed))
  })

  await t.test('a leg that comes back on the other worker keeps its vendor session, bytes in order', async t => {
    const id = 810001
    const opened = v.sessions().length
    let leg = platformLeg(t, gw.url('/audio/demo'), audioInit(id))
    t.equal((await leg.answer).command, 'CONNECTED')
    let sent = 0
    const send = async (n: number): Promise<boolean> => {
      for (let i = 0; i < n; i++) leg.send(uniqueFrame(id, sent++))
      return await until(() => v.sessions()[opened]?.bytes === sent * 160)
    }
    t.ok(await send(10), 'the vendor has the first frames')
    // Reconnect until the kernel puts the leg on the other worker (each time on the same one is a local re-attach).
    let tries = 0
    while (count(gw.output(), 'reattached_across_workers') === 0 && tries++ < 30) {
      const closedBefore = count(gw.output(), 'platform_closed')
      leg.ws.terminate()
      await leg.closed
      await until(() => count(gw.output(), 'platform_closed') > closedBefore)
      leg = platformLeg(t, gw.url('/audio/demo'), audioInit(id))
      t.equal((await leg.answer).command, 'CONNECTED')
      t.ok(await send(10), 'the vendor has the frames sent since')
    }
    t.equal(count(gw.output(), 'reattached_across_workers'), 1, 'the leg came back on the other worker')
    const messages = leg.messages.length
    t.ok(await send(20), 'frames cross from the worker that has the leg to the one that has the session')
    t.ok(await until(() => leg.messages.length > messages), 'results come back through the other worker')
    t.equal(v.sessions().length, opened + 1, 'the vendor saw one session')
    t.equal(v.sessions()[opened].sha256, uniqueFramesHash(id, 0, sent), 'with every byte in order')
    t.same(v.sessions()[opened].texts, [], 'and no stop in between')
    t.match(await scrape(gw), /assist_gateway_audio_reattach_total\{route="demo",result="same_session"\} [1-9]/)
    leg.ws.close(1000)
    await leg.closed
  })

  await t.test('reload and drain act on every worker', async t => {
    const r = await fetch(gw.adminUrl('/admin/reload'), { method: 'POST', headers: ADMIN_WRITE })
    const report = (await r.json()) as { ok: boolean; workers: { worker: number }[] }
    t.equal(r.status, 200)
    t.same(
      report.workers.map(w => w.worker),
      [0, 1],
      'both workers reloaded'
    )
    const pids = (await workers(gw)).map(w => w.pid)
    const before = await scrape(gw)
    const legsServed = total(before, 'assist_gateway_audio_sessions_total')
    const bytesRead = sample(before, 'assist_gateway_audio_bytes_total{route="demo",direction="from_platform"}')
    t.ok(legsServed > 0 && bytesRead > 0, `the workers served legs (${legsServed}, ${bytesRead} bytes)`)
    process.kill(gw.pid, 'SIGTERM')
    const gone = (pid: number): boolean => {
      try {
        process.kill(pid, 0)
        return false
      } catch {
        return true
      }
    }
    t.ok(await until(() => pids.every(gone)), 'every worker drains and exits')
    // The workers are gone; their last counters are still scraped from the main process, which then exits.
    const after = await scrape(gw)
    t.equal(total(after, 'assist_gateway_audio_sessions_total'), legsServed, "the drained workers' counters are there")
    t.equal(sample(after, 'assist_gateway_audio_bytes_total{route="demo",direction="from_platform"}'), bytesRead)
    t.equal(await gw.exited, 0, 'after that scrape the main process exits 0 (not at the 60 s linger)')
    t.match(gw.output(), /"event":"metrics_final","how":"scraped"/)
  })
})

t.test('--workers and GATEWAY_WORKERS take a whole number from 1', async t => {
  const bad = await runCli(['serve', '--workers', '0'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--workers must be a whole number 1-256, not "0"[\s\S]*usage: assist-gateway serve /)
  const env = await runCli(['serve'], { GATEWAY_WORKERS: 'many' })
  t.equal(env.code, 2)
  t.match(env.stderr, 'GATEWAY_WORKERS must be a whole number 1-256, not "many"')
})

t.test('serve --workers 2 with a join route: TX and RX of a call on different workers meet in one session', async t => {
  const DG_KEY = 'dg-key-0123456789abcdef'
  const dg = await startRealVendor({ kind: 'deepgram', apiKey: DG_KEY, resultEveryMs: 0 })
  t.teardown(async () => await dg.close())
  const gw = await spawnGateway(
    t,
    {
      routes: {
        stereo: {
          mapping: resolve('mappings/deepgram-stereo.yaml'),
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [{ name: 'v', audio: dg.url, credential: '${DG_KEY}' }],
          join: { channels: ['TX', 'RX'], waitSeconds: 2 }
        }
      }
    },
    { GATEWAY_WORKERS: '2', DG_KEY }
  )
  t.ok(await until(async () => (await workers(gw)).every(w => w.up)), 'both workers are up')
  // 16 calls, 32 connections: the kernel spreads them over the two workers, so most calls are split.
  const N = 16
  const open = (contactId: number, perspective: string): PlatformLegClient =>
    platformLeg(t, gw.url('/audio/stereo'), initMessage({ token: AUDIO_TOKEN, contactId, busNo: 4594, perspective }))
  const pairs = Array.from({ length: N }, (_v, i) => [open(6100 + i, 'TX'), open(6100 + i, 'RX')])
  const answers = await Promise.all(pairs.flat().map(l => l.answer))
  t.ok(
    answers.every(a => a.command === 'CONNECTED'),
    'every leg got CONNECTED'
  )
  const side = (i: number, ch: number): Buffer => Buffer.alloc(1600, (i * 2 + ch + 1) % 255)
  pairs.forEach(([tx, rx], i) => {
    for (let k = 0; k < 10; k++) {
      tx.send(side(i, 0).subarray(k * 160, (k + 1) * 160))
      rx.send(side(i, 1).subarray(k * 160, (k + 1) * 160))
    }
  })
  const voiced = (s: { channels?: { samples: number; silence: number }[] }, ch: number): number =>
    s.channels?.[ch] === undefined ? 0 : s.channels[ch].samples - s.channels[ch].silence
  t.ok(
    await until(
      () => dg.sessions().length >= N && dg.sessions().every(s => voiced(s, 0) >= 1600 && voiced(s, 1) >= 1600)
    ),
    'all audio arrived'
  )
  t.equal(dg.sessions().length, N, 'one vendor session per call')
  const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex')
  const byTx = new Map(Array.from({ length: N }, (_v, i) => [sha(side(i, 0)), i]))
  let matched = 0
  for (const s of dg.sessions()) {
    const i = byTx.get(s.channels?.[0]?.voicedSha256 ?? '')
    if (i !== undefined && s.channels?.[1]?.voicedSha256 === sha(side(i, 1))) matched++
  }
  t.equal(matched, N, 'each session: channel 0 exactly its TX bytes, channel 1 exactly its RX bytes')
  t.ok(
    sample(await scrape(gw), 'assist_gateway_audio_joins_total{route="stereo",result="relayed"}') > 0,
    'legs were relayed between the workers'
  )
  for (const l of pairs.flat()) l.ws.close(1000)
})
