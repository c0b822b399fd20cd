import t, { type Test } from 'tap'
import { WebSocketServer } from 'ws'
import { platformLeg, type PlatformLegClient, startGateway, until, upstreams } from '../helpers/gateway'
import { audioInit } from '../helpers/legs'
import { vendorProcess } from '../helpers/vendor-process'

// Issue 32 item 5 from outside: vendor replicas frozen mid-call (SIGSTOP: the kernel still accepts their
// TCP connections, no upgrade is ever answered). Replacements go where an upgrade is answered: neither
// back to the replica they leave nor to one whose sessions failed, until it has proven itself.

/** A json-events vendor in this process: it answers `started` and counts its sessions. */
async function spareVendor(t: Test): Promise<{ url: string; sessions: () => number }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 })
  await new Promise<void>(resolve => wss.once('listening', () => resolve()))
  let sessions = 0
  wss.on('connection', ws => {
    sessions++
    ws.on('message', (data: Buffer, isBinary) => {
      if (!isBinary && String(data).includes('"start"')) ws.send('{"event":"started"}')
    })
  })
  t.teardown(() => {
    for (const c of wss.clients) c.terminate()
    wss.close()
  })
  return { url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}/`, sessions: () => sessions }
}

/** Each worker's streams on replica `name`. */
async function streamsOn(gw: { adminUrl: (p: string) => string }, name: string): Promise<number[]> {
  const r = (await upstreams(gw.adminUrl(''))).routes[0].replicas.find(x => x.name === name)!
  return r.workers.map(w => w.activeStreams)
}

t.test(
  'two replicas frozen one after the other: the second loss goes to the replica that answers, never to the first frozen one',
  async t => {
    const first = await vendorProcess(t, 'json-events')
    const second = await vendorProcess(t, 'json-events')
    const spare = await spareVendor(t)
    const gw = await startGateway(t, {
      audio: {
        replayRate: 4,
        vendorPingSeconds: 0.5,
        vendorPongTimeoutSeconds: 1,
        failoverTimeoutSeconds: 20,
        // Long enough that an attempt on a frozen replica shows as a connect failure, never passes.
        connectTimeoutSeconds: 5,
        // Off: these calls are seconds old, and the breaker (sessions lost within 5 s of opening) would hold
        // the frozen replica off by itself; what is tested is the failover's own choice.
        sessionBreaker: { quickLossSeconds: 0 }
      },
      // Probes as the mapping says (an upgrade), rarely: the periodic probe must not be what saves the legs.
      // Passive ejection out of reach: what is tested is the failover's own choice, as in a worker that saw
      // fewer failures on the replica than the ejection threshold (3 by default: a worker with 1 or 2 calls there).
      health: { active: { kind: 'upgrade', intervalSeconds: 600 }, passive: { consecutiveFailures: 100 } },
      routes: {
        demo: {
          mapping: 'mappings/json-events.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          // Once the spare holds one call, the two others take every new call while they answer (by weight),
          // and a frozen one whose calls have moved is the least busy of all.
          upstreams: [
            { name: 'spare', audio: spare.url, weight: 1 },
            { name: 'first', audio: `ws://127.0.0.1:${first.port}/`, weight: 1000 },
            { name: 'second', audio: `ws://127.0.0.1:${second.port}/`, weight: 1000 }
          ]
        }
      }
    })
    const legs: PlatformLegClient[] = []
    const frame = Buffer.alloc(160, 0xff)
    const pump = setInterval(() => {
      for (const l of legs) l.send(frame)
    }, 20)
    t.teardown(() => clearInterval(pump))
    const anchor = platformLeg(t, gw.url('/audio/demo'), audioInit(931999))
    t.equal((await anchor.answer).command, 'CONNECTED')
    t.equal(spare.sessions(), 1, 'the first call on the spare (a tie: config order)')
    t.ok(
      await until(async () =>
        (await upstreams(gw.adminUrl(''))).routes[0].replicas
          .find(r => r.name === 'spare')!
          .workers.every(w => w.fleetStreams === 1)
      ),
      'every worker counts it'
    )
    // Legs until every worker holds calls on the second replica (SO_REUSEPORT spreads them as it will):
    // then every worker sees it fail. 8 at least, in fours.
    let onSecond: number[] = []
    for (let i = 0; i < 64 && (i < 8 || !onSecond.every(n => n > 0)); i += 4) {
      const batch = [0, 1, 2, 3].map(k => platformLeg(t, gw.url('/audio/demo'), audioInit(932000 + i + k)))
      for (const l of batch) t.equal((await l.answer).command, 'CONNECTED')
      legs.push(...batch)
      onSecond = await streamsOn(gw, 'second')
    }
    const N = legs.length
    legs.push(anchor)
    t.equal(spare.sessions(), 1, 'every other call on the two others')
    t.ok(
      onSecond.every(n => n > 0),
      `every worker holds calls on the second replica (${onSecond}), so every worker sees it fail`
    )
    const lostOnSecond = onSecond.reduce((a, b) => a + b, 0)

    // The second replica freezes: its calls move (to the first, by weight); it is failing in every worker.
    second.child.kill('SIGSTOP')
    t.ok(
      await until(() => gw.logs.lines.filter(l => l.event === 'failover_done').length >= lostOnSecond, 30_000),
      `the ${lostOnSecond} calls on the second replica failed over`
    )
    t.ok(
      await until(async () => (await streamsOn(gw, 'first')).reduce((a, b) => a + b, 0) === N),
      'all on the first now'
    )
    // The first freezes too. By balancing the second (frozen, no call left) would be the first choice.
    first.child.kill('SIGSTOP')
    t.ok(
      await until(() => gw.logs.lines.filter(l => l.event === 'failover_done').length >= lostOnSecond + N, 30_000),
      'every call on the first failed over too'
    )
    t.equal(spare.sessions(), 1 + N, 'every call is on the spare')
    const onFrozen = gw.logs.lines.filter(
      l =>
        (l.event === 'upstream_connect_failed' || l.event === 'failover_attempt_failed') &&
        (l.upstream === 'second' || l.upstream === 'first')
    )
    t.same(onFrozen, [], 'no session attempt on a frozen replica: no upgrade left unanswered')
    const done = gw.logs.lines.filter(l => l.event === 'failover_done')
    t.equal(done.length, lostOnSecond + N, 'one recovery per loss')
    t.same(
      done.slice(lostOnSecond).map(l => l.upstream),
      Array.from({ length: N }, () => 'spare'),
      'the second loss of each call went to the spare at the first attempt'
    )
    for (const l of legs) t.equal(l.ws.readyState, l.ws.OPEN, 'the platform socket stayed open')
  }
)
