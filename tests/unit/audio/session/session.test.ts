import t from 'tap'
import { type FakeConnection, FakeLeg, frame, type Harness, harness, readyHarness } from '../harness'
import { EARLY_RESULTS_MAX } from '../../../../gateway/audio/session/kept-results'

// The vendor session state machine on fake connections and a fake clock (tests/unit/audio/harness.ts).

const UNREACHABLE = { kind: 'unreachable', socket: { kind: 'network', code: 'ECONNREFUSED' } } as const
const DROPPED = { kind: 'closed', code: 1006, reason: '', socket: null } as const

t.test('first open: audio is held until the vendor is ready, then goes out first and in order', async t => {
  const h = harness()
  h.session.start(null)
  t.equal(h.session.state, 'OPENING')
  for (let i = 0; i < 3; i++) h.session.feed.write(frame(i))
  t.same(h.conn().frames, [], 'nothing before ready')
  h.conn().ready({ vendorSessionId: 'v1' })
  h.session.feed.write(frame(3))
  t.equal(h.session.state, 'READY')
  t.same(h.conn().frames, [0, 1, 2, 3])
  t.same(h.owner.readies, [{ vendorSessionId: 'v1' }], 'the owner is told once, with the vendor parameters')
  t.equal(h.session.counters.framesToVendor, 4)
})

t.test(
  'hold overflow on the last replica: more audio before ready than holdBufferBytes ends the leg, every frame counted',
  async t => {
    const h = harness({ replicas: ['a'] })
    h.session.start(null)
    for (let i = 0; i < 11; i++) h.session.feed.write(frame(i))
    t.equal(h.owner.failures[0]?.error.code, 'HOLD_BUFFER_OVERFLOW')
    t.equal(h.session.counters.dropHold, 11)
    t.equal(h.session.state, 'CLOSED')
    t.equal(h.conn().state, 'CLOSED', 'the opening connection is aborted')
    h.session.feed.write(frame(12))
    t.equal(h.session.counters.dropAfterClose, 1, 'later audio is counted as late')
  }
)

t.test(
  'backpressure drop-oldest: a backed-up vendor keeps the newest audio, drops counted, flushed on drain',
  async t => {
    const h = readyHarness()
    h.conn().bufferedAmount = 5000
    for (let i = 0; i < 25; i++) h.session.feed.write(frame(i))
    t.equal(h.session.counters.dropBackpressure, 5, 'bufferBytes holds 20 frames')
    t.equal(h.session.counters.bufferedBytes, 3200)
    h.clock.advance(10)
    t.same(h.conn().frames, [], 'still backed up: nothing written')
    h.conn().bufferedAmount = 0
    h.clock.advance(10)
    t.same(
      h.conn().frames,
      Array.from({ length: 20 }, (_, i) => i + 5),
      'the newest 20, in order'
    )
    t.equal(h.session.counters.bufferedBytes, 0)
    t.same(h.owner.failures, [])
  }
)

t.test('backpressure close: a backed-up vendor past bufferBytes ends the leg with BACKPRESSURE_OVERFLOW', async t => {
  const h = readyHarness({ settings: { backpressurePolicy: 'close' } })
  h.conn().bufferedAmount = 5000
  for (let i = 0; i < 21; i++) h.session.feed.write(frame(i))
  t.equal(h.owner.failures[0]?.error.code, 'BACKPRESSURE_OVERFLOW')
  t.equal(h.session.counters.dropBackpressure, 21)
  t.equal(h.session.state, 'CLOSED')
})

