import t from 'tap'
import fc from 'fast-check'
import { type Beating, Heartbeat, heartbeatOf, MAX_TICK_MS, tickFor } from '../../../gateway/upstream/heartbeat'
import type { TimerHandle } from '../../../gateway/clock'
import { FakeClock } from '../../helpers/fake-clock'

// Issue 32 item 6: liveness that costs what a read costs. One heartbeat per clock walks every watched vendor
// socket; anything read from a vendor is a sign of life; a ping goes only to a vendor silent for the
// interval; a vendor silent for the detection window (ping + pong timeout, 3 s by default) is lost.

const PING = 1000
const TIMEOUT = 2000
const WINDOW = PING + TIMEOUT

/** A watched socket as upstream/ws-leg.ts `VendorSocket` behaves towards the heartbeat, without a network. */
class Peer implements Beating {
  heardAt: number
  pingOut = false
  readonly windowMs: number
  private due = false
  readonly pings: number[] = []
  /** How long it had been silent when each ping went. */
  readonly silences: number[] = []
  lostAt: number | null = null

  constructor(
    private readonly clock: FakeClock,
    readonly pingMs = PING,
    timeoutMs = TIMEOUT
  ) {
    this.windowMs = pingMs + timeoutMs
    this.heardAt = clock.now()
  }

  /** As `VendorSocket.pingDue`: due since the last tick and nothing written since: alone now. */
  pingDue(now: number): void {
    if (this.due) this.ping(now)
    else this.due = true
  }

  /** An audio write: a due ping rides along. */
  write(): void {
    if (this.due) this.ping(this.clock.now())
  }

  private ping(now: number): void {
    this.due = false
    this.pingOut = true
    this.pings.push(now)
    this.silences.push(now - this.heardAt)
  }

  /** A vendor message: a ping still due is not needed. */
  hear(): void {
    this.heardAt = this.clock.now()
    this.due = false
  }

  pong(): void {
    this.heardAt = this.clock.now()
    this.pingOut = false
  }

  lost(now: number): void {
    this.lostAt = now
  }
}

/** A peer the heartbeat watches, on a fake clock of its own. */
function watched(): { clock: FakeClock; beat: Heartbeat; peer: Peer } {
  const clock = new FakeClock()
  const beat = new Heartbeat(clock)
  const peer = new Peer(clock)
  beat.watch(peer)
  return { clock, beat, peer }
}

/** `ms` of a peer that writes every `step` ms and answers each ping at once. */
function talk(clock: FakeClock, peer: Peer, ms: number, step: number): void {
  for (let at = 0; at < ms; at += step) {
    peer.write()
    if (peer.pingOut) peer.pong()
    clock.advance(step)
  }
}

t.test('a vendor that speaks is never pinged', async t => {
  const { clock, peer } = watched()
  for (let ms = 0; ms < 60_000; ms += 20) {
    peer.write()
    if (ms % 900 === 0) peer.hear()
    clock.advance(20)
  }
  t.same(peer.pings, [], 'no ping in 60 s of a vendor speaking every 0.9 s')
  t.equal(peer.lostAt, null)
})

t.test('a silent vendor that answers is pinged once per interval, riding with the audio', async t => {
  const { clock, peer } = watched()
  talk(clock, peer, 10_000, 20)
  t.equal(peer.pings.length, 9, 'one ping a second: at 1 s, 2 s, ... 9 s')
  for (let i = 1; i < peer.pings.length; i++)
    t.ok(
      peer.pings[i] - peer.pings[i - 1] >= PING,
      `ping ${i} ${peer.pings[i] - peer.pings[i - 1]} ms after the one before`
    )
  t.equal(peer.pings[0], PING, 'the first when silent for the interval, with the first write after the tick')
  t.equal(peer.lostAt, null)
})

t.test('a due ping with no write to ride on goes alone one tick later', async t => {
  const { clock, peer } = watched()
  clock.advance(PING + MAX_TICK_MS)
  t.same(peer.pings, [PING + MAX_TICK_MS])
})

t.test('a frozen vendor is pinged once and found lost within 3 s of its last word (one tick)', async t => {
  const { clock, beat, peer } = watched()
  talk(clock, peer, 4_130, 10)
  peer.hear() // its last message, then it freezes
  const last = clock.now()
  const before = peer.pings.length
  for (let ms = 0; ms < 5_000 && peer.lostAt === null; ms += 20) {
    peer.write()
    clock.advance(20)
  }
  const after = peer.pings.slice(before)
  t.equal(after.length, 1, 'pinged once: a ping is out, and its pong would answer any later one')
  t.ok(after[0] - last >= PING, 'not before it was silent for the interval')
  const lostAt = peer.lostAt ?? Number.NaN
  t.ok(lostAt - last >= WINDOW, `not before the window (${lostAt - last} ms)`)
  t.ok(lostAt - last <= WINDOW + tickFor(PING, WINDOW), `within the window and one tick (${lostAt - last} ms)`)
  t.equal(beat.size, 0, 'a lost socket is no longer watched')
  t.equal(clock.pending, 0, 'nothing watched: no timer')
})

