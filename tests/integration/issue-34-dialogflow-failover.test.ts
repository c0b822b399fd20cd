import t, { type Test } from 'tap'
import { join } from 'node:path'
import { type DfStreamReport, type DialogflowEmulator, startDialogflow } from '../../gateway/tools/vendors/dialogflow'
import { framesFinals, finalsProblems, playNumbered } from '../helpers/audio'
import { type FrontEnd, frontEnd } from '../helpers/front-end'
import {
  platformLeg,
  type PlatformLegClient,
  startGateway,
  type TestGateway,
  until,
  upstreams
} from '../helpers/gateway'
import { audioInit } from '../helpers/legs'
import { samples } from '../helpers/metrics'

// Issue 34, "a killed regional replica mid-call fails over like the WebSocket vendors (nothing lost, counted
// exactly)", for Dialogflow Agent Assist: through `serve` as it ships (2 workers) and the shipped
// mappings/dialogflow-agent-assist.yaml. A Dialogflow conversation lives in one location, and two replicas of
// a route are two front ends of that location: the same conversations whichever carries a call. So here one
// emulator (gateway/tools/vendors/dialogflow.ts) holds the conversations and two front ends serve it: its own
// gRPC port, and a TCP proxy in a process of its own (tests/helpers/front-end.ts), SIGKILLed mid-call. The
// emulator transcribes the numbered frames it hears ("frames A-B"), with word offsets from its stream's start
// (enable_word_info: participant.proto InputAudioConfig, session.proto StreamingRecognitionResult
// speech_word_info and speech_end_offset), a final every second of audio; a stream names its participant in
// its first request (participant.proto StreamingAnalyzeContentRequest).

const MAPPING = join(__dirname, '..', '..', 'mappings', 'dialogflow-agent-assist.yaml')
const PARAMS = { project: 'demo-project', conversationProfile: 'profile-1' }

const finals = (leg: PlatformLegClient) => framesFinals(leg.messages, 'duration')

/** Each frame in one final only, none missing up to the last final, every final on the call's timeline. */
function checkFinals(t: Test, leg: PlatformLegClient, label: string): number {
  const fs = finals(leg)
  const p = finalsProblems(fs)
  t.same(p.twice, [], `${label}: no frame in two finals`)
  t.same(p.missing, [], `${label}: no frame missing up to the last final (${p.last})`)
  t.same(p.backwards, [], `${label}: start times never go backwards`)
  // Frame n starts at n × 20 ms of the call, and a final of frames A-B lasts (B - A + 1) × 20 ms.
  const off = fs.filter(
    f => Math.abs(f.start - f.from * 0.02) > 1e-6 || Math.abs(f.duration - (f.to - f.from + 1) * 0.02) > 1e-6
  )
  t.same(off, [], `${label}: every final on the call's timeline (frame n at n × 20 ms)`)
  if (off.length > 0 || p.twice.length > 0 || p.missing.length > 0) t.comment(JSON.stringify(fs))
  return p.last
}

/** Replica `name`'s streams as the gateway's workers count them: each worker's own, and the fleet's as each sees it. */
async function replica(gw: TestGateway, name: string): Promise<{ active: number; fleet: number[] }> {
  const r = (await upstreams(gw.adminUrl(''))).routes[0]!.replicas.find(x => x.name === name)!
  return { active: r.workers.reduce((n, w) => n + w.activeStreams, 0), fleet: r.workers.map(w => w.fleetStreams) }
}

/** The port of a call's peer (`host:port`, as grpc-js gives it). */
const peerPort = (s: DfStreamReport): number => Number(s.peer.slice(s.peer.lastIndexOf(':') + 1))

/** The call (contact 934201, TX and RX) and the anchor (contact 934200) on one emulator behind two front ends. */
interface Scene {
  df: DialogflowEmulator
  doomed: FrontEnd
  gw: TestGateway
  anchor: PlatformLegClient
  tx: PlatformLegClient
  rx: PlatformLegClient
  /** Platform legs closed so far. */
  closed: () => number
}

/**
 * The gateway (`audio` added to its audio settings) on the emulator's own port (`spare`) and a front end
 * process (`doomed`); an anchor call on the spare first, so that the call's two legs both go to the doomed one.
 */
