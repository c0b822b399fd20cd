import t from 'tap'
import { joinStates, joinsOf } from '../../../../gateway/audio/session/join'
import { DRAINS, ON_LEG_START, ON_NEW_LEG, OPENS } from '../../../../gateway/audio/session/join-states'
import { MULAW_SILENCE, StereoMixer } from '../../../../gateway/audio/session/join-mixer'
import type { RouteRuntime } from '../../../../gateway/route'
import { FakeClock } from '../../../helpers/fake-clock'
import { initFrame } from '../../../helpers/fake-platform'
import { type FakeConnection, legWorld, route, SETTINGS } from '../harness'

// The stereo join on the fake clock: the mixer alone, then two platform legs of one contact on fake
// vendor connections (one shared 20 ms tick, the partner wait, silence fill, results by channel).

/** A 20 ms frame of one byte value. */
const tone = (v: number): ArrayBuffer => new Uint8Array(160).fill(v).buffer as ArrayBuffer

/** Deinterleave what a fake vendor connection got: channel 0 and channel 1 bytes. */
function split(conn: FakeConnection): [number[], number[]] {
  const out: [number[], number[]] = [[], []]
  for (const b of conn.written) for (let i = 0; i < b.length; i++) out[i % 2].push(b[i])
  return out
}

t.test('mixer: interleaves sample by sample, fills a missing side with silence and counts it', async t => {
  const m = new StereoMixer(1600)
  m.push(0, new Uint8Array(160).fill(1))
  m.push(1, new Uint8Array(100).fill(2))
  const f = m.mix()
  t.equal(f.length, 320)
  t.same([f[0], f[1], f[198], f[199], f[200], f[201]], [1, 2, 1, 2, 1, MULAW_SILENCE])
  t.same(m.filled, [0, 60])
  const g = m.mix()
  t.ok(
    g.every(b => b === MULAW_SILENCE),
    'nothing pending: all silence'
  )
  t.same(m.filled, [160, 220])
})

t.test('mixer: a side that runs ahead beyond its ring loses its oldest audio (counted)', async t => {
  const m = new StereoMixer(320)
  for (let v = 1; v <= 3; v++) m.push(0, new Uint8Array(160).fill(v))
  t.equal(m.dropped, 160)
  t.equal(m.mix()[0], 2)
  t.equal(m.mix()[0], 3)
})

function world(join = { channels: ['TX', 'RX'] as ['TX', 'RX'], waitSeconds: 2 }) {
  const clock = new FakeClock()
  const base = route(clock, ['a'], {
    frames: { framing: 'binary', encoding: 'mulaw', sampleRate: 8000, chunkMs: null, channels: 2 }
  })
  const r = { ...base, config: { ...base.config, join } } as RouteRuntime
  const w = legWorld(clock, r)
  const leg = (perspective: string, contactId = 7001) => {
    const p = w.leg()
    p.leg.onPlatformText(initFrame({ contactId, busNo: 4594, perspective }))
    return { leg: p.leg, sent: p.sent, ended: p.ended }
  }
  return { clock, registry: w.registry, conns: w.conns, leg, metrics: w.metrics, route: r }
}

/** Both legs of contact 7001, TX then RX, and their one vendor session ready. */
function readyCall() {
  const w = world()
  const tx = w.leg('TX')
  const rx = w.leg('RX')
  w.conns[0].ready()
  return { w, tx, rx }
}

t.test('two legs of a contact share one vendor session; each gets its own CONNECTED', async t => {
  const w = world()
  const tx = w.leg('TX')
  t.equal(w.conns.length, 0, 'the first leg waits for its partner')
  const rx = w.leg('RX')
  t.equal(w.conns.length, 1, 'the partner came: one vendor session')
  t.equal(w.conns[0].input.leg.perspective, 'TX+RX')
  w.conns[0].ready()
  t.match(tx.sent, [{ command: 'CONNECTED' }])
  t.match(rx.sent, [{ command: 'CONNECTED' }])
  t.equal(joinsOf(w.registry), 1)
})