t.test('first open: an unreachable replica passes to the next; a vendor refusal ends the leg at once', async t => {
  const h = harness({ replicas: ['a', 'b', 'c'] })
  h.session.start(null)
  t.equal(h.conn().replica.name, 'a')
  h.conn().failWith(UNREACHABLE)
  t.equal(h.conns.length, 2)
  t.equal(h.conn().replica.name, 'b')
  h.conn().failWith({ kind: 'refused', vendorMessage: 'no such model' })
  t.equal(h.conns.length, 2, 'c is not tried: the vendor said no')
  t.match(h.owner.failures, [
    { error: { code: 'UPSTREAM_REFUSED' }, extra: { upstream: 'b', vendorMessage: 'no such model' } }
  ])
  t.equal(h.replica('a').consecutiveFailures, 1, 'unreachable counts against the replica')
  t.equal(h.replica('b').consecutiveFailures, 0, 'a refusal does not')
  t.ok(h.logs.events().includes('upstream_connect_failed'))
})

t.test(
  'first open: every replica unreachable is UPSTREAM_UNREACHABLE naming the last failure; none is NO_HEALTHY_UPSTREAM',
  async t => {
    const h = harness()
    h.session.start(null)
    h.conn().failWith(UNREACHABLE)
    h.conn().failWith({ kind: 'unreachable', socket: { kind: 'upgrade', status: 401 } })
    t.match(h.owner.failures, [{ error: { code: 'UPSTREAM_UNREACHABLE', detail: 'HTTP 401' } }])
    t.equal(h.replica('b').consecutiveFailures, 0, 'an upgrade 4xx is the vendor verdict, not a sick replica')

    const none = harness({ replicas: [] })
    none.session.start(null)
    t.equal(none.owner.failures[0]?.error.code, 'NO_HEALTHY_UPSTREAM')
  }
)

t.test(
  'ready timeout (on the last replica) and a close before ready end the first open with their own codes',
  async t => {
    const h = harness({ replicas: ['a'] })
    h.session.start(null)
    h.conn().failWith({ kind: 'not-ready' })
    t.match(h.owner.failures, [{ error: { code: 'UPSTREAM_NOT_READY' }, extra: { upstream: 'a' } }])
    t.equal(h.replica('a').consecutiveFailures, 1, 'not ready in time is gateway-side')

    const c = harness()
    c.session.start(null)
    c.conn().failWith({ kind: 'closed', code: 4000, reason: 'bad', socket: null })
    t.match(c.owner.failures, [{ error: { code: 'UPSTREAM_REFUSED' }, extra: { vendorCloseCode: 4000 } }])
  }
)

t.test('a mapping failure ends the leg with MAPPING_FAILED at once; its text is only a logged detail', async t => {
  const h = harness({ replicas: ['a', 'b'] })
  h.session.start(null)
  h.conn().failWith({ kind: 'mapping', stage: 'url', error: 'secret from the init message' })
  t.equal(h.conns.length, 1, 'no other replica is tried')
  t.match(h.owner.failures, [
    { error: { code: 'MAPPING_FAILED', detail: 'audio.url' }, extra: { detail: 'secret from the init message' } }
  ])
  t.notOk(h.owner.failures[0].error.message.includes('secret'))
})

t.test(
  'failover: a loss mid-call replays recent audio to a replacement on another replica; the leg stays open',
  async t => {
    const h = readyHarness()
    for (let i = 0; i < 8; i++) h.session.feed.write(frame(i))
    const a = h.conn()
    a.failWith(DROPPED)
    t.equal(h.session.state, 'RECOVERING')
    t.equal(h.conn().replica.name, 'b', 'another replica first')
    h.session.feed.write(frame(8))
    h.session.feed.write(frame(9))
    h.clock.advance(300)
    h.conn().ready()
    t.equal(h.session.state, 'READY')
    t.same(h.conn().frames, [3, 4, 5, 6, 7, 8, 9], 'the replay ring (5 frames), then what came meanwhile')
    t.same(h.owner.failures, [], 'the owner never hears of it')
    t.equal(h.replica('a').consecutiveFailures, 1, 'an abnormal close counts against the lost replica')
    const metrics = await h.metrics.registry.metrics()
    t.match(metrics, /assist_gateway_audio_failovers_total\{route="r",result="ok"\} 1/)
    t.match(
      h.logs.lines.find(l => l.event === 'failover_done'),
      { upstream: 'b', from: 'a', gapSeconds: 0.3 }
    )
  }
)

