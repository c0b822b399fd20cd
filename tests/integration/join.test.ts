import t, { type Test } from 'tap'
import {
  connectAndSend,
  sha,
  sideBytes as bytesOf,
  sideFrame,
  stereoRoute,
  TICK,
  audiohookStereoRoute
} from '../helpers/stereo'
import { startRealVendor, type RealVendorEmulator, type RealVendorSession } from '../../gateway/tools/real-vendors'
import { simulateAudio } from '../../gateway/tools/simulate'
import {
  AUDIO_TOKEN,
  platformLeg,
  startGateway,
  until,
  type PlatformLegClient,
  type TestGateway
} from '../helpers/gateway'
import { audioInit } from '../helpers/legs'

// Stereo join over real sockets: platform legs (TX and RX of one contact) → a real gateway → the strict
// Deepgram and AudioHook emulators, which deinterleave each session and report every channel.
// Alignment is proven through counts of filler (silence) samples, never through wall-clock time.

type Json = Record<string, any>
const DG_KEY = 'dg-key-0123456789abcdef'
const AH_KEY = 'ah-api-key-0123456789'
const ORG = '2b1f3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d'
const FRAMES = 15 // 0.3 s per side
/** How far apart (20 ms ticks) the two sides may start: the arrival skew a busy machine puts between two sockets. */
const ALIGN_SLACK_TICKS = 10
const frame = sideFrame
const sideBytes = (contact: number, side: number, from = 0, to = FRAMES): Buffer => bytesOf(contact, side, from, to)

async function world(t: Test): Promise<{ gw: TestGateway; dg: RealVendorEmulator; ah: RealVendorEmulator }> {
  const dg = await startRealVendor({ kind: 'deepgram', apiKey: DG_KEY, resultEveryMs: 200 })
  const ah = await startRealVendor({ kind: 'audiohook', apiKey: AH_KEY, resultEveryMs: 200 })
  t.teardown(async () => {
    await dg.close()
    await ah.close()
  })
  const gw = await startGateway(
    t,
    {
      audio: { reattachGraceSeconds: 5 },
      routes: {
        dg: stereoRoute(dg.url, 2, { auth: { audio: ['${AUDIO_TOKEN}'] } }),
        ah: audiohookStereoRoute(ah.url, 'AH_KEY', ORG)
      }
    },
    { DG_KEY, AH_KEY }
  )
  return { gw, dg, ah }
}

function legs(t: Test, gw: TestGateway, route: string, contactId: number): [PlatformLegClient, PlatformLegClient] {
  const open = (perspective: string) => platformLeg(t, gw.url(`/audio/${route}`), audioInit(contactId, perspective))
  return [open('TX'), open('RX')]
}

/** Both channels carry exactly their side's bytes with silence only before and after (not in between). */
function checkChannels(t: Test, s: RealVendorSession, contact: number, label: string): void {
  const [c0, c1] = s.channels ?? []
  t.equal(c0?.sha256, sha(sideBytes(contact, 0)), `${label}: channel 0 is exactly the TX bytes`)
  t.equal(c1?.sha256, sha(sideBytes(contact, 1)), `${label}: channel 1 is exactly the RX bytes`)
  t.equal(c0.silence, c0.leadingSilence + c0.trailingSilence, `${label}: no filler inside the TX audio`)
  t.equal(c1.silence, c1.leadingSilence + c1.trailingSilence, `${label}: no filler inside the RX audio`)
  // The sides are aligned by arrival (docs/concepts/stereo-join.md): both are sent in one loop, but on a busy
  // machine a pause between the two sockets' writes puts a tick or two between them (seen: 2 ticks under six
  // busy loops). A misalignment bug (the partner's 2 s wait, a replayed start) is a hundred ticks or more.
  t.ok(
    Math.abs(c0.leadingSilence - c1.leadingSilence) <= ALIGN_SLACK_TICKS * TICK,
    `${label}: aligned within the sockets' arrival skew (leading filler ${c0.leadingSilence} vs ${c1.leadingSilence})`
  )
}

const transcripts = (leg: PlatformLegClient): Json[] =>
  leg.messages.filter(m => m.command === 'MESSAGE' && m.messageType === 'TRANSCRIPT') as Json[]

