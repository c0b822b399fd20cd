import t from 'tap'
import {
  logged,
  platformLeg,
  roundTrip,
  routeTo,
  startGateway,
  startVendor,
  sleep,
  until,
  type PlatformLegClient
} from '../helpers/gateway'
import { uniqueFrame, uniqueFramesHash } from '../helpers/audio'
import { audioInit } from '../helpers/legs'

const frame = uniqueFrame
/** 160-byte platform frames a vendor session received (the gateway coalesces them into fewer writes). */
const framesIn = (s: { bytes: number }): number => s.bytes / 160

/** Pace `count` frames per leg at 50 frames/s from `first`, one scheduler for all legs (pacing only: nothing is timed). */
async function stream(legs: PlatformLegClient[], first: number, count: number): Promise<void> {
  const start = performance.now()
  let sent = 0
  while (sent < count) {
    const due = Math.min(count, Math.floor((performance.now() - start) / 20) + 1)
    for (; sent < due; sent++) legs.forEach((l, i) => l.send(frame(i, first + sent)))
    await sleep(5)
  }
}

t.test(
  'two replicas, 50 legs, one replica killed: no platform socket closes; the survivor gets the replay and every later frame, in order',
  async t => {
    const LEGS = 50
    const BEFORE = 100
    const AFTER = 100
    const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const b = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const gw = await startGateway(t, {
      audio: { replaySeconds: 1 },
      routes: { demo: routeTo([a, b], 'mappings/json-events.yaml') }
    })
    const legs: PlatformLegClient[] = []
    for (let i = 0; i < LEGS; i++) legs.push(platformLeg(t, gw.url('/audio/demo'), audioInit(300000 + i)))
    t.ok((await Promise.all(legs.map(async l => await l.answer))).every(x => x.command === 'CONNECTED'))
    // Each worker balances by least streams, a stream counting from the moment its replica is picked
    // (before its URL is built), and counts the other worker's as of its last sync: each worker's own
    // legs split evenly, the other's stale counts move it by a stream or two (19 and 8 of 50 were seen
    // when a stream counted only once its socket was opening).
    t.ok(
      a.sessions().length >= (2 * LEGS) / 5 && a.sessions().length <= (3 * LEGS) / 5,
      `least-streams balancing spreads the legs over both replicas (${a.sessions().length} of ${LEGS} on a)`
    )
    let closedEarly = 0
    for (const l of legs)
      void l.closed.then(() => {
        closedEarly++
      })

    await stream(legs, 0, BEFORE)
    await until(() => b.sessions().reduce((n, s) => n + framesIn(s), 0) === b.sessions().length * BEFORE)
    const onB = new Set(b.sessions().map(s => (s.open as { start: { contactId: number } }).start.contactId - 300000))
    await b.close()
    await stream(legs, BEFORE, AFTER)
    const total = BEFORE + AFTER
    // A replacement session polled while it opens has no open message yet (open is null): not this leg's, yet.
    const onA = (i: number): { bytes: number; sha256: string }[] =>
      a.sessions().filter(s => (s.open as { start: { contactId: number } } | null)?.start.contactId === 300000 + i)
    // Settled when every leg's survivor session has all audio up to the last frame sent.
    await until(() => legs.every((_, i) => onA(i).some(s => framesIn(s) >= (onB.has(i) ? AFTER : total))))
    // Replay and queued audio are paced (audio.replayRate): settled once no leg holds a backlog, and the
    // survivor's counts have stopped moving (what was written is on the wire, not yet counted).
    const held = /^assist_gateway_audio_buffered_bytes\{[^}]*\} (?!0$)/m
    t.ok(
      await until(async () => !held.test(await (await fetch(gw.adminUrl('/metrics'))).text())),
      'no leg holds a backlog'
    )
    let seen = -1
    await until(
      () => {
        const n = a.sessions().reduce((m, s) => m + framesIn(s), 0)
        const still = n === seen
        seen = n
        return still
      },
      30_000,
      100
    )
    // A barrier, not a sleep: a close the gateway sent before answering a ping has arrived by its pong.
    await Promise.all(legs.map(async l => await roundTrip(l.ws)))
    t.equal(closedEarly, 0, 'no platform socket closed')

    let exact = 0
    let replayed = 0
    for (let i = 0; i < LEGS; i++) {
      const sessions = onA(i)
      if (!onB.has(i)) {
        if (sessions.length === 1 && sessions[0].sha256 === uniqueFramesHash(i, 0, total)) exact++
        continue
      }
      t.equal(sessions.length, 1, `leg ${i}: one replacement session on the survivor`)
      const s = sessions[0]
      // The survivor holds a contiguous run [j, total): the replayed tail of what b had, then everything after.
      const j = total - framesIn(s)
      if (j <= BEFORE && j >= BEFORE - 50 - 5 && s.sha256 === uniqueFramesHash(i, j, total)) replayed++
      else t.fail(`leg ${i}: survivor got ${framesIn(s)} frames, not a replayed tail plus every later frame`)
    }
    t.equal(exact, LEGS - onB.size, 'legs on the surviving replica lost nothing')
    t.equal(replayed, onB.size, 'every failed-over leg: replay of the recent audio, then every later frame, in order')
    const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
    t.match(metrics, `assist_gateway_audio_failovers_total{route="demo",result="ok"} ${onB.size}`)
    t.match(metrics, `assist_gateway_audio_gap_seconds_count{route="demo"} ${onB.size}`)
    t.match(
      metrics,
      /^assist_gateway_audio_dropped_frames_total\{route="demo",reason="failover"\} 0$/m,
      'nothing was dropped'
    )
    for (const l of legs) l.ws.close(1000)
  }
)

