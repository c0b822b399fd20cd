import t, { type Test } from 'tap'
import { utteranceMessage } from '../../gateway/tools/simulate-text'
import { startRealVendor, type RealVendorEmulator, type RealVendorOptions } from '../../gateway/tools/real-vendors'
import type { SessionReport, VendorEmulator } from '../../gateway/tools/vendors/demo-types'
import type { RealVendorSession } from '../../gateway/tools/vendors/types'
import { frameAt, sha256, streamUntilClosed } from '../helpers/audio'
import { TEXT_TOKEN, platformLeg, routeTo, sleep, startVendor, until, untilOpen } from '../helpers/gateway'
import { spawnGateway, type GatewayProcess } from '../helpers/process'
import { fleetMember, needRedis } from '../helpers/redis'
import { audioInit } from '../helpers/legs'

// The drain over real processes and signals: two gateways share Redis; the test plays the platform.
type T = Parameters<typeof platformLeg>[0]
/** Two gateways' shared config: a fleet on Redis, no active probe, no re-attach grace (a leg moves at once), `routes`. */
const drainFleet = (redis: string, routes: Record<string, unknown>): Record<string, unknown> =>
  fleetMember(redis, { health: { active: { kind: 'none' } }, audio: { reattachGraceSeconds: 0 }, routes })
const status = async (url: string): Promise<number> => {
  try {
    return (await fetch(url)).status
  } catch {
    return 0
  }
}
const contactOf = (s: SessionReport): number => (s.open as { start?: { contactId?: number } }).start?.contactId ?? -1

interface Moved {
  contactId: number
  firstClose: { code: number; reason: string }
  shutdownFrame: Record<string, unknown> | undefined
  /** Frames sent on the second leg (all of them must reach the vendor). */
  after: Buffer
  answer: Record<string, unknown>
}

/**
 * One platform leg: streams on `from` until the gateway closes it; on 1012 it reconnects to `to` with
 * the same init, sends 25 frames at once (before CONNECTED: they are held), and ends the leg.
 */
async function platformCall(t: T, from: GatewayProcess, to: GatewayProcess, contactId: number): Promise<Moved> {
  const first = platformLeg(t, from.url('/audio/demo'), audioInit(contactId))
  if ((await first.answer).command !== 'CONNECTED') throw new Error(`leg ${contactId} did not connect`)
  await streamUntilClosed(first)
  const firstClose = await first.closed
  const shutdownFrame = first.messages.find(m => m.command === 'ERROR')
  const second = platformLeg(t, to.url('/audio/demo'), audioInit(contactId))
  await untilOpen(second.ws)
  const frames: Buffer[] = []
  for (let k = 0; k < 25; k++) frames.push(frameAt(1000 + k))
  for (const f of frames) second.send(f)
  const answer = await second.answer
  await sleep(200)
  second.ws.close(1000)
  await second.closed
  return { contactId, firstClose, shutdownFrame, after: Buffer.concat(frames), answer }
}

/**
 * Two emulators of a real vendor as the replicas of route demo (`route`: its mapping and params), behind two
 * gateways (drainFleet); `legs.count` calls from contact `legs.first` on the first gateway (`legs.what` when
 * they are), then that gateway is sent SIGTERM and exits 0. The emulators and each call as it moved.
 */
async function drainBetweenEmulators(
  t: Test,
  vendor: RealVendorOptions & { apiKey: string },
  route: { mapping: string; params?: Record<string, unknown> },
  legs: { count: number; first: number; what: string }
): Promise<{ emus: RealVendorEmulator[]; moved: Moved[] }> {
  const emus = [await startRealVendor(vendor), await startRealVendor(vendor)]
  t.teardown(async () => await Promise.all(emus.map(async e => await e.close())))
  const cfg = drainFleet(await needRedis(), {
    demo: {
      ...route,
      auth: { audio: ['${AUDIO_TOKEN}'] },
      upstreams: emus.map((e, i) => ({ name: `r${i}`, audio: e.url, credential: '${VENDOR_KEY}' }))
    }
  })
  const env = { VENDOR_KEY: vendor.apiKey }
  const [g1, g2] = await Promise.all([
    spawnGateway(t, { ...cfg, shutdown: { drainDelaySeconds: 0.5, legDrainSeconds: 1 } }, env),
    spawnGateway(t, cfg, env)
  ])
  const calls = Array.from({ length: legs.count }, (_, i) => platformCall(t, g1, g2, legs.first + i))
  t.ok(await until(() => emus.reduce((n, e) => n + e.sessions().length, 0) === legs.count), legs.what)
  process.kill(g1.pid, 'SIGTERM')
  const moved = await Promise.all(calls)
  t.equal(await g1.exited, 0)
  return { emus, moved }
}