async function scene(t: Test, audio: Record<string, unknown> = {}): Promise<Scene> {
  const df = await startDialogflow({ transcribeFrames: true, resultEveryMs: 1000 })
  t.teardown(() => df.close())
  const doomed = await frontEnd(t, df.port)
  const gw = await startGateway(t, {
    audio: { replayRate: 4, failoverTimeoutSeconds: 20, ...audio },
    routes: {
      df: {
        mapping: MAPPING,
        auth: { audio: ['${AUDIO_TOKEN}'] },
        params: PARAMS,
        // Once the spare holds one call (config order breaks the tie), the doomed front end takes every new
        // call by weight: the call's two legs go there, whichever worker each lands on.
        upstreams: [
          { name: 'spare', audio: df.url, weight: 1 },
          { name: 'doomed', audio: doomed.url, weight: 1000 }
        ]
      }
    }
  })
  const url = gw.url('/audio/df')
  const anchor = platformLeg(t, url, audioInit(934200, 'TX'))
  t.equal((await anchor.answer).command, 'CONNECTED', 'an anchor call (another contact) connected')
  t.ok(
    await until(async () => (await replica(gw, 'spare')).fleet.every(n => n === 1)),
    'the anchor is on the spare, and every worker counts it'
  )
  const tx = platformLeg(t, url, audioInit(934201, 'TX'))
  const rx = platformLeg(t, url, audioInit(934201, 'RX'))
  t.equal((await tx.answer).command, 'CONNECTED', 'the call’s TX leg connected')
  t.equal((await rx.answer).command, 'CONNECTED', 'the call’s RX leg connected')
  t.ok(
    await until(async () => (await replica(gw, 'doomed')).active === 2),
    'both legs of the call stream through the doomed front end'
  )
  let closed = 0
  for (const l of [anchor, tx, rx])
    void l.closed.then(() => {
      closed++
    })
  return { df, doomed, gw, anchor, tx, rx, closed: () => closed }
}

const TOTAL = 450
/** Between two finals (one a second of audio: frames 250-299 are not final yet), so the replay has work to do. */
const KILL_AT = 280

/** Numbered frames to every leg at real time, the doomed front end SIGKILLed after frame KILL_AT; until every leg's finals reach the end. */
async function killMidCall(t: Test, s: Scene): Promise<void> {
  const legs = [s.anchor, s.tx, s.rx]
  await playNumbered(legs, 0, TOTAL, seq => {
    if (seq === KILL_AT) s.doomed.child.kill('SIGKILL')
  })
  t.ok(
    await until(() => legs.every(l => finals(l).some(f => f.to >= TOTAL - 60)), 20_000),
    'every leg got finals past the kill'
  )
}

