import type { CallsAnswer } from '../../gateway/cli-calls'
import t, { type Test } from 'tap'
import { randomUUID } from 'node:crypto'
import { startRealVendor, type RealVendorEmulator, type RealVendorSession } from '../../gateway/tools/real-vendors'
import { initMessage } from '../../gateway/tools/simulate'
import {
  AUDIO_TOKEN,
  logged,
  platformLeg,
  startGateway,
  until,
  type PlatformLegClient,
  type TestGateway
} from '../helpers/gateway'
import { freePort, spawnGateway } from '../helpers/process'
import { audioInit } from '../helpers/legs'
import { seriesAt } from '../helpers/metrics'
import { needRedis } from '../helpers/redis'
import { connectAndSend, sha, sideBytes, sideFrame, stereoRoute, TICK } from '../helpers/stereo'

// The join across instances: two (three) real gateways sharing Redis, each with fleet.advertiseUrl. The
// TX and RX legs of a call land on different instances; the first claims the call, the other's leg is
// relayed to it, and the strict Deepgram emulator sees one stereo session per call with exact channels.

const DG_KEY = 'dg-key-0123456789abcdef'
const FRAMES = 10
const frame = sideFrame
const sideSha = (contact: number, side: number, from = 0, to = FRAMES): string =>
  sha(sideBytes(contact, side, from, to))
const voiced = (s: RealVendorSession | undefined, ch: number): number => {
  const c = s?.channels?.[ch]
  return c === undefined ? 0 : c.samples - c.silence
}

/** A fleet member's config: Redis with the shared key prefix, the stereo Deepgram join route. */
function fleetConfig(redis: string, dg: RealVendorEmulator, prefix: string, fleet: Record<string, unknown>) {
  return {
    redis,
    store: { keyPrefix: prefix, syncIntervalSeconds: 0.2, leaseSeconds: 10 },
    fleet,
    audio: { reattachGraceSeconds: 5 },
    routes: {
      dg: stereoRoute(dg.url, 1, { auth: { audio: ['${AUDIO_TOKEN}'] } })
    }
  }
}

async function instance(
  t: Test,
  dg: RealVendorEmulator,
  prefix: string,
  advertiseUrl?: string,
  audio: Record<string, unknown> = {}
): Promise<TestGateway> {
  const fleet = advertiseUrl === undefined ? {} : { advertiseUrl }
  const config = fleetConfig(await needRedis(), dg, prefix, fleet)
  return await startGateway(t, { ...config, audio: { ...config.audio, ...audio } }, { DG_KEY })
}

const leg = (t: Test, gw: TestGateway, contactId: number, perspective: string): PlatformLegClient =>
  platformLeg(t, gw.url('/audio/dg'), audioInit(contactId, perspective))

// Bounded: a poll of a process that does not answer fails the poll, not the whole file at its timeout.
const metric = async (gw: TestGateway, series: string): Promise<number> =>
  await seriesAt(gw.adminUrl('/metrics'), series, { signal: AbortSignal.timeout(10_000) })

