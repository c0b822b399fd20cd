import t from 'tap'
import { AudioLeg } from '../../../../gateway/audio/leg/leg'
import { tagResult } from '../../../../gateway/audio/session/tee'
import type { RouteRuntime, TeeRuntime } from '../../../../gateway/route'
import { Metrics } from '../../../../gateway/telemetry/metrics'
import { FakeClock } from '../../../helpers/fake-clock'
import { fakePlatform, initFrame } from '../../../helpers/fake-platform'
import { type FakeConnection, fakeLegDeps, frame, Lines, route, SETTINGS } from '../harness'
import { loneGateway } from '../../../helpers/leg-deps'

// A platform leg whose route has tees, on fake vendor connections and the fake clock: replica `a` is the
// primary's, `t` the tee's.

function world(results: 'drop' | 'forward' = 'drop', tees = 1) {
  const clock = new FakeClock()
  const teeRuntimes: TeeRuntime[] = []
  for (let i = 0; i < tees; i++) {
    const name = `shadow${i === 0 ? '' : i}`
    const runtime = { ...route(clock, ['t']), name: `r/${name}` } as RouteRuntime
    teeRuntimes.push({ name, route: 'r', results, runtime })
  }
  const r: RouteRuntime = { ...route(clock, ['a']), tees: teeRuntimes }
  const metrics = new Metrics()
  const logs = new Lines()
  const conns: FakeConnection[] = []
  const platform = fakePlatform()
  const deps = { settings: { ...SETTINGS, failoverTimeoutSeconds: 1 }, platformHighWaterBytes: 1000 }
  const gw = loneGateway(clock)
  const leg = new AudioLeg(platform.socket, fakeLegDeps({ clock, route: r, gw, metrics, log: logs.log, conns }, deps))
  platform.bind(leg)
  leg.onPlatformText(initFrame({ contactId: 7001, busNo: 4594, perspective: 'TX' }))
  const of = (replica: string): FakeConnection[] => conns.filter(c => c.replica.name === replica)
  return {
    clock,
    leg,
    sent: platform.sent,
    ended: platform.ended,
    metrics,
    logs,
    primary: () => of('a').at(-1)!,
    tee: (i = 0) => conns.filter(c => c.replica.name === 't')[i],
    backUp: (n: number) => {
      platform.state.buffered = n
    }
  }
}