t.test(
  'SIGTERM: readiness off first, text in flight answered, 20 legs move to the other gateway on their replica',
  async t => {
    const REDIS_URL = await needRedis()
    const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const b = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const cfg = drainFleet(REDIS_URL, { demo: routeTo([a, b], 'mappings/json-events.yaml') })
    // Started side by side (each waits for its own /livez). Legs spread over 1 s after the 1.5 s readiness
    // delay; the text request (2 s at the vendor) is still in flight when the gateway stops accepting.
    const [g1, g2] = await Promise.all([
      spawnGateway(t, { ...cfg, shutdown: { drainDelaySeconds: 1.5, legDrainSeconds: 1, deadlineSeconds: 60 } }),
      spawnGateway(t, cfg)
    ])
    t.ok(
      await until(
        async () => (await status(g1.adminUrl('/readyz'))) === 200 && (await status(g2.adminUrl('/readyz'))) === 200
      )
    )

    const calls = Array.from({ length: 20 }, (_, i) => platformCall(t, g1, g2, 930000 + i))
    t.ok(
      await until(() => a.sessions().length + b.sessions().length === 20),
      'twenty legs stream through the first gateway'
    )

    // A text request that is still at the vendor when the gateway stops accepting.
    for (const v of [a, b]) v.setText({ delayMs: 2000 })
    const text = fetch(g1.url('/text/demo'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(
        utteranceMessage({
          token: TEXT_TOKEN,
          contactId: 1,
          busNo: 4594,
          tenantId: 't1',
          participant: 'patron',
          text: 'hello'
        })
      )
    })
    t.ok(
      await until(() => a.textRequests().length + b.textRequests().length === 1),
      'the text request reached a vendor'
    )

    process.kill(g1.pid, 'SIGTERM')
    t.ok(await until(async () => (await status(g1.adminUrl('/readyz'))) === 503), '/readyz turns 503')
    const verbose = (await (await fetch(g1.adminUrl('/admin/readiness'))).json()) as { reasons: string[] }
    t.match(verbose.reasons, ['draining'])
    t.equal(await status(g1.adminUrl('/livez')), 200, 'it still answers')
    const during = platformLeg(t, g1.url('/audio/demo'), audioInit(939999))
    t.equal((await during.answer).command, 'CONNECTED', 'a leg arriving during the delay is still served')
    during.ws.close(1000)

    const answered = await text
    t.equal(answered.status, 200, 'the text request in flight is answered')
    const body = await answered.text()
    t.ok(body.length > 0 && JSON.parse(body) !== null, `with a body: ${body}`)

    const moved = await Promise.all(calls)
    for (const m of moved) {
      t.equal(m.firstClose.code, 1012, `leg ${m.contactId} closed with 1012`)
      t.match(m.shutdownFrame, { command: 'ERROR', parameters: { code: 'SHUTTING_DOWN' } })
      t.equal(m.answer.command, 'CONNECTED', `leg ${m.contactId} connected on the other gateway`)
    }
    const code = await g1.exited
    t.equal(code, 0, `the drained gateway exits 0 (${code}): ${g1.output().slice(-1500)}`)

    const all = (v: VendorEmulator): SessionReport[] =>
      v.sessions().filter(s => contactOf(s) >= 930000 && contactOf(s) < 939999)
    t.ok(await until(() => [...all(a), ...all(b)].filter(s => s.closed).length === 40), 'every vendor session ended')
    for (const m of moved) {
      const onA = all(a).filter(s => contactOf(s) === m.contactId)
      const onB = all(b).filter(s => contactOf(s) === m.contactId)
      const home = onA.length > 0 ? onA : onB
      t.same([home.length, onA.length * onB.length], [2, 0], `leg ${m.contactId} continued on the same replica`)
      t.match(home[0].closeReason, /draining/, 'the first vendor session was told why it ended')
      t.equal(home[1].sha256, sha256(m.after), 'nothing sent after reconnecting was lost')
    }
    const out = g1.output()
    t.equal(out.split('"event":"leg_drained"').length - 1, 20, 'each drained leg logged once')
    t.notMatch(out, /"level":"error"/, 'no error lines')
    t.match(out, /"event":"drain_finished","why":"drained"/)
  }
)