t.test('join across instances on Redis', async t => {
  const dg = await startRealVendor({ kind: 'deepgram', apiKey: DG_KEY, resultEveryMs: 200 })
  t.teardown(async () => await dg.close())
  const prefix = `test:${randomUUID()}:`
  const a = await instance(t, dg, prefix, 'ws://127.0.0.1')
  const b = await instance(t, dg, prefix, 'ws://127.0.0.1')

  await t.test('20 calls, TX and RX on different instances: one stereo session per call, exact channels', async t => {
    const N = 20
    // Even calls: TX on A, RX on B; odd calls: the other way round. Both legs come at once: whichever
    // claims the call first holds it (the claim is atomic in Redis), the other is relayed there.
    const pairs: [PlatformLegClient, PlatformLegClient][] = []
    for (let i = 0; i < N; i++) {
      const [first, second] = i % 2 === 0 ? [a, b] : [b, a]
      pairs.push([leg(t, first, 3000 + i, 'TX'), leg(t, second, 3000 + i, 'RX')])
    }
    await connectAndSend(t, pairs, FRAMES, 'each of the 40 legs got CONNECTED (a relayed one from the owner)')
    const want = FRAMES * TICK
    t.ok(
      await until(
        () => dg.sessions().length >= N && dg.sessions().every(s => voiced(s, 0) >= want && voiced(s, 1) >= want),
        20_000,
        100
      ),
      'all audio arrived'
    )
    t.equal(dg.sessions().length, N, 'one vendor session per call, not one per instance')
    const byTx = new Map(Array.from({ length: N }, (_v, i) => [sideSha(i, 0), i]))
    let matched = 0
    for (const s of dg.sessions()) {
      t.same(s.errors, [], 'no protocol error')
      const i = byTx.get(s.channels?.[0]?.voicedSha256 ?? '')
      if (i === undefined) continue
      matched++
      t.equal(s.channels?.[1]?.voicedSha256, sideSha(i, 1), `call ${i}: channel 1 is exactly the RX bytes`)
    }
    t.equal(matched, N, 'channel 0 of every session is exactly its call’s TX bytes')
    const relayed =
      (await metric(a, 'assist_gateway_audio_joins_total{route="dg",result="relayed"}')) +
      (await metric(b, 'assist_gateway_audio_joins_total{route="dg",result="relayed"}'))
    // Once to the other instance, and once more within it when the fleet listener the workers share hands it
    // to a worker that does not hold the call (a relay between workers is counted as one too).
    t.ok(relayed >= N && relayed <= 2 * N, `the second leg of every call was relayed to the first one’s (${relayed})`)
    // Results by channel reach the right leg, through the relay too.
    const transcripts = (l: PlatformLegClient) => l.messages.filter(m => m.messageType === 'TRANSCRIPT')
    t.ok(
      await until(() => pairs.every(([tx, rx]) => transcripts(tx).length > 0 && transcripts(rx).length > 0), 10_000),
      'results reached both legs'
    )
    t.ok(
      pairs.every(([, rx]) =>
        transcripts(rx).every(m => (m.parameters as { perspective: string }).perspective === 'RX')
      ),
      'a relayed RX leg gets channel 1’s results only'
    )
    for (const l of pairs.flat()) l.ws.close(1000)
  })

  await t.test(
    'the relayed leg on hold and back on the other instance: one session, the other side flowing',
    async t => {
      const before = dg.sessions().length
      const tx = leg(t, a, 3900, 'TX')
      const rx = leg(t, b, 3900, 'RX')
      t.equal((await tx.answer).command, 'CONNECTED')
      t.equal((await rx.answer).command, 'CONNECTED')
      for (let k = 0; k < 5; k++) {
        tx.send(frame(1, 0, k))
        rx.send(frame(1, 1, k))
      }
      const mine = (): RealVendorSession | undefined => dg.sessions()[before]
      t.ok(await until(() => voiced(mine(), 1) === 5 * TICK), 'RX (relayed) audio arrived')
      rx.ws.close(1000)
      await rx.closed
      for (let k = 5; k < 10; k++) tx.send(frame(1, 0, k))
      t.ok(await until(() => voiced(mine(), 0) === 10 * TICK), 'TX kept flowing while RX was away')
      t.equal(mine()?.closed, false, 'the vendor session stayed open')
      const back = leg(t, a, 3900, 'RX') // back on the other instance
      t.equal((await back.answer).command, 'CONNECTED', 'RX came back: CONNECTED')
      for (let k = 5; k < 10; k++) back.send(frame(1, 1, k))
      t.ok(await until(() => voiced(mine(), 1) === 10 * TICK), 'RX flows again into the same session')
      t.equal(dg.sessions().length, before + 1, 'still one vendor session')
      t.equal(mine()?.channels?.[1]?.voicedSha256, sideSha(1, 1), 'channel 1: every RX byte, before and after')
      tx.ws.close(1000)
      back.ws.close(1000)
    }
  )

  await t.test('an owner that cannot be reached: the leg takes the call over and is served alone', async t => {
    // C claims its calls with an address nobody listens on (its TX leg is alone until the wait ends).
    const c = await instance(t, dg, prefix, 'ws://127.0.0.1:1')
    const tx = leg(t, c, 3950, 'TX')
    t.equal((await tx.answer).command, 'CONNECTED')
    const rx = leg(t, b, 3950, 'RX')
    t.equal((await rx.answer).command, 'CONNECTED', 'the leg is served, not refused')
    t.ok(await until(() => logged(b, 'join_owner_unreachable')), 'logged: the owner could not be reached')
    t.equal(await metric(b, 'assist_gateway_audio_joins_total{route="dg",result="relay_failed"}'), 1, 'counted')
    // B now holds the call: a later leg of it on A is relayed to B, not to C.
    const again = leg(t, a, 3950, 'RX')
    t.equal((await again.answer).command, 'CONNECTED')
    t.ok(
      await until(async () => (await metric(a, 'assist_gateway_audio_joins_total{route="dg",result="relayed"}')) > 0),
      'relayed to the instance that took the call over'
    )
    for (const l of [tx, rx, again]) l.ws.close(1000)
  })

  await t.test('the owner stops: the relayed leg gets its ERROR and close code, as a local one', async t => {
    const d = await instance(t, dg, prefix, 'ws://127.0.0.1')
    const tx = leg(t, d, 3990, 'TX')
    t.equal((await tx.answer).command, 'CONNECTED')
    const rx = leg(t, a, 3990, 'RX')
    t.equal((await rx.answer).command, 'CONNECTED')
    void d.close()
    const [txEnd, rxEnd] = await Promise.all([tx.closed, rx.closed])
    t.equal(txEnd.code, 1012, 'the owner’s own leg: 1012')
    t.equal(rxEnd.code, 1012, 'the relayed leg: the same 1012')
    t.ok(
      rx.messages.some(m => m.command === 'ERROR' && m.messageType === 'SHUTTING_DOWN'),
      'the relayed leg got the owner’s ERROR SHUTTING_DOWN'
    )
  })

  /** The pid of the process serving a contact's call on `g`: a worker's (from its call record), or g's own. */
  async function ownerWorkerPid(g: TestGateway, contactId: number): Promise<number> {
    let process = ''
    await until(async () => {
      const answer = (await (await fetch(g.adminUrl(`/admin/calls?contactId=${contactId}`))).json()) as CallsAnswer
      process = answer.calls.find(c => c.relayedTo === undefined && c.state !== 'PARKED')?.process ?? ''
      return process !== ''
    })
    const worker = /\/w\d+\.(\d+)$/.exec(process)
    return worker === null ? g.pid : Number(worker[1])
  }

  /** A call held by a gateway in its own process (its TX leg there first), and its RX leg on `relay` (B), relayed to it. */
  async function relayedToProcess(t: Test, contactId: number, audio: Record<string, unknown> = {}, relay = b) {
    const fleet = { host: '127.0.0.1', port: await freePort(), advertiseUrl: 'ws://127.0.0.1' }
    const config = fleetConfig(await needRedis(), dg, prefix, fleet)
    const owner = await spawnGateway(t, { ...config, audio: { ...config.audio, ...audio } }, { DG_KEY })
    const tx = platformLeg(t, owner.url('/audio/dg'), audioInit(contactId))
    t.equal((await tx.answer).command, 'CONNECTED', 'the owner process holds the call (its TX leg came first)')
    const rx = leg(t, relay, contactId, 'RX')
    t.equal((await rx.answer).command, 'CONNECTED', 'RX on another instance: relayed to the owner process')
    return { owner, tx, rx }
  }

  await t.test(
    'the owner process dies mid-call: the relayed leg ends UPSTREAM_CLOSED; its reconnect takes the call over',
    async t => {
      const { owner, rx } = await relayedToProcess(t, 3995)
      for (let k = 0; k < 5; k++) rx.send(frame(2, 1, k))
      const mine = sideSha(2, 1, 0, 5)
      t.ok(
        await until(() => dg.sessions().some(s => s.channels?.[1]?.voicedSha256 === mine)),
        'RX audio reached the joined session'
      )
      // The process that holds the call dies: with workers, the worker serving it (its call record names it);
      // the main process's death would drain its workers (1012), not cut them.
      process.kill(await ownerWorkerPid(owner, 3995), 'SIGKILL')
      t.equal((await rx.closed).code, 1011, 'the relayed leg is closed with 1011')
      t.ok(
        rx.messages.some(m => m.command === 'ERROR' && m.messageType === 'UPSTREAM_CLOSED'),
        'with ERROR UPSTREAM_CLOSED first, as when a vendor session ends'
      )
      const again = leg(t, b, 3995, 'RX')
      t.equal((await again.answer).command, 'CONNECTED', 'the reconnect is served: the call is taken over here')
      t.ok(await until(() => logged(b, 'join_owner_unreachable')), 'logged: the owner could not be reached')
      again.ws.close(1000)
    }
  )

  await t.test('a relayed leg is judged by its platform address, signed by the relaying instance', async t => {
    // Two instances with a failure budget of 1 and two callers' credentials. A caller relayed to the
    // owner with another caller's identity is refused there: its own address is blocked, not the
    // relaying instance's, so the other platform legs it relays keep being served.
    const OTHER = 'other-caller-token-0123456789'
    const config = (): Record<string, unknown> => {
      const c = fleetConfig('', dg, prefix, { advertiseUrl: 'ws://127.0.0.1' }) as Record<string, any>
      c.auth = { failureDelayMs: 0, failureBudget: { failures: 1, windowSeconds: 60 } }
      c.routes.dg.auth = { audio: ['${AUDIO_TOKEN}', '${OTHER}'] }
      return c
    }
    const REDIS_URL = await needRedis()
    const e = await startGateway(t, { ...config(), redis: REDIS_URL }, { DG_KEY, OTHER })
    const f = await startGateway(t, { ...config(), redis: REDIS_URL }, { DG_KEY, OTHER })
    const from = (gw: TestGateway, perspective: string, token: string, localAddress: string): PlatformLegClient =>
      platformLeg(t, gw.url('/audio/dg'), initMessage({ token, contactId: 3997, busNo: 4594, perspective }), {
        localAddress
      })
    const tx = from(e, 'TX', AUDIO_TOKEN, '127.0.0.1')
    t.equal((await tx.answer).command, 'CONNECTED', 'E holds the call')
    const intruder = from(f, 'TX', OTHER, '127.0.0.7')
    t.match(await intruder.answer, { command: 'ERROR', messageType: 'CALLER_MISMATCH' }, 'another caller: refused')
    const rx = from(f, 'RX', AUDIO_TOKEN, '127.0.0.8')
    t.equal((await rx.answer).command, 'CONNECTED', 'another platform address relayed by F: served')
    const again = from(f, 'RX', OTHER, '127.0.0.7')
    t.match(
      await again.answer,
      { command: 'ERROR', messageType: 'TOO_MANY_FAILURES' },
      'the refused address itself has spent its budget on the owner'
    )
    t.equal(tx.ws.readyState, tx.ws.OPEN, 'the call is untouched')
    for (const l of [tx, rx]) l.ws.close(1000)
  })

  await t.test(
    'an owner that stops reading: the relaying instance drops beyond audio.bufferBytes, counted',
    async t => {
      // The relay towards the owning worker may pass one of the owner's workers first (the fleet port its workers
      // share), which relays to the owning worker in turn: either relaying process drops, and counts. No heartbeat
      // on the owner's links: an owner frozen for longer than detection is (rightly) found dead and its
      // relayed legs end; what is tested here is an owner that does not read.
      // The relaying instance's pings off too: with them, it finds the frozen owner dead (~3 s) and closes the leg.
      const relay = await instance(t, dg, prefix, 'ws://127.0.0.1', { vendorPingSeconds: 0 })
      const { owner, tx, rx } = await relayedToProcess(t, 3999, { vendorPingSeconds: 0 }, relay)
      const series = 'assist_gateway_audio_dropped_frames_total{route="dg",reason="backpressure"}'
      const drops = async (): Promise<number> => (await metric(relay, series)) + (await metric(owner, series))
      const before = await drops()
      const ownerPid = await ownerWorkerPid(owner, 3999)
      // A worker owns it: the main process (which answers /metrics and the admin API) is never the one frozen.
      if (ownerPid === owner.pid) {
        t.fail('the call is owned by a worker of the owning instance', {
          calls: await (await fetch(owner.adminUrl('/admin/calls?contactId=3999'))).json()
        })
        return
      }
      process.kill(ownerPid, 'SIGSTOP') // reads nothing from now: the relay's socket fills up
      t.teardown(() => {
        try {
          process.kill(ownerPid, 'SIGCONT')
        } catch {}
      })
      const big = Buffer.alloc(60_000, 0x33)
      for (let i = 0; i < 300; i++) rx.send(big) // 18 MB: past the kernel's buffers and audio.bufferBytes
      t.ok(await until(async () => (await drops()) > before), 'frames past the bound are dropped and counted')
      t.equal(rx.ws.readyState, rx.ws.OPEN, 'the platform leg stays open')
      process.kill(ownerPid, 'SIGCONT')
      for (const l of [tx, rx]) l.ws.close(1000)
    }
  )
})