t.test(
  'a late tick judges nobody at once (what the vendor sent may be waiting unread): right after the next read',
  async t => {
    // A clock whose ticks come only when the test says, as a stuck event loop would deliver them.
    let now = 0
    const soon: (() => void)[] = []
    const stalled = {
      ...new FakeClock(),
      now: () => now,
      setInterval: () => 1 as unknown as TimerHandle,
      setTimeout: (fn: () => void) => {
        soon.push(fn)
        return 2 as unknown as TimerHandle
      }
    }
    const beat = new Heartbeat(stalled)
    const fake = new FakeClock()
    const heard = new Peer(fake)
    const stuck = new Peer(fake)
    beat.watch(heard)
    beat.watch(stuck)
    for (now = 250; now <= 2_000; now += 250) beat.tick(now)
    // The event loop was stuck for 4 s: the next tick is the first in 4 s, and late.
    now = 6_000
    beat.tick(now)
    t.equal(heard.lostAt, null, 'not judged on the late tick')
    t.equal(stuck.lostAt, null)
    t.equal(soon.length, 1, 'a judgement right after the next read')
    // That read finds a pong from one of them; the judgement after it finds the other silent.
    fake.advance(6_001)
    heard.hear()
    now = 6_001
    for (const fn of soon.splice(0)) fn()
    t.equal(heard.lostAt, null, 'heard after the late tick: alive')
    t.equal(stuck.lostAt, 6_001, 'silent all along: lost right after the read')
  }
)

t.test('thousands of connections, one timer', async t => {
  const clock = new FakeClock()
  const beat = heartbeatOf(clock)
  t.equal(heartbeatOf(clock), beat, 'one heartbeat per clock')
  const peers: Peer[] = []
  for (let i = 0; i < 5000; i++) {
    const peer = new Peer(clock)
    peers.push(peer)
    beat.watch(peer)
  }
  t.equal(clock.pending, 1, 'one timer for 5,000 sockets')
  t.equal(beat.interval, tickFor(PING, WINDOW))
  // Half speak, half are silent and answer; none is lost.
  for (let ms = 0; ms < 5_000; ms += 100) {
    for (let i = 0; i < peers.length; i++) {
      const p = peers[i]
      if (i % 2 === 0 && ms % 500 === 0) p.hear()
      p.write()
      if (p.pingOut) p.pong()
    }
    clock.advance(100)
  }
  t.equal(peers.filter((p, i) => i % 2 === 0 && p.pings.length > 0).length, 0, 'no speaking socket was pinged')
  t.ok(
    peers.every((p, i) => i % 2 === 0 || p.pings.length === 4),
    'each silent one pinged once a second (at 1, 2, 3, 4 s)'
  )
  t.ok(peers.every(p => p.lostAt === null))
  for (const p of peers) beat.forget(p)
  t.equal(clock.pending, 0, 'none watched: the timer is gone')
})

t.test(
  'a peer with a shorter pong timeout makes the one timer tick faster; it never ticks slower than 250 ms',
  async t => {
    const clock = new FakeClock()
    const beat = new Heartbeat(clock)
    beat.watch(new Peer(clock, 5000, 10_000))
    t.equal(beat.interval, MAX_TICK_MS)
    beat.watch(new Peer(clock, 500, 400))
    t.equal(beat.interval, 100)
    t.equal(clock.pending, 1)
  }
)

// The property: over any interleaving of vendor messages, pongs, audio writes and clock advances, a socket is
// declared lost iff, at a tick, it had been silent for the whole window (the first such tick); a ping
// goes only to a socket silent for the interval with no ping out, so two pings are at least the interval apart.
type Op =
  | { kind: 'advance'; ms: number }
  | { kind: 'hear'; peer: number }
  | { kind: 'pong'; peer: number }
  | { kind: 'write'; peer: number }

const PEERS = 3
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 1500 }) }),
  fc.record({ kind: fc.constant('hear' as const), peer: fc.integer({ min: 0, max: PEERS - 1 }) }),
  fc.record({ kind: fc.constant('pong' as const), peer: fc.integer({ min: 0, max: PEERS - 1 }) }),
  fc.record({ kind: fc.constant('write' as const), peer: fc.integer({ min: 0, max: PEERS - 1 }) })
)

t.test('property: lost iff silent for the window at a tick; pings only to the silent, once per interval', async t => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 200 }), ops => {
      const clock = new FakeClock()
      const beat = new Heartbeat(clock)
      const tick = tickFor(PING, WINDOW)
      const peers = Array.from({ length: PEERS }, () => new Peer(clock))
      for (const p of peers) beat.watch(p)
      const heard: number[][] = peers.map(() => [0])
      // What each peer was heard at, for the model (the pings keep their own silence).
      for (const o of ops) {
        if (o.kind === 'advance') {
          clock.advance(o.ms)
          continue
        }
        const p = peers[o.peer]
        if (p.lostAt !== null) continue
        if (o.kind === 'hear') p.hear()
        else if (o.kind === 'pong' && p.pingOut) p.pong()
        else if (o.kind === 'write') p.write()
        else continue
        if (o.kind !== 'write') heard[o.peer].push(clock.now())
      }
      const ticks: number[] = []
      for (let at = tick; at <= clock.now(); at += tick) ticks.push(at)
      for (let i = 0; i < PEERS; i++) {
        const p = peers[i]
        // Heard at the same time as a tick: the fake clock ran the tick first (timers before reads).
        const lastBefore = (at: number): number => Math.max(...heard[i].filter(h => h < at))
        const expected = ticks.find(at => at - lastBefore(at) >= WINDOW) ?? null
        if (p.lostAt !== expected) return false
        if (p.silences.some(s => s < PING)) return false
        for (let k = 1; k < p.pings.length; k++) if (p.pings[k] - p.pings[k - 1] < PING) return false
      }
      return true
    }),
    { numRuns: 300 }
  )
  t.pass('held over 300 interleavings')
})
