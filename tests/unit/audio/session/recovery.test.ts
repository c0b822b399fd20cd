import t from 'tap'
import { replicaSecrets, vendorReason } from '../../../../gateway/audio/session/failover'
import { FrameQueue } from '../../../../gateway/audio/feed/frame-ring'
import { Pacer } from '../../../../gateway/audio/feed/pacer'
import { VendorFeed, type AudioSink } from '../../../../gateway/audio/feed/feed'
import { LegCounters } from '../../../../gateway/telemetry/metrics'
import { FakeClock } from '../../../helpers/fake-clock'
import { type FakeConnection, frame, harness, readyHarness, SETTINGS } from '../harness'

// Issue 9, items 3 and 4 on the fake clock: paced recovery, no storm, nothing lost unseen.

const DEFAULTS = {
  replayRate: 4,
  sessionBreaker: { quickLossSeconds: 5, quickLosses: 3, windowSeconds: 30, holdOffSeconds: 30 },
  recoveryBackoff: { baseMs: 200, maxMs: 10000, stableSeconds: 30 },
  failoverTimeoutSeconds: 30,
  replaySeconds: 2,
  holdBufferBytes: 64000,
  bufferBytes: 64000,
  vendorHighWaterBytes: 65536
}

/** A sink that records (clock ms, bytes) per write. */
function timedSink(clock: FakeClock): AudioSink & { log: [number, number, number][] } {
  const log: [number, number, number][] = []
  return {
    bufferedAmount: 0,
    log,
    writeAudio(data) {
      const b = data instanceof Uint8Array ? data : new Uint8Array(data)
      log.push([clock.now(), b.byteLength, b[0]])
    }
  }
}

/** The most bytes any window of `ms` saw, sliding over each write. */
function peakBytes(log: [number, number, number][], from: number, ms: number): number {
  let peak = 0
  for (const [start] of log) {
    if (start < from) continue
    let n = 0
    for (const [at, bytes] of log) if (at >= start && at < start + ms) n += bytes
    peak = Math.max(peak, n)
  }
  return peak
}

t.test('the pacer lets at most rate × real time through, one tick of burst', async t => {
  const p = new Pacer(2, 20)
  p.start(0)
  let sent = 0
  for (let now = 0; now <= 1000; now += 10) {
    p.refill(now)
    while (p.take(160)) sent += 160
  }
  t.ok(sent <= 2 * 8000 + 320, `1 s at 2×: ${sent} bytes`)
  t.ok(sent >= 2 * 8000 - 320, 'and not much less')
  t.throws(() => new Pacer(0, 20), TypeError)
})

t.test('held audio goes at replayRate × real time, in order, and live audio waits behind it', async t => {
  const clock = new FakeClock()
  const counters = new LegCounters('r')
  const relay = new VendorFeed(counters, { ...SETTINGS, ...DEFAULTS }, clock, () => {}, undefined, 2)
  for (let i = 0; i < 100; i++) relay.write(frame(i)) // 2 s held before ready
  const sink = timedSink(clock)
  relay.flowTo(sink)
  for (let i = 100; i < 250; i++) {
    relay.write(frame(i % 256)) // live, 20 ms apart
    clock.advance(20)
  }
  clock.advance(3000)
  t.same(
    sink.log.map(l => l[2]),
    Array.from({ length: 250 }, (_, i) => i % 256),
    'every frame once, in order'
  )
  const peak = peakBytes(sink.log, 0, 1000)
  t.ok(peak <= 2 * 8 * (1000 + 100) + 160, `at most 2 × (1 s + 0.1 s of burst) in any 1 s window (${peak} bytes)`)
  t.ok(clock.pending <= 1, 'one timer at most')
  clock.advance(1000)
  t.equal(clock.pending, 0, 'no timer once the backlog is gone')
  relay.write(frame(7))
  t.equal(sink.log.at(-1)?.[2], 7, 'then live audio is written through')
})

t.test('pacing keeps its rate when the timer ticks late (a busy event loop), within 0.1 s of burst', async t => {
  const clock = new FakeClock()
  const relay = new VendorFeed(new LegCounters('r'), { ...SETTINGS, ...DEFAULTS }, clock, () => {}, undefined, 2)
  for (let i = 0; i < 200; i++) relay.write(frame(i & 0xff)) // 4 s held
  const sink = timedSink(clock)
  relay.flowTo(sink)
  // Late ticks: time jumps 80 ms between timer runs.
  for (let i = 0; i < 25; i++) clock.advance(80)
  const sent = sink.log.reduce((n, l) => n + l[1], 0)
  t.ok(sent >= 2 * 8000 * 2 * 0.95, `2 s at 2×: ${sent} bytes (late ticks lose no rate)`)
  t.ok(sent <= 2 * 8 * 2100 + 160, 'and no more than the rate plus its burst')
})