t.test(
  'a failover that finds no replica within the timeout ends the leg with UPSTREAM_CLOSED and counts the lost audio',
  async t => {
    const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
    const gw = await startGateway(t, {
      audio: { failoverTimeoutSeconds: 0.6 },
      routes: { demo: routeTo([a], 'mappings/json-events.yaml') }
    })
    const leg = platformLeg(t, gw.url('/audio/demo'), audioInit(400001))
    t.equal((await leg.answer).command, 'CONNECTED')
    for (let i = 0; i < 5; i++) leg.send(frame(0, i))
    await until(() => a.sessions()[0]?.bytes === 5 * 160)
    await a.close()
    // At once, not paced: all of it reaches the gateway well inside the failover timeout, however busy the machine.
    for (let i = 5; i < 15; i++) leg.send(frame(0, i))
    const closed = await leg.closed
    t.equal(closed.code, 1011)
    t.match(leg.messages.at(-1), { command: 'ERROR', messageType: 'UPSTREAM_CLOSED' })
    const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
    t.match(metrics, 'assist_gateway_audio_failovers_total{route="demo",result="failed"} 1')
    t.match(
      metrics,
      /assist_gateway_audio_dropped_frames_total\{route="demo",reason="failover"\} 1[0-5]/,
      'the replayed and queued audio is counted as lost'
    )
    t.match(metrics, 'assist_gateway_audio_gap_seconds_count{route="demo"} 1')
    await until(() => logged(gw, 'failover_failed'))
    t.equal(gw.logs.lines.filter(l => l.event === 'failover_failed').length, 1, 'logged once per incident')
  }
)

