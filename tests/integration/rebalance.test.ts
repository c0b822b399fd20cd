import t from 'tap'
import { uniqueFrame } from '../helpers/audio'
import { platformLeg, startGateway, startVendor, until, upstreams } from '../helpers/gateway'
import { freePort } from '../helpers/process'
import { audioInit } from '../helpers/legs'

// Issue 19 item 3 over real sockets: a replica that comes up while every call sits on the other one gets
// calls back, make-before-break, paced, until the spread holds; no leg is cut and no audio is lost.

t.test('a replica that comes up gets calls back, paced, with no leg cut and no audio lost', async t => {
  const a = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const bPort = await freePort()
  const gw = await startGateway(t, {
    health: {
      active: { kind: 'http', path: '/healthz', intervalSeconds: 0.2, unhealthyThreshold: 1, healthyThreshold: 1 }
    },
    audio: { rebalance: { spread: 2, perSecond: 2, settleSeconds: 0 } },
    routes: {
      demo: {
        mapping: 'mappings/json-events.yaml', // movable: true
        auth: { audio: ['${AUDIO_TOKEN}'] },
        upstreams: [
          { name: 'a', audio: a.url },
          { name: 'b', audio: `ws://127.0.0.1:${bPort}/stream` } // nothing listens yet: probed down
        ]
      }
    }
  })
  const state = async (name: string): Promise<{ state: string; activeStreams: number }> =>
    (await upstreams(gw.adminUrl(''))).routes[0].replicas.find(r => r.name === name)! as never
  t.ok(await until(async () => (await state('b')).state === 'down'), 'b is down')
  const legs = Array.from({ length: 10 }, (_v, i) => platformLeg(t, gw.url('/audio/demo'), audioInit(950000 + i)))
  for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
  t.equal((await state('a')).activeStreams, 10, 'every call on a')
  let sent = 0
  const pump = setInterval(() => {
    legs.forEach((l, i) => l.send(uniqueFrame(950000 + i, sent)))
    sent++
  }, 20)
  t.teardown(() => clearInterval(pump))
  const b = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0, port: bPort })
  t.ok(await until(async () => (await state('b')).state === 'up'), 'b comes up')
  const upAt = performance.now()
  t.ok(
    await until(async () => (await state('a')).activeStreams - (await state('b')).activeStreams <= 2, 20_000),
    'the calls spread out to within audio.rebalance.spread'
  )
  const seconds = (performance.now() - upAt) / 1000
  const moved = (await state('b')).activeStreams
  t.ok(moved >= 4, `${moved} calls moved to b`)
  t.ok(moved <= 2 * (seconds + 1.5), `no faster than perSecond (2/s): ${moved} in ${seconds.toFixed(1)} s`)
  clearInterval(pump)
  await new Promise(r => setTimeout(r, 300))
  t.ok(
    legs.every(l => l.ws.readyState === l.ws.OPEN),
    'no platform leg was cut'
  )
  // Make-before-break: every frame a leg sent reached a vendor, once (the old session took it until the new
  // one was ready). The json-events emulators report bytes per session.
  const bytes = [...a.sessions(), ...b.sessions()].reduce((n, s) => n + s.bytes, 0)
  t.ok(
    await until(
      () => [...a.sessions(), ...b.sessions()].reduce((n, s) => n + s.bytes, 0) === legs.length * sent * 160,
      5000
    ),
    `every frame reached a vendor exactly once (${bytes} of ${legs.length * sent * 160} bytes at first look)`
  )
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(metrics, /assist_gateway_audio_moves_total\{route="demo",from="a",to="b"\} [4-9]/)
  for (const l of legs) l.ws.close(1000)
})
