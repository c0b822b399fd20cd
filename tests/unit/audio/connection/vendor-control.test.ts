import t from 'tap'
import { join } from 'node:path'
import type {
  ConnectionContext,
  ConnectionEvents,
  VendorFailure
} from '../../../../gateway/audio/connection/connection-contract'
import { FrameCounters } from '../../../../gateway/audio/feed/encoder'
import { VendorControl } from '../../../../gateway/audio/connection/vendor-control'
import type { Reading, Verdict } from '../../../../gateway/audio/connection/vendor-message'
import { readVendorMessage } from '../../../../gateway/audio/connection/vendor-message'
import { compileAudio } from '../../../../gateway/mapping/audio'
import { loadMapping } from '../../../../gateway/mapping/compile'
import { dryRunMapping } from '../../../../gateway/mapping/dry-run'
import { compileExpr } from '../../../../gateway/mapping/expr'
import type { SocketInput } from '../../../../gateway/mapping/run'
import { LegCounters, Metrics } from '../../../../gateway/telemetry/metrics'
import { frame, harness, readyHarness, Lines, routeConfig } from '../harness'

// Vendor control rules (audio.control): how a rule is read and acted on (audio/connection/vendor-control.ts), the
// session's answer to a vendor that ends or moves its session (on fake connections and the fake clock),
// and the shipped AudioHook mapping's rules.

type Json = Record<string, any>

function rules(control: Json[], results: Json[] = []): ReturnType<typeof compileAudio> {
  return compileAudio(
    { control, results, time: { none: 'a test mapping' } },
    (_p, source) => (source === undefined || source === null ? null : compileExpr(source)),
    (p, m) => {
      throw new Error(`${p}: ${m}`)
    }
  )
}

interface Rig {
  control: VendorControl
  frames: FrameCounters
  counters: LegCounters
  metrics: Metrics
  calls: string[]
  sent: unknown[]
  emitted: Verdict[]
  readings: Reading[]
  read: (msg: unknown, phase?: 'awaiting-ready' | 'ready' | 'closing') => Promise<void>
}

function rig(audio: ReturnType<typeof compileAudio>): Rig {
  const frames = new FrameCounters()
  const counters = new LegCounters('r')
  const metrics = new Metrics()
  const ctx = { route: { name: 'r' }, metrics, counters, log: new Lines().log } as unknown as ConnectionContext
  const control = new VendorControl(audio, frames, ctx)
  const base = { init: {}, leg: { perspective: 'TX' }, route: {}, upstream: {}, session: { id: 's1' } } as SocketInput
  const r: Rig = {
    control,
    frames,
    counters,
    metrics,
    calls: [],
    sent: [],
    emitted: [],
    readings: [],
    read: async () => {}
  }
  // What the connection does with each step (audio/connection/vendor-connection.ts `read`), recorded in order.
  r.read = async (msg, phase = 'ready') => {
    for await (const step of control.read(msg, phase, base)) {
      if (step.kind === 'reply') {
        r.calls.push('send')
        r.sent.push(step.value)
      } else if (step.kind === 'reading') {
        r.calls.push('reading')
        r.readings.push(step.reading)
      } else if (step.kind === 'emit') {
        r.calls.push('emit')
        r.emitted.push(step.verdict)
      } else if (step.kind === 'end') r.calls.push(`end:${step.after}:${step.vendorMessage}`)
      else if (step.kind === 'resume') control.resume()
      else r.calls.push('reconnect')
    }
  }
  return r
}

t.test('the first matching rule acts and answers for the message; results are not read for it', async t => {
  const r = rig(
    rules(
      [
        { when: 'msg.type = "a"', reply: '{"type": "a-ack"}' },
        { when: 'msg.type = "a" or msg.type = "b"', reply: '{"type": "second"}' }
      ],
      [{ when: 'true', emit: '{"command":"MESSAGE","messageType":"X","message":"m","parameters":{}}' }]
    )
  )
  await r.read({ type: 'a' })
  t.same(r.sent, [{ type: 'a-ack' }], 'only the first matching rule replied')
  t.same(r.readings[0].verdict, { kind: 'silent' }, 'results were not read')
  await r.read({ type: 'c' })
  t.equal((r.readings[1].verdict as Json).kind, 'result', 'an unmatched message goes to results')
})