t.test('stereo join over real sockets', async t => {
  const { gw, dg, ah } = await world(t)

  await t.test('50 contacts × TX+RX: one Deepgram session each, channel 0 = TX, channel 1 = RX', async t => {
    const N = 50
    const pairs = Array.from({ length: N }, (_v, i) => legs(t, gw, 'dg', 9000 + i))
    await connectAndSend(t, pairs, FRAMES, 'each of the 100 legs got its own CONNECTED')
    const want = FRAMES * TICK
    const done = (s: RealVendorSession): boolean =>
      (s.channels ?? []).every(c => c.samples - c.leadingSilence - c.trailingSilence >= want)
    t.ok(await until(() => dg.sessions().length === N && dg.sessions().every(done), 30_000, 100), 'all audio arrived')
    const sessions = dg.sessions()
    t.equal(sessions.length, N, 'one vendor session per contact, not per leg')
    const byTx = new Map(Array.from({ length: N }, (_v, i) => [sha(sideBytes(i, 0)), i]))
    let matched = 0
    for (const s of sessions) {
      t.same(s.errors, [], 'the strict emulator saw no protocol error')
      t.match(s.query, { multichannel: 'true', channels: '2', encoding: 'mulaw' })
      const contact = byTx.get(s.channels?.[0]?.sha256 ?? '')
      if (contact === undefined) continue
      matched++
      checkChannels(t, s, contact, `contact ${contact}`)
    }
    t.equal(matched, N, 'every contact found by its TX channel')
    // Per-channel results: the emulator sends one Results per channel; each reaches the leg of its channel.
    const without = (): string[] =>
      pairs.flatMap(([tx, rx], i) => [
        ...(transcripts(tx).length > 0 ? [] : [`${i} TX`]),
        ...(transcripts(rx).length > 0 ? [] : [`${i} RX`])
      ])
    t.ok(await until(() => without().length === 0), `results reached both legs (none yet: ${without().join(', ')})`)
    for (const [tx, rx] of pairs) {
      t.ok(
        transcripts(tx).every(m => m.parameters.perspective === 'TX' && / channel 0$/.test(m.message)),
        'TX got channel 0 only'
      )
      t.ok(
        transcripts(rx).every(m => m.parameters.perspective === 'RX' && / channel 1$/.test(m.message)),
        'RX got channel 1 only'
      )
    }
    for (const l of pairs.flat()) l.ws.close(1000)
    // Closed before the next subtest opens its call: each subtest's call is the only one arriving then.
    await Promise.all(pairs.flat().map(async l => await l.closed))
  })

  await t.test('one side on hold (its socket closed) and back: the other keeps flowing, one session', async t => {
    const before = dg.sessions().length
    const contact = 77
    const [tx, rx] = legs(t, gw, 'dg', 7700)
    t.same(
      (await Promise.all([tx.answer, rx.answer])).map(a => a.command),
      ['CONNECTED', 'CONNECTED'],
      'both legs CONNECTED'
    )
    for (let k = 0; k < 5; k++) {
      tx.send(frame(contact, 0, k))
      rx.send(frame(contact, 1, k))
    }
    // This call's session: the one opened since, still open, carrying TX audio. (Not dg.sessions()[before]:
    // the 100 legs the last subtest closed without waiting may still move sessions about as they go.)
    const mine = (): RealVendorSession | undefined =>
      dg
        .sessions()
        .slice(before)
        .find(s => s.closed === false && (s.channels?.[0]?.samples ?? 0) > 0)
    const content = (ch: number): number => {
      const c = mine()?.channels?.[ch]
      return c === undefined ? 0 : c.samples - c.silence // voiced samples (the payload never holds silence)
    }
    if (!(await until(() => content(1) === 5 * TICK)))
      t.fail('RX audio arrived', {
        sessions: dg
          .sessions()
          .slice(before)
          .map(s => ({ closed: s.closed, channels: s.channels })),
        logs: gw.logs.lines.filter(l => l.contactId === 7700)
      })
    rx.ws.close(1000) // hold: the platform closes the RX connection
    await rx.closed
    for (let k = 5; k < 15; k++) tx.send(frame(contact, 0, k))
    t.ok(await until(() => content(0) === 15 * TICK), 'TX kept flowing while RX was on hold')
    t.equal(mine()?.closed, false, 'the vendor session stayed open')
    const back = platformLeg(t, gw.url('/audio/dg'), audioInit(7700, 'RX'))
    t.equal((await back.answer).command, 'CONNECTED', 'the RX leg came back: CONNECTED')
    for (let k = 5; k < 10; k++) back.send(frame(contact, 1, k))
    t.ok(await until(() => content(1) > 5 * TICK), 'RX audio flows again')
    t.equal(
      dg
        .sessions()
        .slice(before)
        .filter(s => (s.channels?.[0]?.samples ?? 0) > 0).length,
      1,
      `still the one vendor session carries the call (${dg.sessions().length - before} opened since)`
    )
    t.ok(await until(() => content(1) === 10 * TICK), 'all RX audio arrived')
    const c1 = mine()!.channels![1]
    t.ok(c1.silence - c1.leadingSilence - c1.trailingSilence > 0, 'the hold is silence on channel 1 (counted filler)')
    t.equal(
      mine()!.channels![0].voicedSha256,
      sha(sideBytes(contact, 0, 0, 15)),
      'channel 0: every TX byte in order (silence only where TX sent nothing)'
    )
    t.equal(
      mine()!.channels![1].voicedSha256,
      sha(sideBytes(contact, 1, 0, 10)),
      'channel 1: every RX byte, before and after the hold'
    )
    t.same(mine()!.errors, [])
    tx.ws.close(1000)
    back.ws.close(1000)
  })

  await t.test('AudioHook stereo: external + internal media, exact channels, transcripts by channelId', async t => {
    const pairs = [legs(t, gw, 'ah', 5100), legs(t, gw, 'ah', 5101)]
    await Promise.all(pairs.flat().map(l => l.answer))
    pairs.forEach(([tx, rx], i) => {
      for (let k = 0; k < FRAMES; k++) {
        tx.send(frame(100 + i, 0, k))
        rx.send(frame(100 + i, 1, k))
      }
    })
    const want = FRAMES * TICK
    t.ok(
      await until(
        () =>
          ah.sessions().length === 2 &&
          ah
            .sessions()
            .every(s => (s.channels ?? []).every(c => c.samples - c.leadingSilence - c.trailingSilence >= want)),
        10_000,
        100
      )
    )
    for (const s of ah.sessions()) {
      t.same(s.errors, [], 'the strict AudioHook emulator saw no protocol error')
      const open = (s.texts as Json[]).find(m => m.type === 'open')
      t.same(open?.parameters.media[0].channels, ['external', 'internal'])
      const contact = s.channels![0].sha256 === sha(sideBytes(100, 0)) ? 100 : 101
      checkChannels(t, s, contact, `audiohook contact ${contact}`)
    }
    t.ok(await until(() => pairs.every(([tx, rx]) => transcripts(tx).length > 0 && transcripts(rx).length > 0)))
    for (const [tx, rx] of pairs) {
      t.ok(transcripts(tx).every(m => m.parameters.channelId === 0 && m.parameters.perspective === 'TX'))
      t.ok(transcripts(rx).every(m => m.parameters.channelId === 1 && m.parameters.perspective === 'RX'))
    }
    for (const l of pairs.flat()) l.ws.close(1000)
  })

  await t.test(
    'simulate audio --stereo: the TX and RX legs of each contact together, one session per contact',
    async t => {
      const before = dg.sessions().length
      const clip = Buffer.concat(Array.from({ length: 20 }, (_v, k) => frame(3, 0, k)))
      const legsRun = await simulateAudio({
        url: gw.url('/audio/dg'),
        token: AUDIO_TOKEN,
        clip,
        legs: 2,
        stereo: true,
        contactIdBase: 6600
      })
      t.equal(legsRun.length, 4, '2 contacts × TX+RX')
      t.ok(
        legsRun.every(l => (l.answer as Json)?.command === 'CONNECTED' && !l.cut),
        'every leg connected and ran to its end'
      )
      t.equal(dg.sessions().length, before + 2, 'one vendor session per contact')
    }
  )
})