t.test(
  "a front end of the call's location SIGKILLed mid-call: both legs stay connected, their streams resume through the other front end in the same conversation and participants, every frame in one final, the failover counted exactly",
  async t => {
    const s = await scene(t)
    await killMidCall(t, s)
    const { df, doomed, gw, anchor, tx, rx } = s

    // The platform side: nothing of the loss shows but a gap.
    t.equal(s.closed(), 0, 'no platform leg closed')
    for (const [l, label] of [
      [anchor, 'anchor'],
      [tx, 'TX'],
      [rx, 'RX']
    ] as const) {
      t.same(
        l.messages.filter(m => m.command !== 'MESSAGE' || m.messageType === 'VENDOR_ERROR'),
        [],
        `${label}: no error reached the platform`
      )
      t.ok(checkFinals(t, l, label) >= TOTAL - 60, `${label}: finals up to the end of the call`)
    }

    // The gateway: one failover per leg on the killed front end, none for the anchor, nothing dropped.
    t.ok(
      await until(async () => (await replica(gw, 'spare')).active === 3),
      'the call’s two legs now stream through the spare, beside the anchor'
    )
    t.equal((await replica(gw, 'doomed')).active, 0, 'none through the killed front end')
    const done = gw.logs.lines.filter(l => l.event === 'failover_done')
    t.same(
      done.map(l => `${String(l.from)}→${String(l.upstream)}`),
      ['doomed→spare', 'doomed→spare'],
      'two failovers logged, each from the killed front end to the spare'
    )
    const text = await (await fetch(gw.adminUrl('/metrics'))).text()
    const failovers = samples(text, 'assist_gateway_audio_failovers_total')
    t.equal(failovers.get('{route="df",result="ok"}'), 2, 'audio_failovers_total ok: 2, the call’s two legs')
    t.equal(failovers.get('{route="df",result="failed"}') ?? 0, 0, 'none failed')
    t.equal(failovers.get('{route="df",result="backoff"}') ?? 0, 0, 'none waited for a backoff')
    t.equal(samples(text, 'assist_gateway_audio_gap_seconds_count').get('{route="df"}'), 2, 'two gaps measured')
    const dropped = samples(text, 'assist_gateway_audio_dropped_frames_total')
    for (const reason of ['failover', 'failover_unreplayed'])
      t.equal(dropped.get(`{route="df",reason="${reason}"}`) ?? 0, 0, `no frame dropped (${reason})`)

    // The emulator: the call's conversation and participants carried on; the replacements refused nothing.
    t.equal(df.conversations.length, 2, 'two conversations: the anchor’s and the call’s, none made by the failover')
    const call = df.conversations[1]!
    t.same(
      Object.values(call.participants).sort(),
      ['END_USER', 'HUMAN_AGENT'],
      'the call’s participants: one per role'
    )
    t.same(
      df.calls.map(c => `${c.method} ${c.status}`),
      [
        'Conversations/CreateConversation OK',
        'Participants/CreateParticipant OK',
        'Conversations/CreateConversation OK',
        'Participants/CreateParticipant OK',
        'Participants/CreateParticipant OK'
      ],
      'the unary calls: the two contacts’ setups, nothing more (the failover reused the call’s shared setup)'
    )
    const streams = df.streams.filter(s => s.participant?.startsWith(`${call.name}/`))
    const before = streams.filter(s => doomed.upstreamPorts.has(peerPort(s)))
    const after = streams.filter(s => !doomed.upstreamPorts.has(peerPort(s)))
    t.same(
      before.map(s => s.role).sort(),
      ['END_USER', 'HUMAN_AGENT'],
      'before the kill: a stream per leg, through the doomed front end'
    )
    t.same(
      before.map(s => s.ended),
      ['CANCELLED', 'CANCELLED'],
      'the emulator saw them end as their front end died (cancelled, not closed by the gateway)'
    )
    t.same(after.map(s => s.role).sort(), ['END_USER', 'HUMAN_AGENT'], 'after it: one replacement stream per leg')
    t.same(
      after.map(s => s.participant).sort(),
      before.map(s => s.participant).sort(),
      'each replacement names the participant its leg streamed as before'
    )
    t.same(
      df.streams.filter(s => s.refusal !== null).map(s => s.refusal),
      [],
      'the emulator refused none of the streams, replacements included'
    )
    t.ok(
      after.every(s => s.extended && s.ended === null),
      'the replacements run on (extended streaming), the call not over'
    )
    const anchorStreams = df.streams.filter(s => s.participant?.startsWith(`${df.conversations[0]!.name}/`))
    t.equal(anchorStreams.length, 1, 'the anchor’s stream was never moved')
  }
)

t.test(
  'a replay ceiling below how far the finals trail (0.2 s here, a final every second): what no final covers is lost, and exactly that is counted failover_unreplayed',
  async t => {
    const s = await scene(t, { replaySeconds: 0.2 })
    await killMidCall(t, s)
    t.equal(s.closed(), 0, 'no platform leg closed')
    const missing = new Map<string, number[]>()
    for (const [l, label] of [
      [s.tx, 'TX'],
      [s.rx, 'RX']
    ] as const) {
      const p = finalsProblems(finals(l))
      t.same(p.twice, [], `${label}: no frame in two finals`)
      t.ok(p.missing.length > 0, `${label}: frames lost (${p.missing[0]}-${p.missing.at(-1)}): the ceiling let them go`)
      missing.set(label, p.missing)
    }
    t.same(finalsProblems(finals(s.anchor)).missing, [], 'the anchor lost nothing')
    const starts = s.gw.logs.lines.filter(l => l.event === 'failover_start')
    t.same(
      starts.map(l => `${String(l.perspective)} ${String(l.unreplayed)}`).sort(),
      [...missing].map(([label, m]) => `${label} ${m.length}`).sort(),
      'each leg’s failover_start counts exactly the frames it lost'
    )
    const text = await (await fetch(s.gw.adminUrl('/metrics'))).text()
    t.equal(
      samples(text, 'assist_gateway_audio_dropped_frames_total').get('{route="df",reason="failover_unreplayed"}'),
      [...missing.values()].reduce((n, m) => n + m.length, 0),
      'audio_dropped_frames_total failover_unreplayed: the frames lost, no more, no fewer'
    )
  }
)