t.test('set merges into session.state before reply and emit, which read it; state persists', async t => {
  const r = rig(
    rules([
      {
        when: 'msg.type = "ping"',
        set: '{"count": $exists(session.state.count) ? session.state.count + 1 : 1}',
        reply: '[{"n": session.state.count}, "raw text"]',
        emit: '{"command":"MESSAGE","messageType":"COUNT","message":$string(session.state.count),"parameters":{}}'
      }
    ])
  )
  await r.read({ type: 'ping' })
  await r.read({ type: 'ping' })
  t.same(r.control.state, { count: 2 })
  t.same(
    r.sent,
    [
      [{ n: 1 }, 'raw text'],
      [{ n: 2 }, 'raw text']
    ],
    'reply frames (arrays as several) see the new state'
  )
  t.match(r.emitted[1], { kind: 'result', messages: [/"message":"2"/] })
})

t.test('emit: an array is several messages in order (nulls skipped); a non-message fails the emit', async t => {
  const r = rig(
    rules([
      {
        when: 'msg.type = "many"',
        emit: 'msg.items.{"command":"MESSAGE","messageType":"T","message":$,"parameters":{}}'
      },
      {
        when: 'msg.type = "bad"',
        emit: '[{"command":"MESSAGE","messageType":"T","message":"x","parameters":{}}, {"x":1}]'
      }
    ])
  )
  await r.read({ type: 'many', items: ['one', 'two', 'three'] })
  const v = r.emitted[0] as Extract<Verdict, { kind: 'result' }>
  t.same(
    v.messages.map(m => JSON.parse(m).message),
    ['one', 'two', 'three']
  )
  await r.read({ type: 'bad' })
  t.match(r.emitted[1], { kind: 'failed', stage: 'emit' })
})

t.test(
  'discard: audio dropped and counted; the resume reply is at the pause start, then the timeline moves on',
  async t => {
    const r = rig(
      rules([
        { when: 'msg.type = "pause"', audio: 'discard', reply: '{"at": session.audio.positionMs}' },
        {
          when: 'msg.type = "resume"',
          audio: 'resume',
          reply:
            '{"start": session.audio.pauseStartMs, "discarded": session.audio.pauseDiscardedMs, "pos": session.audio.positionMs}'
        }
      ])
    )
    r.frames.audioMs = 1000
    await r.read({ type: 'pause' })
    t.equal(r.control.gate, 'discard')
    for (let i = 0; i < 10; i++) r.control.discard(160)
    t.equal(r.counters.dropVendorPaused, 10, 'each discarded frame counted (reason vendor_paused)')
    t.equal(r.frames.audioMs, 1000, 'the timeline does not move while paused (pings carry the pause position)')
    await r.read({ type: 'resume' })
    t.equal(r.control.gate, 'open')
    t.same(r.sent, [{ at: 1000 }, { start: 1000, discarded: 200, pos: 1000 }])
    t.equal(r.frames.audioMs, 1200, 'the discarded stretch joined the timeline after the reply')
  }
)

t.test(
  'pause pauses audio (the connection reads as backed up) until resume; a second pause keeps the first start',
  async t => {
    const r = rig(
      rules([
        { when: 'msg.type = "pause"', audio: 'pause' },
        { when: 'msg.type = "resume"', audio: 'resume' }
      ])
    )
    await r.read({ type: 'pause' })
    t.equal(r.control.gate, 'paused')
    r.frames.audioMs = 500
    await r.read({ type: 'pause' })
    t.equal(r.control.input({ session: { id: 'x' } } as SocketInput).session?.audio?.pauseStartMs, 0)
    await r.read({ type: 'resume' })
    t.equal(r.control.gate, 'open')
  }
)

t.test('end acts at once (before set and reply), readiness is not read; reconnect comes last', async t => {
  const r = rig(
    rules([
      { when: 'msg.type = "disconnect"', set: '{"closeReason": "disconnect"}', reply: '"bye"', end: 'failover' },
      { when: 'msg.type = "reconnect"', reply: '"moving"', reconnect: true }
    ])
  )
  await r.read({ type: 'disconnect', parameters: { reason: 'completed', info: 'done here' } }, 'awaiting-ready')
  t.same(r.calls, ['end:failover:done here', 'send'], 'end first, then the reply; no reading')
  t.same(r.control.state, { closeReason: 'disconnect' })
  r.calls.length = 0
  await r.read({ type: 'reconnect' })
  t.same(r.calls, ['reading', 'send', 'reconnect'])
})