t.test(
  'arrival-time alignment: a side late by one tick starts after 160 silence samples, nothing else filled',
  async t => {
    const { w, tx, rx } = readyCall()
    tx.leg.onPlatformBinary(tone(1))
    w.clock.advance(20) // tick 1: TX only
    for (let i = 2; i <= 5; i++) {
      rx.leg.onPlatformBinary(tone(100 + i - 1))
      tx.leg.onPlatformBinary(tone(i))
      w.clock.advance(20)
    }
    rx.leg.onPlatformBinary(tone(105))
    w.clock.advance(20)
    const [c0, c1] = split(w.conns[0])
    t.equal(c0.length, 6 * 160)
    t.same(
      c0.slice(0, 5 * 160),
      [1, 2, 3, 4, 5].flatMap(v => Array(160).fill(v)),
      'channel 0 is exactly the TX bytes'
    )
    t.same(c0.slice(5 * 160), Array(160).fill(MULAW_SILENCE), 'then silence: TX had nothing in the last tick')
    t.same(c1.slice(0, 160), Array(160).fill(MULAW_SILENCE), 'RX came one tick late: 160 filler samples')
    t.same(
      c1.slice(160),
      [101, 102, 103, 104, 105].flatMap(v => Array(160).fill(v)),
      'channel 1 is exactly the RX bytes'
    )
  }
)

t.test('wait timeout: the first leg opens alone after waitSeconds; a late partner joins the open session', async t => {
  const w = world()
  const tx = w.leg('TX')
  w.clock.advance(1999)
  t.equal(w.conns.length, 0)
  w.clock.advance(1)
  t.equal(w.conns.length, 1, 'opened alone at waitSeconds')
  w.conns[0].ready()
  t.match(tx.sent, [{ command: 'CONNECTED' }])
  tx.leg.onPlatformBinary(tone(7))
  w.clock.advance(20)
  t.same(split(w.conns[0])[1], Array(160).fill(MULAW_SILENCE), 'the missing side is silence')
  const rx = w.leg('RX')
  t.equal(w.conns.length, 1, 'no second vendor session')
  t.match(rx.sent, [{ command: 'CONNECTED' }], 'the late partner gets its CONNECTED at once')
})

t.test('one side closing keeps the other flowing; it comes back (hold) to the same session', async t => {
  const { w, tx, rx } = readyCall()
  rx.leg.onPlatformClose(1000) // hold: the platform closes the RX socket
  for (let i = 0; i < 3; i++) {
    tx.leg.onPlatformBinary(tone(9))
    w.clock.advance(20)
  }
  t.equal(w.conns[0].state, 'READY', 'the vendor session stays open')
  t.same(split(w.conns[0])[0], Array(480).fill(9))
  t.same(split(w.conns[0])[1], Array(480).fill(MULAW_SILENCE), 'the held side is silence')
  const back = w.leg('RX')
  t.match(back.sent, [{ command: 'CONNECTED' }], 're-attached: CONNECTED again')
  t.equal(w.conns.length, 1, 'same vendor session')
  back.leg.onPlatformBinary(tone(50))
  tx.leg.onPlatformBinary(tone(10))
  w.clock.advance(20)
  const [c0, c1] = split(w.conns[0])
  t.same(c0.slice(480), Array(160).fill(10))
  t.same(c1.slice(480), Array(160).fill(50))
  tx.leg.onPlatformClose(1000)
  back.leg.onPlatformClose(1000)
  w.clock.advance(SETTINGS.reattachGraceSeconds * 1000 + 100)
  t.equal(joinsOf(w.registry), 0, 'both gone past the grace: the joined session is over')
  t.not(w.conns[0].state, 'READY')
})