async function sample(metrics: Metrics, name: string, labels: Record<string, string>): Promise<number> {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`)
  for (const line of (await metrics.registry.metrics()).split('\n')) {
    if (!line.startsWith(`assist_gateway_${name}{`)) continue
    const have = line.slice(line.indexOf('{') + 1, line.lastIndexOf('}')).split(',')
    if (have.length === want.length && want.every(w => have.includes(w))) return Number(line.split(' ').pop())
  }
  return 0
}

t.test('the tee opens with the leg, gets the same frames, and never speaks to the platform', async t => {
  const w = world()
  t.ok(w.tee(), 'a tee connection opens at the init')
  w.primary().ready({ ok: 1 })
  t.match(w.sent, [{ command: 'CONNECTED' }], 'CONNECTED comes from the primary alone')
  w.tee().ready()
  for (let i = 0; i < 5; i++) w.leg.onPlatformBinary(frame(i))
  t.same(w.primary().frames, [0, 1, 2, 3, 4])
  t.same(w.tee().frames, [0, 1, 2, 3, 4], 'the tee gets the same frames')
  w.tee().result(JSON.stringify({ command: 'MESSAGE', messageType: 'T', message: 'x', parameters: {} }))
  t.equal(w.sent.length, 1, 'results: drop: nothing from the tee reaches the platform')
  t.equal(await sample(w.metrics, 'audio_tee_messages_total', { route: 'r', tee: 'shadow', result: 'dropped' }), 1)
  w.leg.onPlatformClose(1000)
  t.equal(w.tee().state, 'CLOSING', 'the tee says goodbye when the leg ends')
  t.equal(await sample(w.metrics, 'audio_tee_sessions_total', { route: 'r', tee: 'shadow', outcome: 'ok' }), 1)
})

t.test('a refused tee ends alone: the leg streams on, later frames are counted as the tee drops', async t => {
  const w = world()
  w.primary().ready()
  w.tee().failWith({ kind: 'refused', vendorMessage: 'no' })
  for (let i = 0; i < 7; i++) w.leg.onPlatformBinary(frame(i))
  t.equal(w.leg.state, 'STREAMING')
  t.same(w.ended, [], 'the platform leg is not closed')
  t.same(
    w.sent.map(m => m.command),
    ['CONNECTED'],
    'no ERROR frame'
  )
  t.equal(w.primary().frames.length, 7, 'the primary got every frame')
  t.equal(await sample(w.metrics, 'audio_tee_dropped_frames_total', { route: 'r', tee: 'shadow', reason: 'ended' }), 7)
  t.equal(
    await sample(w.metrics, 'audio_tee_sessions_total', { route: 'r', tee: 'shadow', outcome: 'upstream_refused' }),
    1
  )
  t.ok(
    w.logs.lines.some(l => l.event === 'tee_failed' && l.tee === 'shadow'),
    'logged with the tee name'
  )
})

t.test('a backed-up tee drops its oldest audio (counted); the primary is untouched', async t => {
  const w = world()
  w.primary().ready()
  w.tee().ready()
  w.tee().bufferedAmount = 5000 // over vendorHighWaterBytes: the tee's relay queues (bufferBytes: 20 frames)
  for (let i = 0; i < 30; i++) w.leg.onPlatformBinary(frame(i))
  t.equal(w.primary().frames.length, 30)
  t.equal(
    await sample(w.metrics, 'audio_tee_dropped_frames_total', { route: 'r', tee: 'shadow', reason: 'backpressure' }),
    10
  )
  t.equal(w.leg.state, 'STREAMING')
  t.equal(await sample(w.metrics, 'audio_dropped_frames_total', { route: 'r', reason: 'backpressure' }), 0)
})

t.test('a tee lost mid-call fails over on its own pool, then gives up alone at the deadline', async t => {
  const w = world()
  w.primary().ready()
  w.tee().ready()
  w.leg.onPlatformBinary(frame(1))
  w.tee().failWith({ kind: 'closed', code: 1006, reason: '', socket: null })
  t.equal(w.tee(1)?.replica.name, 't', 'a replacement tee connection is opened')
  // Every replacement fails; the tee's failover deadline (failoverTimeoutSeconds: 1) passes.
  let tried = 1
  for (let ms = 0; ms <= 1000; ms += 50) {
    const c = w.tee(tried)
    if (c !== undefined && c.state !== 'CLOSED') {
      c.failWith({ kind: 'unreachable', socket: { kind: 'closed-before-open' } })
      tried++
    }
    w.clock.advance(50)
  }
  t.ok(tried > 1, `the tee tried again (${tried - 1} replacements)`)
  for (let i = 2; i < 5; i++) w.leg.onPlatformBinary(frame(i))
  t.equal(w.leg.state, 'STREAMING', 'the leg streams on')
  t.same(w.primary().frames, [1, 2, 3, 4])
  t.ok(w.logs.lines.some(l => l.event === 'tee_failed' && l.code === 'UPSTREAM_CLOSED'))
  t.equal(await sample(w.metrics, 'audio_tee_dropped_frames_total', { route: 'r', tee: 'shadow', reason: 'ended' }), 3)
  t.equal(w.sent.length, 1, 'only CONNECTED reached the platform')
})

t.test('results: forward: tee MESSAGE frames reach the platform tagged, only while it is not backed up', async t => {
  const w = world('forward')
  const msg = { command: 'MESSAGE', messageType: 'T', message: 'early', parameters: { seq: 1 } }
  w.tee().ready()
  w.tee().result(JSON.stringify(msg))
  t.equal(w.sent.length, 0, 'nothing before CONNECTED')
  w.primary().ready()
  t.match(w.sent, [{ command: 'CONNECTED' }, { message: 'early', parameters: { seq: 1, tee: 'shadow' } }])
  w.tee().result(JSON.stringify({ command: 'ERROR', messageType: 'X', message: '', parameters: {} }))
  w.backUp(5000)
  w.tee().result(JSON.stringify(msg))
  t.equal(w.sent.length, 2, 'no ERROR from a tee, and nothing while the platform is backed up')
  const r = { route: 'r', tee: 'shadow' }
  t.equal(await sample(w.metrics, 'audio_tee_messages_total', { ...r, result: 'forwarded' }), 1)
  t.equal(await sample(w.metrics, 'audio_tee_messages_total', { ...r, result: 'platform_backpressure' }), 1)
})

t.test('tagResult keeps the platform schema: parameters.tee only', async t => {
  t.same(JSON.parse(tagResult('{"command":"MESSAGE","messageType":"T","message":"m"}', 'x')!), {
    command: 'MESSAGE',
    messageType: 'T',
    message: 'm',
    parameters: { tee: 'x' }
  })
  t.equal(tagResult('not json', 'x'), null)
  t.equal(tagResult('{"command":"CONNECTED","parameters":{}}', 'x'), null)
})