t.test('a failing when is counted and read as false; rules are not read while closing', async t => {
  const r = rig(
    rules([
      { when: '$error("boom")', reply: '"never"' },
      { when: 'msg.type = "x"', reply: '"second"' }
    ])
  )
  await r.read({ type: 'x' })
  t.same(r.sent, ['second'])
  t.match(await r.metrics.registry.metrics(), /mapping_errors_total\{route="r",stage="control_when"\} 1/)
  await r.read({ type: 'x' }, 'closing')
  t.same(r.sent, ['second'], 'closing: no rule acts')
})

t.test('closing: only a rule with end is tried, and only its set applies (no end, reply or emit)', async t => {
  const r = rig(
    rules([
      { when: 'msg.type = "pause"', audio: 'discard', reply: '"paused"' },
      { when: 'msg.type = "disconnect"', set: '{"closeReason": "disconnect"}', reply: '"bye"', end: 'failover' }
    ])
  )
  await r.read({ type: 'pause' }, 'closing')
  t.equal(r.control.gate, 'open', 'a pause while closing changes nothing')
  await r.read({ type: 'disconnect' }, 'closing')
  t.same(r.control.state, { closeReason: 'disconnect' }, 'the close frame still to be built will say why')
  t.same(r.calls, ['reading', 'reading'], 'no end (the session is closing already), no reply')
  t.same(r.sent, [])
  t.same(r.readings[1].verdict, { kind: 'silent' }, 'the rule answered for the message: not a result')
})

t.test('held audio that reached the connection anyway (discarded) joins the timeline at the resume', async t => {
  const r = rig(
    rules([
      { when: 'msg.type = "pause"', audio: 'pause' },
      { when: 'msg.type = "resume"', audio: 'resume', reply: '{"discarded": session.audio.pauseDiscardedMs}' }
    ])
  )
  r.frames.audioMs = 1000
  await r.read({ type: 'pause' })
  r.control.discard(80) // a park's partial chunk
  await r.read({ type: 'resume' })
  t.same(r.sent, [{ discarded: 10 }])
  t.equal(r.frames.audioMs, 1010)
})

// ---- the session on fake connections ---------------------------------------------------------------

const ENDED = (then: 'failover' | 'leg'): VendorFailure => ({ kind: 'ended', then, vendorMessage: 'completed' })

t.test(
  'session: a vendor that ends a ready session with end: failover is replaced; the owner sees nothing',
  async t => {
    const h = readyHarness()
    h.session.feed.write(frame(1))
    h.conn().failWith(ENDED('failover'))
    t.equal(h.session.state, 'RECOVERING')
    t.equal(h.conn().replica.name, 'b', 'the replacement goes to the other replica')
    h.session.feed.write(frame(2))
    h.conn().ready()
    t.same(h.conn().frames, [1, 2], 'the recent audio is replayed, then the queued audio')
    t.same(h.owner.failures, [])
    t.equal(h.route.pool.byName('a')!.consecutiveFailures, 0, "the vendor's word never counts against the replica")
  }
)

t.test('session: end: leg ends the platform leg with UPSTREAM_CLOSED; before ready it is a refusal', async t => {
  const h = readyHarness()
  h.conn().failWith(ENDED('leg'))
  t.match(h.owner.failures, [{ error: { code: 'UPSTREAM_CLOSED' }, extra: { vendorMessage: 'completed' } }])
  t.equal(h.session.state, 'CLOSED')
  const r = harness()
  r.session.start(null)
  r.conn().failWith(ENDED('failover'))
  t.match(r.owner.failures, [{ error: { code: 'UPSTREAM_REFUSED' }, extra: { vendorMessage: 'completed' } }])
  t.equal(r.conns.length, 1, 'a refusal is the vendor speaking: no other replica is tried')
})

t.test('session: reconnect opens a new session on the same replica, audio moves when it is ready', async t => {
  const h = harness()
  h.session.start(null)
  const old = h.conn()
  old.ready()
  const events = (old as unknown as { events: ConnectionEvents }).events
  events.reconnect!(old)
  events.reconnect!(old)
  t.equal(h.conns.length, 2, 'one new session, however often asked')
  const next = h.conn()
  t.equal(next.replica.name, 'a', 'same replica')
  h.session.feed.write(frame(1))
  t.same(old.frames, [1], 'audio stays on the old session until the new one is ready')
  next.ready()
  h.session.feed.write(frame(2))
  t.same(next.frames, [2])
  t.equal(old.state, 'CLOSING', 'the old one gets its close transaction')
  t.same(h.owner.readies.length, 1, 'the platform noticed nothing')
})