// AudioHook (reference server, serversessionimpl.ts onBinaryMessage) disconnects on audio after the client's
// `paused`: when both legs leave, the joined session parks with the mapping's pause frame, and the 20 ms
// clock must send nothing after it (issue 22: one tick of silence did).
t.test(
  'both legs hang up: what they sent goes before the pause frame; the join clock sends nothing after it',
  async t => {
    const { w, tx, rx } = readyCall()
    const conn = w.conns[0]
    let writtenAtPause = -1
    const control = conn.control.bind(conn)
    conn.control = (kind, done) => {
      if (kind === 'pause') writtenAtPause = conn.written.length
      control(kind, done)
    }
    tx.leg.onPlatformBinary(tone(1))
    rx.leg.onPlatformBinary(tone(101))
    w.clock.advance(20)
    tx.leg.onPlatformBinary(tone(2))
    rx.leg.onPlatformBinary(tone(102).slice(0, 80))
    tx.leg.onPlatformClose(1000)
    t.same(conn.controls, [], 'one leg left: the session goes on')
    rx.leg.onPlatformClose(1000)
    t.same(conn.controls, ['pause'], 'both legs left: the session parks')
    t.equal(writtenAtPause, 2, 'the audio both legs sent before they left went before the pause frame')
    const [c0, c1] = split(conn)
    t.same(c0.slice(160), Array(160).fill(2))
    t.same(c1.slice(160), [...Array(80).fill(102), ...Array(80).fill(MULAW_SILENCE)], 'the last tick filled out')
    w.clock.advance(200)
    t.equal(conn.written.length, writtenAtPause, 'no tick after the pause frame')
    const back = w.leg('RX')
    t.match(back.sent, [{ command: 'CONNECTED' }], 'a leg back within the grace continues the session')
    back.leg.onPlatformBinary(tone(103))
    w.clock.advance(20)
    t.equal(conn.written.length, 3, 'the clock runs again for the returning leg')
    t.same(split(conn)[1].slice(320), Array(160).fill(103))
  }
)

t.test('results go to the leg of their channel, or to both', async t => {
  const { w, tx, rx } = readyCall()
  // FakeConnection.result bypasses the mapping: the channel is what the connection reports.
  ;(w.conns[0] as any).events.result('{"command":"MESSAGE","message":"a"}', 0)
  ;(w.conns[0] as any).events.result('{"command":"MESSAGE","message":"b"}', 1)
  ;(w.conns[0] as any).events.result('{"command":"MESSAGE","message":"both"}', null)
  t.same(
    tx.sent.filter(m => m.command === 'MESSAGE').map(m => m.message),
    ['a', 'both']
  )
  t.same(
    rx.sent.filter(m => m.command === 'MESSAGE').map(m => m.message),
    ['b', 'both']
  )
})

t.test('a MIX leg on a join route is refused', async t => {
  const w = world()
  const mix = w.leg('MIX')
  t.match(mix.sent, [{ command: 'ERROR', messageType: 'MESSAGE_INVALID' }])
})

t.test('a vendor session failure ends both legs', async t => {
  const w = world({ channels: ['TX', 'RX'], waitSeconds: 0 })
  const tx = w.leg('TX')
  const rx = w.leg('RX')
  t.equal(w.conns.length, 1, 'waitSeconds 0: opened at once, the partner joined it')
  w.conns[0].failWith({ kind: 'refused', vendorMessage: 'no' })
  t.match(tx.sent.at(-1), { command: 'ERROR' })
  t.match(rx.sent.at(-1), { command: 'ERROR' })
  t.equal(joinsOf(w.registry), 0)
})