/** Drive a leg for `ms` of platform audio; every new connection is ready at once; `onConn` may fail it. */
function drive(h: ReturnType<typeof harness>, ms: number, onConn: (c: FakeConnection) => void): void {
  for (let at = 0; at < ms; at += 20) {
    for (const c of h.conns) if (c.state === 'OPENING') c.ready()
    for (const c of h.conns) if (c.state === 'READY') onConn(c)
    if (h.session.state === 'CLOSED') return
    h.session.feed.write(frame((at / 20) & 0xff))
    h.clock.advance(20)
  }
}

t.test(
  'a vendor that ends every session after 1.5 s of audio (close 3007, rate exceeded): a few sessions in 10 s, no storm',
  async t => {
    const h = harness({
      replicas: ['a'],
      settings: DEFAULTS,
      audio: { closeCodes: { 3007: 'rate-exceeded' }, replayRate: 1 },
      random: () => 0.5
    })
    h.session.start(null)
    const endAfter = (c: FakeConnection): void => {
      if (c.written.reduce((n, b) => n + b.length, 0) >= 12000)
        c.failWith({ kind: 'closed', code: 3007, reason: 'Input duration violation', socket: null })
    }
    drive(h, 10_000, endAfter)
    t.ok(h.conns.length <= 4, `${h.conns.length} vendor sessions in 10 s`)
    t.ok(h.replica('a').benched, 'the replica is benched by its session-open breaker')
    t.match(h.replica('a').ejectReason, /3 vendor sessions lost within 5 s of opening/)
    const text = await h.metrics.registry.metrics()
    t.match(text, /assist_gateway_audio_failovers_total\{route="r",result="backoff"\} [1-9]/, 'backoffs counted')
    t.equal(h.owner.failures.length, 0, 'the leg is still waiting within its failover deadline')
    drive(h, 30_000, endAfter)
    t.ok(h.conns.length <= 4, `${h.conns.length} sessions in 40 s: none while the replica is held off`)
    t.ok(h.session.counters.dropFailover > 0, 'audio the leg could not queue meanwhile is counted')
  }
)

t.test(
  'backoff: a failover soon after the last ready waits, exponentially with jitter; a stable session resets it',
  async t => {
    const h = harness({
      replicas: ['a', 'b'],
      settings: { ...DEFAULTS, sessionBreaker: { ...DEFAULTS.sessionBreaker, quickLossSeconds: 0 } },
      random: () => 0
    })
    h.session.start(null)
    h.conn().ready()
    h.clock.advance(31_000)
    h.conn().failWith({ kind: 'closed', code: 1006, reason: '', socket: null })
    t.equal(h.conns.length, 2, 'after a stable session: the replacement opens at once')
    h.conn().ready()
    h.clock.advance(1000)
    h.conn().failWith({ kind: 'closed', code: 1006, reason: '', socket: null })
    t.equal(h.conns.length, 2, 'lost 1 s after ready: it waits')
    h.clock.advance(99)
    t.equal(h.conns.length, 2, 'jitter 0: half of the 200 ms base')
    h.clock.advance(1)
    t.equal(h.conns.length, 3)
    h.conn().ready()
    h.clock.advance(1000)
    h.conn().failWith({ kind: 'closed', code: 1006, reason: '', socket: null })
    h.clock.advance(199)
    t.equal(h.conns.length, 3, 'the next waits twice as long')
    h.clock.advance(1)
    t.equal(h.conns.length, 4)
  }
)

t.test(
  'close codes classified by the mapping: auth ends the leg with the vendor reason, scrubbed and bounded',
  async t => {
    const h = readyHarness({ audio: { closeCodes: { 1008: 'auth', 3005: 'transient' } } })
    h.conn().failWith({ kind: 'closed', code: 3005, reason: 'internal', socket: null })
    t.equal(h.session.state, 'RECOVERING', 'transient: fail over')
    h.conn().failWith({ kind: 'closed', code: 1008, reason: 'Unauthorized connection: bad key', socket: null })
    t.match(h.owner.failures, [
      {
        error: { code: 'UPSTREAM_REFUSED' },
        extra: {
          vendorCloseCode: 1008,
          vendorCloseClass: 'auth',
          vendorCloseReason: 'Unauthorized connection: bad key'
        }
      }
    ])
    t.equal(h.conns.length, 2, 'no other replica tried after a refused credential')
    t.equal(h.replica('b').consecutiveFailures, 0, 'the vendor verdict is not charged to the replica')
    t.equal(vendorReason('key sk-12345 rejected\n', ['sk-12345']), 'key [redacted] rejected ')
    t.equal(vendorReason('x'.repeat(500), []).length, 120)
    t.same(replicaSecrets(h.replica('a')), [])
  }
)