t.test(
  'SIGTERM with AudioHook: the next instance opens on the same replica with continuedSessions; no protocol violation',
  async t => {
    const { emus, moved } = await drainBetweenEmulators(
      t,
      { kind: 'audiohook', apiKey: 'ah-api-key-0123456789' },
      { mapping: 'mappings/audiohook.yaml', params: { organizationId: 'd7934305-0972-4844-938e-9060eef73d05' } },
      { count: 4, first: 940000, what: 'four legs on the first gateway' }
    )
    const sessions = (): RealVendorSession[] => emus.flatMap(e => e.sessions())
    t.ok(await until(() => sessions().filter(s => s.closed).length === 8), 'every vendor session ended')
    for (const m of moved) {
      const mine = emus.map(e => e.sessions().filter(s => sameContact(s, m.contactId)))
      const home = mine.find(list => list.length > 0)!
      t.same(mine.map(l => l.length).sort(), [0, 2], `leg ${m.contactId}: both vendor sessions on the same replica`)
      const [before, after] = home as [RealVendorSession, RealVendorSession]
      const firstOpen = before.texts[0] as { id: string }
      const lastSeq = Math.max(...(before.texts as { seq?: number }[]).map(x => x.seq ?? 0))
      const open = after.texts[0] as { parameters: { continuedSessions?: { id: string; clientseq: number }[] } }
      t.equal(open.parameters.continuedSessions?.[0]?.id, firstOpen.id, 'the new session names the one it continues')
      t.ok(
        (open.parameters.continuedSessions?.[0]?.clientseq ?? 0) >= lastSeq - 1,
        'with the client seq it had reached'
      )
      t.same([...before.errors, ...after.errors], [], 'no protocol violation on either session')
      t.equal(after.sha256, sha256(m.after), 'nothing sent after reconnecting was lost')
    }
  }
)

function sameContact(s: RealVendorSession, contactId: number): boolean {
  const open = s.texts[0] as { parameters?: { customConfig?: { contactId?: string } } } | undefined
  return open?.parameters?.customConfig?.contactId === String(contactId)
}

/** Every series of a metric, summed. */
const total = (text: string, metric: string): number =>
  text
    .split('\n')
    .filter(l => l.startsWith(`${metric}{`))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0)

t.test('a drain accounts for every frame it read, and the final counters are scraped before the exit', async t => {
  const v = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const g = await spawnGateway(t, {
    health: { active: { kind: 'none' } },
    routes: { demo: routeTo([v], 'mappings/json-events.yaml') },
    // Legs closed one by one over 1 s; then up to 60 s for one more scrape (ended by the scrape below).
    shutdown: { drainDelaySeconds: 0, legDrainSeconds: 1, deadlineSeconds: 120, metricsLingerSeconds: 60 }
  })
  const legs = Array.from({ length: 5 }, (_, i) => platformLeg(t, g.url('/audio/demo'), audioInit(960000 + i)))
  for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
  // Each leg streams at real rate until the gateway closes it.
  const streaming = legs.map(async l => {
    await streamUntilClosed(l)
  })
  t.ok(await until(() => v.sessions().filter(s => s.bytes >= 160 * 10).length === 5), 'every leg streams')
  process.kill(g.pid, 'SIGTERM')
  await Promise.all(streaming)
  for (const l of legs) t.equal((await l.closed).code, 1012)
  // The gateway's own line (a worker's carries `worker`): with workers, once every worker has exited.
  const finished = (): boolean => g.logs.lines.some(l => l.event === 'drain_finished' && l.worker === undefined)
  t.ok(await until(finished), 'the drain finished')
  t.ok(await until(() => v.sessions().every(s => s.closed)), 'every vendor session ended')

  // The process is still there for this scrape: the drained legs' final counters.
  const text = await (await fetch(g.adminUrl('/metrics'))).text()
  const fromPlatform = Number(
    /assist_gateway_audio_bytes_total\{route="demo",direction="from_platform"\} (\d+)/.exec(text)?.[1] ?? Number.NaN
  )
  const dropped = total(text, 'assist_gateway_audio_dropped_frames_total')
  const delivered = v.sessions().reduce((n, s) => n + s.bytes, 0)
  t.ok(fromPlatform > 0, `frames were read (${fromPlatform / 160})`)
  t.equal(delivered + dropped * 160, fromPlatform, 'every frame read is delivered or counted as dropped')
  t.equal(await g.exited, 0, 'after that scrape it exits (not at the 60 s linger)')
  t.match(g.output(), /"event":"metrics_final","how":"scraped"/)
})