// ---- the shipped AudioHook mapping -------------------------------------------------------------------

t.test(
  'mappings/audiohook.yaml: its samples dry-run clean; an event with two transcripts emits two messages',
  async t => {
    const m = loadMapping(join(__dirname, '..', '..', '..', '..', 'mappings', 'audiohook.yaml'))
    const route = {
      ...routeConfig(['a'], () => 'ws://a.invalid/'),
      params: { organizationId: 'd7934305-0972-4844-938e-9060eef73d05' }
    }
    t.same(await dryRunMapping(m, route), [], 'no problem')
    const event = m.samples.audio.find(
      s => (s as Json).type === 'event' && (s as Json).parameters.entities.length === 2
    )
    const input = {
      init: {},
      leg: { perspective: 'TX' },
      route: { params: {} },
      upstream: {},
      session: { id: 's' },
      msg: event
    } as unknown as SocketInput
    const reading = await readVendorMessage(m.audio!, input, 'ready')
    t.match(reading.verdict, { kind: 'result', messages: [/"message":"hello"/, /"message":"hello there"/] })
  }
)

t.test(
  'mappings/audiohook.yaml: pause → paused, resume → resumed {start, discarded}; pong → the next ping rtt',
  async t => {
    const m = loadMapping(join(__dirname, '..', '..', '..', '..', 'mappings', 'audiohook.yaml'))
    const r = rig(m.audio!)
    r.frames.audioMs = 1000
    await r.read({ type: 'pause', seq: 2, parameters: {} })
    t.equal(r.control.gate, 'discard', 'a server pause discards (the client reports it in resumed)')
    for (let i = 0; i < 10; i++) r.control.discard(160)
    await r.read({ type: 'resume', seq: 3, parameters: {} })
    t.match(r.sent, [
      { type: 'paused', position: '{{position}}', parameters: {} },
      { type: 'resumed', parameters: { start: 'PT1S', discarded: 'PT0.2S' } }
    ])
    t.equal(r.frames.audioMs, 1200)
    await r.read({ type: 'disconnect', parameters: { reason: 'completed' } })
    t.match(r.calls.at(-1), /^end:failover/)
    t.same(r.control.state, { closeReason: 'disconnect' }, 'the close frame will say reason "disconnect"')
    const base = { init: {}, leg: {}, route: {}, upstream: {}, session: { id: 's' } } as unknown as SocketInput
    await r.control.apply(m.audio!.keepalive!.set!, r.control.input(base))
    await r.read({ type: 'pong', seq: 4, parameters: {} })
    const ping = (await m.audio!.keepalive!.frame(r.control.input(base))) as Json
    t.match(ping.parameters, { rtt: /^PT\d+(\.\d+)?S$/ }, 'the ping carries the last round trip')
    const close = (await m.audio!.close!(r.control.input(base))) as Json
    t.same(close.parameters, { reason: 'disconnect' })
  }
)

// Reference client (purecloudlabs/audiohook-reference-implementation, client/clientsessionimpl.ts
// onOpenedMessage; client/src/mediasource-tone.ts startStreaming, resume): opened {startPaused} is answered
// with `paused` at once; audio is discarded, and `resumed` says from where and how much.
t.test('mappings/audiohook.yaml: opened {startPaused} → paused at once, audio discarded, resume → resumed', async t => {
  for (const file of ['audiohook.yaml', 'audiohook-stereo.yaml']) {
    const m = loadMapping(join(__dirname, '..', '..', '..', '..', 'mappings', file))
    const r = rig(m.audio!)
    await r.read({ type: 'opened', seq: 1, parameters: { media: [], startPaused: true } }, 'awaiting-ready')
    t.equal(r.readings[0].verdict.kind, 'ready', `${file}: opened is still the ready answer`)
    t.equal(r.control.gate, 'discard', `${file}: audio is discarded from the start, never held for later`)
    t.match(r.sent, [{ type: 'paused', position: '{{position}}', parameters: {} }], `${file}: paused at once`)
    for (let i = 0; i < 5; i++) r.control.discard(160)
    await r.read({ type: 'resume', seq: 2, parameters: {} })
    t.match(r.sent[1], { type: 'resumed', parameters: { start: 'PT0S', discarded: 'PT0.1S' } }, file)
    t.equal(r.control.gate, 'open')
    t.equal(r.frames.audioMs, 100, `${file}: the discarded stretch is on the timeline after resumed`)
  }
})
