import t from 'tap'
import { uniqueFrame, uniqueFramesHash } from '../helpers/audio'
import { platformLeg, routeTo, startVendor, until } from '../helpers/gateway'
import { spawnGateway, type GatewayProcess } from '../helpers/process'
import { throwawayCert } from '../helpers/tls'
import { audioInit } from '../helpers/legs'

// `serve --workers 2` with listen.tls: the platform reaches the workers over wss:// only, while a leg that
// comes back on the other worker than its vendor session is relayed to that worker's loopback fleet
// listener (plain ws://127.0.0.1, an ephemeral port, behind a relay token), and is served end to end.

const count = (out: string, event: string): number => out.split(`"event":"${event}"`).length - 1
const lines = (g: GatewayProcess, event: string): Record<string, unknown>[] =>
  g
    .output()
    .split('\n')
    .filter(l => l.includes(`"event":"${event}"`))
    .map(l => JSON.parse(l) as Record<string, unknown>)
const sample = async (g: GatewayProcess, series: string): Promise<number> => {
  const text = await (await fetch(g.adminUrl('/metrics'))).text()
  const line = text.split('\n').find(l => l.startsWith(`${series} `))
  return line === undefined ? Number.NaN : Number(line.slice(series.length + 1))
}
interface Call {
  worker: number | null
  state: string
  relayedTo?: string
  relayedFrom?: string
}
const callsOf = async (g: GatewayProcess, contactId: number): Promise<Call[]> =>
  ((await (await fetch(g.adminUrl(`/admin/calls?contactId=${contactId}`))).json()) as { calls: Call[] }).calls

t.test('serve --workers 2 with listen.tls: a leg back on the other worker is relayed over loopback', async t => {
  const cert = throwawayCert(t)
  // Results by 20 ms of audio received, and no health probes (a probe is a session the emulator would count).
  const v = await startVendor(t, { kind: 'json-events', resultEveryFrames: 5, resultsByAudio: true })
  const gw = await spawnGateway(
    t,
    {
      listen: { tls: { cert: cert.cert, key: cert.key } },
      health: { active: { kind: 'none' } },
      audio: { reattachGraceSeconds: 30 },
      routes: { demo: routeTo([v], 'mappings/json-events.yaml') }
    },
    { GATEWAY_WORKERS: '2' }
  )
  const url = gw.url('/audio/demo')
  t.match(url, /^wss:\/\//)
  // The workers' `listening` lines (the main process's names how many workers it has, and serves no port itself).
  const listening = (): Record<string, unknown>[] => lines(gw, 'listening').filter(l => l.workers === undefined)
  t.ok(await until(() => listening().length === 2), 'both workers listen')
  t.same(
    listening().map(l => l.tls),
    [true, true],
    'each worker serves the public port with TLS'
  )

  const id = 820001
  // The platform checks the gateway's certificate (the throwaway one): a real TLS handshake on every leg.
  const open = (): ReturnType<typeof platformLeg> => platformLeg(t, url, audioInit(id), { ca: cert.pem })
  let leg = open()
  t.equal((await leg.answer).command, 'CONNECTED', 'a leg over wss:// is served')
  let sent = 0
  const frames = (n: number): void => {
    for (let i = 0; i < n; i++) leg.send(uniqueFrame(id, sent++))
  }
  const arrived = (): boolean => v.sessions()[0]?.bytes === sent * 160
  frames(10)
  t.ok(await until(arrived), 'the vendor has the first frames')
  // Reconnect until the kernel puts the leg on the other worker (each time on the same one is a local
  // re-attach, with no relay step logged). A relay step ends the loop whether the relay worked or not.
  const relaySteps = (): number =>
    ['reattach_relayed', 'reattach_owner_unreachable', 'reattach_split'].reduce((n, e) => n + count(gw.output(), e), 0)
  let tries = 0
  while (relaySteps() === 0 && tries++ < 30) {
    const closedBefore = count(gw.output(), 'platform_closed')
    leg.ws.terminate()
    await leg.closed
    await until(() => count(gw.output(), 'platform_closed') > closedBefore)
    leg = open()
    t.equal((await leg.answer).command, 'CONNECTED')
    frames(10)
    t.ok(await until(() => relaySteps() > 0 || arrived()), 'the frames sent since reach the vendor, or it crossed')
  }
  t.equal(relaySteps(), 1, 'the leg came back on the other worker')
  const relayed = lines(gw, 'reattach_relayed')
  t.equal(relayed.length, 1, 'the worker that has the leg relayed it')
  t.equal(relayed[0]?.hop, 'worker', "to the holding worker's loopback fleet listener (hop worker)")
  t.ok(
    await until(() => count(gw.output(), 'reattached_across_workers') === 1, 10_000),
    'the holding worker re-attached it to its session'
  )
  t.equal(count(gw.output(), 'relay_refused'), 0, 'the relay token was taken')

  const messages = leg.messages.length
  frames(20)
  t.ok(await until(arrived, 10_000), 'frames cross from the worker that has the leg to the one that has the session')
  t.ok(
    await until(() => leg.messages.length > messages, 10_000),
    'results come back to the wss:// leg through the relay'
  )
  t.equal(v.sessions().length, 1, 'the vendor saw one session')
  t.equal(v.sessions()[0].sha256, uniqueFramesHash(id, 0, sent), 'with every byte in order')
  t.same(v.sessions()[0].texts, [], 'and no stop in between')
  t.equal(await sample(gw, 'assist_gateway_audio_reattach_total{route="demo",result="relayed"}'), 1, 'counted relayed')

  // Where the contact's legs are: the live leg RELAYING on one worker, its session's leg on the other.
  let calls: Call[] = []
  t.ok(
    await until(async () => {
      calls = await callsOf(gw, id)
      return calls.some(c => c.relayedTo !== undefined) && calls.some(c => c.relayedFrom !== undefined)
    }),
    '/admin/calls shows the relayed leg and its owner'
  )
  const from = calls.find(c => c.relayedTo !== undefined)
  const to = calls.find(c => c.relayedFrom !== undefined)
  t.equal(from?.state, 'RELAYING', 'the leg the platform holds is relaying')
  t.same([from?.worker, to?.worker].sort(), [0, 1], 'on one worker, its session on the other')
  leg.ws.close(1000)
  await leg.closed
})