t.test('a second SIGTERM stops at once; the deadline cuts a drain that would take longer', async t => {
  const v = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const base = { health: { active: { kind: 'none' } }, routes: { demo: routeTo([v], 'mappings/json-events.yaml') } }

  // Both gateways started side by side; each is used on its own below.
  const [g, h] = await Promise.all([
    spawnGateway(t, { ...base, shutdown: { drainDelaySeconds: 300, legDrainSeconds: 0, deadlineSeconds: 3600 } }),
    spawnGateway(t, { ...base, shutdown: { drainDelaySeconds: 0, legDrainSeconds: 600, deadlineSeconds: 1 } })
  ])

  // Twice: a drain that would wait 300 s ends at the second signal.
  const leg = platformLeg(t, g.url('/audio/demo'), audioInit(950001))
  t.equal((await leg.answer).command, 'CONNECTED')
  process.kill(g.pid, 'SIGTERM')
  t.ok(await until(() => g.output().includes('"event":"drain_started"')))
  process.kill(g.pid, 'SIGTERM')
  t.equal(await g.exited, 0, 'it exits')
  t.equal((await leg.closed).code, 1012, 'the live leg still gets 1012')
  t.match(g.output(), /"event":"drain_finished","why":"second signal \(SIGTERM\)"/)

  // Deadline: each process spreads its legs' closes over 600 s (the first at once); the rest are cut at
  // the 1 s deadline. Four legs, however the kernel spread them over the workers: at least two are cut.
  const legs = [2, 3, 4, 5].map(i => platformLeg(t, h.url('/audio/demo'), audioInit(950000 + i)))
  for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
  process.kill(h.pid, 'SIGTERM')
  t.equal(await h.exited, 0)
  t.same(await Promise.all(legs.map(async l => (await l.closed).code)), [1012, 1012, 1012, 1012], 'every leg got 1012')
  const held = h.logs.lines.filter(l => l.event === 'drain_started' && Number(l.legs) > 0).map(l => Number(l.legs))
  const cut = h.logs.lines.filter(l => l.event === 'drain_finished' && l.why === 'deadline' && 'legsCut' in l)
  t.equal(
    cut.reduce((n, l) => n + Number(l.legsCut), 0),
    held.reduce((n, k) => n + k - 1, 0),
    'each process closed its first leg and the deadline cut the rest, each logged by its process'
  )
  t.ok(cut.length > 0)
})

t.test(
  'SIGTERM with Twilio Media Streams: same call on the same replica, a new stream that starts as Twilio requires',
  async t => {
    const { emus, moved } = await drainBetweenEmulators(
      t,
      { kind: 'twilio-media', apiKey: 'twilio-key-0123456789', resultEveryMs: 0 },
      { mapping: 'mappings/twilio-media.yaml' },
      { count: 3, first: 970000, what: 'three legs on the first gateway' }
    )
    t.ok(await until(() => emus.flatMap(e => e.sessions()).filter(s => s.closed).length === 6), 'every stream ended')
    type Start = { event: string; sequenceNumber: string; start: { callSid: string } }
    const startOf = (s: RealVendorSession): Start | undefined => (s.texts as Start[]).find(m => m.event === 'start')
    for (const m of moved) {
      const callSid = `CA${'4594'.padStart(10, '0')}${String(m.contactId).padStart(22, '0')}`
      const mine = emus.map(e => e.sessions().filter(s => startOf(s)?.start.callSid === callSid))
      t.same(mine.map(l => l.length).sort(), [0, 2], `call ${m.contactId}: both streams on the same replica`)
      const [before, after] = mine.find(l => l.length > 0)! as [RealVendorSession, RealVendorSession]
      t.equal(startOf(after)?.sequenceNumber, '1', 'the new stream numbers its messages from 1, as Twilio requires')
      t.same([...before.errors, ...after.errors], [], 'no protocol violation on either stream')
      t.equal(after.sha256, sha256(m.after), 'nothing sent after reconnecting was lost')
    }
  }
)