t.test('failover: a lost vendor connection is replaced, the recent stereo audio replayed, both legs stay', async t => {
  const { w, tx, rx } = readyCall()
  for (let i = 1; i <= 4; i++) {
    tx.leg.onPlatformBinary(tone(i))
    rx.leg.onPlatformBinary(tone(100 + i))
    w.clock.advance(20)
  }
  w.conns[0].failWith({ kind: 'closed', code: 1011, reason: 'gone', socket: null })
  t.equal(w.conns.length, 2, 'a replacement connection is opening')
  tx.leg.onPlatformBinary(tone(5))
  rx.leg.onPlatformBinary(tone(105))
  w.clock.advance(20)
  w.conns[1].ready()
  const [c0, c1] = split(w.conns[1])
  // The replay ring holds 0.1 s of 8 kHz bytes = 800 bytes: the last 2 stereo frames, then the queued one.
  t.same(
    c0,
    [3, 4, 5].flatMap(v => Array(160).fill(v)),
    'channel 0: replayed TX, then the audio queued meanwhile'
  )
  t.same(
    c1,
    [103, 104, 105].flatMap(v => Array(160).fill(v)),
    'channel 1: the same for RX'
  )
  t.equal(tx.leg.state, 'STREAMING')
  t.equal(rx.leg.state, 'STREAMING')
  t.same(tx.ended, [])
  t.same(rx.ended, [])
})

t.test('drain: each leg hands off; the vendor session is handed off with the last one', async t => {
  const { w, tx, rx } = readyCall()
  tx.leg.drain(60)
  t.equal(w.conns[0].state, 'READY', 'the partner still streams: the session stays')
  rx.leg.drain(60)
  t.equal(w.conns[0].state, 'CLOSING', 'the last leg gone: goodbye to the vendor')
  t.equal(joinsOf(w.registry), 0)
})

/** `audio_joins_total{result}` of the world's route. */
async function joined(w: ReturnType<typeof world>, result: string): Promise<number> {
  const { values } = await w.metrics.joins.get()
  return values.find(v => v.labels.route === w.route.name && v.labels.result === result)?.value ?? 0
}

// audio/session/join-states.ts: the joined contact's states, each table total, and the walk through them.
t.test('the join tables cover every state; a contact goes GATHERING, WAITING, OPEN, OVER', async t => {
  const states = ['GATHERING', 'OPEN', 'OVER', 'WAITING']
  for (const table of [ON_NEW_LEG, ON_LEG_START, OPENS, DRAINS]) t.same(Object.keys(table).sort(), states)
  const w = world()
  const tx = w.leg('TX')
  t.same(joinStates(w.registry), ['WAITING'], 'the first leg started: its partner is waited for')
  w.clock.advance(1000)
  const again = w.leg('TX')
  t.equal(tx.leg.state, 'CLOSED', 'the channel taken over by a new leg')
  t.same(joinStates(w.registry), ['WAITING'], 'a second start of one channel keeps the first wait')
  w.clock.advance(1000)
  t.same(joinStates(w.registry), ['OPEN'], 'opened alone when the first wait ran out')
  t.equal(w.conns.length, 1)
  t.equal(await joined(w, 'alone'), 1)
  const rx = w.leg('RX')
  t.equal(await joined(w, 'late_partner'), 1, 'a leg starting while OPEN is a late partner')
  t.equal(w.conns.length, 1, 'of the session already opening')
  w.conns[0].failWith({ kind: 'refused', vendorMessage: 'no' })
  t.match(rx.sent.at(-1), { command: 'ERROR' })
  t.same(joinStates(w.registry), [], 'OVER: the contact is gone from its hub')
  t.match(again.sent.at(-1), { command: 'ERROR' })
  const next = w.leg('TX')
  t.same(joinStates(w.registry), ['WAITING'], 'a new leg of the call after OVER makes a new join')
  t.equal(next.leg.state, 'CONNECTING')
})

t.test('a join whose partner comes during the wait opens paired at once', async t => {
  const w = world()
  w.leg('TX')
  t.same(joinStates(w.registry), ['WAITING'])
  w.leg('RX')
  t.same(joinStates(w.registry), ['OPEN'])
  t.equal(await joined(w, 'paired'), 1)
  w.clock.advance(5000)
  t.equal(await joined(w, 'alone'), 0, 'the wait was cleared')
})