t.test(
  'failover backoff and deadline: rounds wait 100, 200, 400… ms (jitter at its top); past failoverTimeoutSeconds the leg ends',
  async t => {
    const h = readyHarness({ replicas: ['a'] })
    h.session.feed.write(frame(1))
    h.conn().failWith(DROPPED)
    t.equal(h.conns.length, 2, 'the lost replica is still better than none')
    const opened: number[] = []
    let last = h.conns.length
    for (let ms = 0; ms < 2500 && h.session.state === 'RECOVERING'; ms += 10) {
      if (h.conns.length > last) {
        opened.push(h.clock.now())
        last = h.conns.length
      }
      if (h.conn().state !== 'CLOSED') h.conn().failWith(UNREACHABLE)
      h.clock.advance(10)
    }
    t.same(opened, [100, 300, 700, 1500, 2000], 'backoff between rounds; the last one is cut to the deadline')
    t.equal(h.session.state, 'CLOSED')
    t.match(h.owner.failures, [{ error: { code: 'UPSTREAM_CLOSED', detail: /within 2 s \(last: ECONNREFUSED\)/ } }])
    t.equal(h.session.counters.dropFailover, 1, 'the replayed frame is lost, counted')
    t.ok(h.logs.events().includes('failover_failed'))
  }
)

t.test('failover off: a loss ends the leg with UPSTREAM_CLOSED and the vendor close code', async t => {
  const h = readyHarness({ settings: { failoverTimeoutSeconds: 0 } })
  h.conn().failWith({ kind: 'closed', code: 1011, reason: 'oops', socket: null })
  t.match(h.owner.failures, [
    { error: { code: 'UPSTREAM_CLOSED' }, extra: { vendorCloseCode: 1011, vendorCloseReason: 'oops' } }
  ])
})

t.test('replica marked down: the connection is lost without counting against the replica, and fails over', async t => {
  const h = readyHarness()
  h.conn().failWith({ kind: 'replica-down', why: 'replica a marked down' })
  t.equal(h.session.state, 'RECOVERING')
  t.equal(h.replica('a').consecutiveFailures, 0)
  t.equal(h.conn().replica.name, 'b')
})

t.test('park, grace, re-attach: paused while parked; the returning leg waits for the resume frame', async t => {
  const h = readyHarness({ audio: { resume: async () => ({ type: 'resume' }) } })
  h.session.park()
  t.equal(h.registry.parkedCount, 1)
  t.same(h.conn().controls, ['pause'])
  h.clock.advance(4000)
  const back = new FakeLeg()
  const claimed = h.registry.claim('r:1:2:TX', back, { again: true }, h.logs.log)
  t.ok(claimed.ok && claimed.value === h.session, 'claimed within grace')
  t.equal(h.registry.parkedCount, 0)
  t.equal(h.session.state, 'RESUMING')
  t.equal(back.readies.length, 1, 'the returning leg is told ready at once')
  h.session.feed.write(frame(1))
  t.same(h.conn().frames, [], 'audio waits for the resume frame')
  h.conn().controlsSent()
  t.equal(h.session.state, 'READY')
  t.same(h.conn().frames, [1])
  h.clock.advance(10_000)
  t.equal(h.session.state, 'READY', 'the grace timer was cancelled')
})

t.test('park: no re-attach within the grace closes the vendor session with a goodbye', async t => {
  const h = readyHarness()
  h.session.park()
  h.clock.advance(4999)
  t.equal(h.session.state, 'READY')
  h.clock.advance(1)
  t.equal(h.session.state, 'CLOSED')
  t.equal(h.conn().state, 'CLOSING', 'the connection says goodbye')
  t.same(
    h.registry.claim('r:1:2:TX', new FakeLeg(), {}, h.logs.log),
    { ok: true, value: null },
    'nothing left to claim'
  )
  t.ok(h.logs.events().includes('grace_expired'))
})

