import t, { type Test } from 'tap'
import type { ChildProcess } from 'node:child_process'
import { WebSocketServer } from 'ws'
import { initMessage } from '../../gateway/tools/simulate'
import { spawnCli } from '../helpers/cli'
import { AUDIO_TOKEN, platformLeg, type PlatformLegClient, startGateway, until, upstreams } from '../helpers/gateway'
import { freePort } from '../helpers/process'

// Issue 32 item 5 from outside: a vendor replica frozen mid-call (SIGSTOP: the kernel still accepts its
// TCP connections, no upgrade is ever answered). Replacements, and the new legs that come meanwhile, go
// where an upgrade is answered: the frozen replica gets no session attempt until it has proven itself.

/** The bundled json-events emulator as a process of its own (so it can be SIGSTOPped), killed at teardown. */
async function vendorProcess(t: Test): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort()
  const child: ChildProcess = spawnCli([
    'vendor',
    '--kind',
    'json-events',
    '--port',
    String(port),
    '--result-every-frames',
    '0'
  ])
  t.teardown(() => {
    try {
      child.kill('SIGCONT')
    } catch {}
    child.kill('SIGKILL')
  })
  let out = ''
  child.stdout!.on('data', d => {
    out += String(d)
  })
  t.ok(await until(() => out.includes('vendor emulator on'), 20_000), 'the vendor process is up')
  return { port, child }
}

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

const init = (contactId: number): Record<string, unknown> =>
  initMessage({ token: AUDIO_TOKEN, contactId, busNo: 4594, perspective: 'TX' })

t.test(
  'a replica frozen mid-call: every replacement and every new leg goes to the replica that answers, none to the frozen one',
  async t => {
    const { port, child } = await vendorProcess(t)
    const spare = await spareVendor(t)
    const gw = await startGateway(t, {
      audio: {
        replayRate: 4,
        vendorPingSeconds: 0.5,
        vendorPongTimeoutSeconds: 1,
        failoverTimeoutSeconds: 20,
        // Long enough that an attempt on the frozen replica would show as a connect failure, never pass.
        connectTimeoutSeconds: 5
      },
      // Probes as the mapping says (an upgrade), rarely: the periodic probe must not be what saves the legs.
      health: { active: { kind: 'upgrade', intervalSeconds: 600 } },
      routes: {
        demo: {
          mapping: 'mappings/json-events.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          // Once the spare holds one call, the frozen-to-be one takes every new call while it answers (by
          // weight), and it is the least busy after its calls have moved.
          upstreams: [
            { name: 'spare', audio: spare.url, weight: 1 },
            { name: 'frozen', audio: `ws://127.0.0.1:${port}/`, weight: 1000 }
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
    const anchor = platformLeg(t, gw.url('/audio/demo'), init(931999))
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
    // Enough legs that every worker holds some (SO_REUSEPORT spreads them): each worker sees a loss.
    const N = 12
    for (let i = 0; i < N; i++) legs.push(platformLeg(t, gw.url('/audio/demo'), init(932000 + i)))
    for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
    t.equal(spare.sessions(), 1, 'every other call on the frozen-to-be replica')
    legs.push(anchor)
    child.kill('SIGSTOP')
    t.ok(
      await until(() => gw.logs.lines.filter(l => l.event === 'failover_done').length >= N, 30_000),
      'every leg failed over'
    )
    const done = gw.logs.lines.filter(l => l.event === 'failover_done')
    t.same([...new Set(done.map(l => l.upstream))], ['spare'], 'every replacement went to the replica that answers')
    // New legs while the replica is still frozen: the least busy by weight is the frozen one, but it is
    // failing in every worker (its sessions were lost) and proved nothing since.
    const more: PlatformLegClient[] = []
    for (let i = 0; i < 4; i++) more.push(platformLeg(t, gw.url('/audio/demo'), init(932100 + i)))
    for (const l of more) t.equal((await l.answer).command, 'CONNECTED')
    t.equal(spare.sessions(), 1 + N + 4, 'the new legs are on the spare')
    const onFrozen = gw.logs.lines.filter(
      l => (l.event === 'upstream_connect_failed' || l.event === 'failover_attempt_failed') && l.upstream === 'frozen'
    )
    t.same(onFrozen, [], 'no session attempt on the frozen replica: no upgrade left unanswered')
    for (const l of [...legs, ...more]) t.equal(l.ws.readyState, l.ws.OPEN, 'the platform socket stayed open')
  }
)
