import t from 'tap'
import { FakeClock } from '../../../helpers/fake-clock'
import { initFrame } from '../../../helpers/fake-platform'
import { frame, legWorld, route, SETTINGS } from '../harness'

// The platform leg state machine: a fake platform socket, fake vendor connections, the fake clock.

function world(settings = {}) {
  const clock = new FakeClock()
  const r = route(clock, ['a'])
  const w = legWorld(clock, r)
  const leg = () => w.leg({ settings: { ...SETTINGS, ...settings } })
  return { clock, registry: w.registry, conns: w.conns, leg, logs: w.logs }
}

const init = (): ArrayBuffer => initFrame({ contactId: 7001, busNo: 4594, perspective: 'TX' })

t.test('a binary frame before the init message is refused with FIRST_FRAME_NOT_TEXT', async t => {
  const w = world()
  const p = w.leg()
  p.leg.onPlatformBinary(frame(1))
  t.match(p.sent, [{ command: 'ERROR', messageType: 'FIRST_FRAME_NOT_TEXT' }])
  t.same(p.ended, [{ code: 1007, reason: 'FIRST_FRAME_NOT_TEXT' }])
  t.equal(p.leg.state, 'CLOSED')
})

t.test('no init message within handshakeTimeoutSeconds ends the leg with HANDSHAKE_TIMEOUT', async t => {
  const w = world()
  const p = w.leg()
  w.clock.advance(4999)
  t.equal(p.leg.state, 'AWAIT_INIT')
  w.clock.advance(1)
  t.match(p.sent, [{ messageType: 'HANDSHAKE_TIMEOUT' }])
  t.equal(w.clock.pending, 0)
})

t.test('init accepted: audio is held while CONNECTING, CONNECTED once the vendor is ready, then relayed', async t => {
  const w = world()
  const p = w.leg()
  p.leg.onPlatformText(init())
  t.equal(p.leg.state, 'CONNECTING')
  p.leg.onPlatformBinary(frame(1))
  w.clock.advance(250)
  w.conns[0].ready({ vendorSessionId: 'v' })
  t.equal(p.leg.state, 'STREAMING')
  t.match(p.sent, [{ command: 'CONNECTED', parameters: { vendorSessionId: 'v', legId: 'leg-1', route: 'r' } }])
  p.leg.onPlatformBinary(frame(2))
  t.same(w.conns[0].frames, [1, 2])
  w.conns[0].result('{"command":"MESSAGE","messageType":"TRANSCRIPT","message":"hi","parameters":{}}')
  t.match(p.sent[1], { command: 'MESSAGE', message: 'hi' })
  t.match(
    w.logs.lines.find(l => l.event === 'connected'),
    { handshakeSeconds: 0.25, contactId: 7001 }
  )
})

t.test('a session failure ends the leg with its code; the internal detail is logged, never sent', async t => {
  const w = world()
  const p = w.leg()
  p.leg.onPlatformText(init())
  w.conns[0].failWith({ kind: 'mapping', stage: 'headers', error: 'boom with init data' })
  t.match(p.sent, [{ command: 'ERROR', messageType: 'MAPPING_FAILED' }])
  t.notOk(JSON.stringify(p.sent).includes('boom'))
  t.same(p.ended, [{ code: 1011, reason: 'MAPPING_FAILED' }])
  t.match(
    w.logs.lines.find(l => l.event === 'leg_failed'),
    { code: 'MAPPING_FAILED', detail: 'boom with init data' }
  )
})

t.test(
  'the platform drops while streaming: the session is parked, and the next leg of the same identity re-attaches',
  async t => {
    const w = world()
    const first = w.leg()
    first.leg.onPlatformText(init())
    w.conns[0].ready()
    first.leg.onPlatformClose(1006)
    t.equal(w.registry.parkedCount, 1)
    w.clock.advance(1000)
    const second = w.leg()
    second.leg.onPlatformText(init())
    t.equal(w.conns.length, 1, 'no new vendor connection')
    t.equal(w.registry.parkedCount, 0)
    t.match(second.sent, [{ command: 'CONNECTED' }])
    second.leg.onPlatformBinary(frame(9))
    t.same(w.conns[0].frames, [9])
  }
)

t.test('a second leg of the same identity while the first is open supersedes it with LEG_REPLACED', async t => {
  const w = world()
  const first = w.leg()
  first.leg.onPlatformText(init())
  w.conns[0].ready()
  const second = w.leg()
  second.leg.onPlatformText(init())
  t.match(first.sent.at(-1), { command: 'ERROR', messageType: 'LEG_REPLACED' })
  t.equal(first.leg.state, 'CLOSED')
  t.equal(w.conns[0].state, 'READY', 'the vendor session lives on for the new leg')
  t.match(second.sent, [{ command: 'CONNECTED' }])
})

t.test('the platform drops before CONNECTED: the vendor session is closed, not kept', async t => {
  const w = world()
  const p = w.leg()
  p.leg.onPlatformText(init())
  p.leg.onPlatformClose(1001)
  t.equal(w.conns[0].state, 'CLOSED')
  t.equal(w.registry.parkedCount, 0)
  p.leg.onPlatformBinary(frame(1))
  t.equal(p.leg.counters.dropAfterClose, 1)
})