t.test('park: a session still opening is closed, not kept; a parked session that is lost just closes', async t => {
  const h = harness()
  h.session.start(null)
  h.session.park()
  t.equal(h.session.state, 'CLOSED')
  t.equal(h.conn().state, 'CLOSED')

  const p = harness()
  p.session.start(null)
  p.conn().ready()
  p.session.park()
  p.conn().failWith(DROPPED)
  t.equal(p.session.state, 'CLOSED')
  t.equal(p.conns.length, 1, 'no failover for nobody')
  t.ok(p.logs.events().includes('parked_session_lost'))
})

t.test('supersede: a second leg with the same identity takes the session over from the first', async t => {
  const h = readyHarness()
  const second = new FakeLeg()
  h.registry.claim('r:1:2:TX', second, {}, h.logs.log)
  t.equal(h.owner.supersededCount, 1)
  t.equal(h.session.attached, second)
  h.conn().result('{"command":"MESSAGE"}')
  t.same(second.delivered, ['{"command":"MESSAGE"}'])
  t.same(h.owner.delivered, [])
})

t.test(
  'rotation: a new connection on the same replica takes over when ready; a failed one keeps the current',
  async t => {
    const h = readyHarness({ audio: { rotateAfterMs: 1000 } })
    const first = h.conn()
    h.clock.advance(1000)
    t.equal(h.conns.length, 2)
    t.equal(h.conn().replica.name, 'a', 'same replica')
    h.conn().failWith(UNREACHABLE)
    h.session.feed.write(frame(1))
    t.same(first.frames, [1], 'the current connection carries on')
    t.ok(h.logs.events().includes('rotation_failed'))
    h.clock.advance(1000)
    const second = h.conn()
    t.not(second, first)
    second.ready()
    h.session.feed.write(frame(2))
    t.equal(first.state, 'CLOSING', 'the old one says goodbye')
    t.same(second.frames, [2])
    t.equal(h.owner.readies.length, 1, 'the platform never notices')
    t.ok(h.logs.events().includes('rotated'))
  }
)

/**
 * A session that rotates after 1 s: the first connection ready (`confirmWaits`: it holds its
 * confirmation until told), `before` run on it, then the clock past the rotation and the replacement ready.
 */
function rotated(
  opts: {
    audio?: NonNullable<Parameters<typeof harness>[0]>['audio']
    confirmWaits?: boolean
    before?: (h: Harness) => void
  } = {}
): { h: Harness; first: FakeConnection; second: FakeConnection } {
  const h = readyHarness({ audio: { rotateAfterMs: 1000, ...opts.audio } })
  const first = h.conn()
  first.confirmWaits = opts.confirmWaits ?? false
  opts.before?.(h)
  h.clock.advance(1000)
  const second = h.conn()
  second.ready()
  return { h, first, second }
}

t.test(
  'issue 19: a retired connection whose goodbye the vendor never completes: what it had not read is counted lost, also after the leg ended',
  async t => {
    const { h, first, second } = rotated({
      before: h => {
        for (let i = 0; i < 3; i++) h.session.feed.write(frame(i))
      }
    })
    t.equal(first.state, 'CLOSING', 'rotated: the old one says goodbye')
    first.goodbyeUnconfirmed(3 * 160)
    t.equal(h.session.counters.dropFailoverUnreplayed, 3, 'the 3 frames it never read are counted')
    t.ok(h.logs.events().includes('goodbye_unconfirmed'))
    h.session.close(true)
    t.equal(second.state, 'CLOSING')
    second.goodbyeUnconfirmed(2 * 160)
    t.equal(
      h.metrics.totals().get(h.route.name)?.dropFailoverUnreplayed,
      5,
      'the leg had ended: its route total still counts the last goodbye'
    )
  }
)