t.test(
  'loss report: audio written since the last sign of life beyond the replay is counted; gap from the last sign of life',
  async t => {
    const h = harness({ replicas: ['a', 'b'] }) // replay: the last 5 frames
    h.session.start(null)
    h.conn().ready()
    for (let i = 0; i < 30; i++) h.session.feed.write(frame(i))
    h.clock.advance(10_000)
    const lost = h.conn()
    Object.assign(lost, { lossReport: () => ({ bytesSinceLife: 25 * 160, unreadBytes: 12 * 160, lastLifeAt: 1000 }) })
    lost.failWith({ kind: 'closed', code: 1006, reason: '', socket: { kind: 'missed-pong' } })
    t.equal(h.session.counters.dropFailoverUnreplayed, 20, '25 since the last sign of life, 5 replayed: 20 counted')
    h.conn().ready()
    t.same(h.conn().frames, [25, 26, 27, 28, 29], 'the replay')
    const text = await h.metrics.registry.metrics()
    t.match(text, 'assist_gateway_audio_dropped_frames_total{route="r",reason="failover_unreplayed"} 20')
    t.match(
      text,
      'assist_gateway_audio_gap_seconds_sum{route="r"} 9',
      'gap from the last sign of life (1 s), not from detection'
    )
    t.match(
      h.logs.lines.find(l => l.event === 'failover_start'),
      { unreplayed: 20, replayFrames: 5 }
    )
  }
)

t.test('a hold buffer that fills before ready is charged to the replica and the next one is tried', async t => {
  const h = harness({ replicas: ['a', 'b'] }) // hold: 10 frames
  h.session.start(null)
  for (let i = 0; i < 11; i++) h.session.feed.write(frame(i))
  t.equal(h.conns[0].state, 'CLOSED', 'the never-ready connection is given up')
  t.equal(h.replica('a').consecutiveFailures, 1, 'and charged to its replica')
  t.equal(h.conns[1].replica.name, 'b')
  for (let i = 11; i < 15; i++) h.session.feed.write(frame(i))
  t.equal(h.owner.failures.length, 0, 'the leg goes on')
  h.conn().ready()
  t.equal(h.owner.readies.length, 1, 'CONNECTED from the healthy replica')
  t.same(h.conn().frames, [5, 6, 7, 8, 9, 10, 11, 12, 13, 14], 'the newest held audio')
  t.equal(h.session.counters.dropHold, 5, 'the oldest dropped, counted')
})

t.test('never-ready replicas are ejected passively; new legs then go to the healthy one', async t => {
  const h = harness({ replicas: ['a', 'b'] })
  const pool = h.route.pool
  for (let i = 0; i < 2; i++) {
    t.equal(pool.audioCandidates()[0].name, 'a')
    h.session.start(null)
    h.conn().failWith({ kind: 'not-ready' })
    if (h.conn().state !== 'CLOSED') h.conn().ready()
  }
  t.ok(h.replica('a').ejected, 'ejected after consecutive not-ready failures')
  t.same(
    pool.audioCandidates().map(r => r.name),
    ['b']
  )
})

t.test(
  'a lasting backlog (a vendor paced at 1×) copies every frame into one buffer, allocating none once warm',
  async t => {
    const q = new FrameQueue()
    for (let i = 0; i < 8; i++) q.push(new Uint8Array(frame(i)))
    const capacity = q.capacity
    for (let i = 8; i < 2000; i++) {
      q.push(new Uint8Array(frame(i & 0xff)))
      const f = q.takeRun(0)
      // Oldest first, across many turns of the buffer, one whole frame per take.
      if (f[0] !== ((i - 8) & 0xff) || f.length !== 160 || q.runFrames !== 1) t.fail(`take ${i}`)
    }
    t.equal(q.capacity, capacity, 'the same buffer all along')
    t.equal(q.frames, 8)
    q.push(new Uint8Array(80))
    t.equal(q.runBytes(1000), 7 * 160, 'a run is whole entries, until at least the size asked')
    t.equal(q.runBytes(5000), 8 * 160 + 80, 'or all of them')
  }
)

t.test('failover off: what the lost vendor may not have processed is counted when the leg ends', async t => {
  const h = readyHarness({ settings: { failoverTimeoutSeconds: 0 } })
  Object.assign(h.conn(), { lossReport: () => ({ bytesSinceLife: 7 * 160, unreadBytes: 9 * 160, lastLifeAt: 0 }) })
  h.conn().failWith({ kind: 'closed', code: 1006, reason: '', socket: null })
  t.match(h.owner.failures, [{ error: { code: 'UPSTREAM_CLOSED' } }])
  t.equal(h.session.counters.dropFailoverUnreplayed, 9, 'the larger of since-life and unread')
})

t.test('the session-open breaker counts sessions lost once ready, never a refusal before ready', async t => {
  const h = readyHarness({ replicas: ['a'], settings: DEFAULTS, random: () => 0 })
  h.conn().failWith({ kind: 'closed', code: 1006, reason: '', socket: null })
  let refused = 0
  for (let i = 0; i < 4; i++) {
    h.clock.advance(5000)
    if (h.conn().state === 'CLOSED') continue
    h.conn().failWith({ kind: 'refused', vendorMessage: 'busy' })
    refused++
  }
  t.ok(refused >= 3, `${refused} replacements refused before ready`)
  t.equal(h.replica('a').quickLosses.length, 1, 'only the loss after ready counts')
  t.notOk(h.replica('a').benched)
})