t.test('a leg that reconnects within grace continues the same vendor session; after grace, a new one', async t => {
  const v = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  // The grace is the one real timer here (the gateway takes no clock): long enough that a busy machine
  // re-attaches within it, and waited for by polling, never by a fixed sleep.
  const gw = await startGateway(t, {
    audio: { reattachGraceSeconds: 2 },
    routes: { demo: routeTo([v], 'mappings/json-events.yaml') }
  })
  const first = platformLeg(t, gw.url('/audio/demo'), audioInit(500001))
  t.equal((await first.answer).command, 'CONNECTED')
  for (let i = 0; i < 10; i++) first.send(frame(0, i))
  await until(() => v.sessions()[0]?.bytes === 10 * 160)
  first.ws.terminate()
  await first.closed
  await until(() => logged(gw, 'platform_closed'))
  t.equal(v.sessions()[0].closed, false, 'the vendor session is kept during the grace')
  const second = platformLeg(t, gw.url('/audio/demo'), audioInit(500001))
  t.equal((await second.answer).command, 'CONNECTED', 'the handshake is repeated and answered')
  for (let i = 10; i < 20; i++) second.send(frame(0, i))
  await until(() => v.sessions()[0]?.bytes === 20 * 160)
  t.equal(v.sessions().length, 1, 'the vendor saw one session')
  t.equal(v.sessions()[0].sha256, uniqueFramesHash(0, 0, 20), 'and continuous audio')
  t.same(v.sessions()[0].texts, [], 'no stop in between')
  second.ws.close(1000)
  await second.closed
  await until(() => v.sessions()[0].closed)
  t.equal(v.sessions()[0].closed, true, 'after the grace the vendor session is closed')
  t.match(v.sessions()[0].texts, [{ event: 'stop' }], 'with the mapping close message')
  const third = platformLeg(t, gw.url('/audio/demo'), audioInit(500001))
  t.equal((await third.answer).command, 'CONNECTED')
  t.equal(v.sessions().length, 2, 'after grace a new vendor session')
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(metrics, 'assist_gateway_audio_reattach_total{route="demo",result="same_session"} 1')
})

t.test('a second connection of a leg whose first socket is still open takes over the session', async t => {
  const v = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const gw = await startGateway(t, {
    audio: { reattachGraceSeconds: 5 },
    routes: { demo: routeTo([v], 'mappings/json-events.yaml') }
  })
  const first = platformLeg(t, gw.url('/audio/demo'), audioInit(500002))
  t.equal((await first.answer).command, 'CONNECTED')
  const second = platformLeg(t, gw.url('/audio/demo'), audioInit(500002))
  t.equal((await second.answer).command, 'CONNECTED')
  const closed = await first.closed
  t.equal(closed.code, 1008)
  t.match(first.messages.at(-1), { command: 'ERROR', messageType: 'LEG_REPLACED' })
  t.equal(v.sessions().length, 1)
})

t.test('passive health: repeated connect failures eject a replica, never the last one', async t => {
  const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const gw = await startGateway(t, {
    health: { passive: { consecutiveFailures: 2, baseEjectionSeconds: 30 } },
    routes: {
      demo: {
        ...routeTo([a], 'mappings/json-events.yaml'),
        upstreams: [
          { name: 'dead', audio: 'ws://127.0.0.1:1/x' },
          { name: 'alive', audio: a.url }
        ]
      }
    }
  })
  // Passive health is per worker (docs/concepts/replicas-and-failover.md): legs go on until every worker
  // has seen its 2 failures; which worker a connection reaches is the kernel's choice.
  type Replica = { name: string; state: string; reason: string; workers: { state: string; reason: string }[] }
  const dead = async (): Promise<Replica> => {
    const ups = (await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as { routes: { replicas: Replica[] }[] }
    return ups.routes[0].replicas.find(r => r.name === 'dead')!
  }
  let legs = 0
  while (legs < 40 && !(await dead()).workers.every(w => w.state === 'ejected')) {
    const leg = platformLeg(t, gw.url('/audio/demo'), audioInit(600000 + legs++))
    const answer = await leg.answer
    if (answer.command !== 'CONNECTED') t.fail(`leg ${legs} was refused: the next replica is always tried`)
    leg.ws.close(1000)
    await leg.closed
  }
  t.pass(`${legs} legs connected, each trying the next replica`)
  const seen = await dead()
  t.equal(seen.workers.length, gw.workers)
  for (const w of seen.workers) {
    t.equal(w.state, 'ejected', 'every worker ejected it')
    t.match(w.reason, /2 failures in a row, last: connect: ECONNREFUSED; ejected for 30 s/)
  }
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(
    metrics,
    `assist_gateway_upstream_ejections_total{route="demo",upstream="dead"} ${gw.workers}`,
    'one ejection per worker, summed for the instance'
  )
  t.match(metrics, 'assist_gateway_upstream_healthy{route="demo",upstream="dead"} 0')
  t.match(metrics, 'assist_gateway_upstream_healthy{route="demo",upstream="alive"} 1')
})