t.test(
  'issue 19: make-before-break switches only once the current connection confirmed what it was sent (its pong)',
  async t => {
    const { h, first, second } = rotated({ confirmWaits: true })
    h.session.feed.write(frame(1))
    t.equal(first.state, 'READY', 'not yet: the current one has not confirmed')
    t.same(first.frames, [1], 'and still carries the audio')
    first.confirmed()
    h.session.feed.write(frame(2))
    t.equal(first.state, 'CLOSING', 'confirmed: the old one says goodbye')
    t.same(second.frames, [2], 'and the new one carries the audio')
  }
)

t.test(
  'a confirmation that comes while the session resumes after a re-attach still completes the handover',
  async t => {
    const { h, first, second } = rotated({ audio: { resume: async () => ({ type: 'resume' }) }, confirmWaits: true })
    h.session.park()
    h.registry.claim('r:1:2:TX', new FakeLeg(), { again: true }, h.logs.log)
    t.equal(h.session.state, 'RESUMING')
    first.confirmed()
    t.equal(first.state, 'CLOSING', 'the old one says goodbye')
    t.not(second.state, 'CLOSED', 'the new one carries on')
  }
)

t.test(
  'issue 19: the current connection lost while a ready replacement waits for its confirmation: the replacement takes over with the replay, nothing else opened',
  async t => {
    const { h, first, second } = rotated({
      confirmWaits: true,
      before: h => {
        for (let i = 0; i < 3; i++) h.session.feed.write(frame(i))
      }
    })
    h.session.feed.write(frame(3))
    // A frozen vendor: its pong never comes, the heartbeat finds it lost.
    first.lossReport = () => ({ bytesSinceLife: 2 * 160, unreadBytes: 0, lastLifeAt: 0 })
    first.failWith(DROPPED)
    t.equal(h.conns.length, 2, 'no third connection: the ready one is the replacement')
    t.equal(h.session.state, 'READY')
    h.session.feed.write(frame(4))
    h.clock.advance(300)
    t.same(second.frames, [0, 1, 2, 3, 4], 'the replay ring, then the live audio, on the replacement')
    t.equal(h.session.counters.dropFailoverUnreplayed, 0, 'the replay covered what the lost one had not read')
    t.ok(h.logs.events().includes('failover_done'))
    t.equal(second.state, 'READY')
  }
)

t.test('close: graceful hands queued audio to the vendor, then goodbye; the registry forgets the session', async t => {
  const h = readyHarness()
  h.conn().bufferedAmount = 5000
  h.session.feed.write(frame(1))
  h.session.close(true)
  t.same(h.conn().frames, [1])
  t.equal(h.conn().state, 'CLOSING')
  t.same(h.registry.claim('r:1:2:TX', new FakeLeg(), {}, h.logs.log), { ok: true, value: null })
  t.equal(h.clock.pending, 0, 'no timer left behind')
})

t.test('park: results that come while parked reach the leg that re-attaches, in order, bounded', async t => {
  const h = readyHarness()
  h.conn().result('before')
  t.same(h.owner.delivered, ['before'])
  h.session.park()
  for (let i = 0; i < EARLY_RESULTS_MAX + 5; i++) h.conn().result(`while parked ${i}`)
  const back = new FakeLeg()
  const claimed = h.registry.claim('r:1:2:TX', back, {}, h.logs.log)
  t.ok(claimed.ok && claimed.value === h.session, 'claimed within grace')
  t.equal(back.delivered.length, EARLY_RESULTS_MAX, 'what a parked session keeps, and no more')
  t.equal(back.delivered[0], 'while parked 0', 'oldest first')
  t.equal(back.delivered.at(-1), `while parked ${EARLY_RESULTS_MAX - 1}`)
  h.conn().result('after')
  t.equal(back.delivered.at(-1), 'after', 'then results flow as before')
  t.same(h.owner.delivered, ['before'], 'nothing reached the leg that left')
})
