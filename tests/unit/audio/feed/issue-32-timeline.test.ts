import t from 'tap'
import { join } from 'node:path'
import { VendorFeed } from '../../../../gateway/audio/feed/feed'
import { ResultTimeline } from '../../../../gateway/audio/feed/result-timeline'
import { readVendorMessage, type Verdict } from '../../../../gateway/audio/connection/vendor-message'
import { loadMapping } from '../../../../gateway/mapping/compile'
import { LegCounters } from '../../../../gateway/telemetry/metrics'
import { FakeClock } from '../../../helpers/fake-clock'
import { LEG_INPUT, SETTINGS } from '../harness'

// Issue 32 items 1-3 on the fake clock: results placed on the call's timeline by the mapping's `time`
// (the shipped mappings/deepgram.yaml: Deepgram's Results `start`, `duration` in seconds and `is_final`,
// as in Deepgram's live-streaming reference and @deepgram/sdk's LiveTranscriptionEvent), each final
// once, and a replay that starts where the delivered finals end.

const ROOT = join(__dirname, '..', '..', '..', '..')
const deepgram = loadMapping(join(ROOT, 'mappings', 'deepgram.yaml')).audio!

const results = (start: number, duration: number, final: boolean, text = 'hello'): unknown => ({
  type: 'Results',
  start,
  duration,
  is_final: final,
  speech_final: final,
  channel: { alternatives: [{ transcript: text, confidence: 0.9 }] }
})

async function read(msg: unknown, startFrame: number, leg: ResultTimeline): Promise<Verdict> {
  return (await readVendorMessage(deepgram, { ...LEG_INPUT, msg }, 'ready', true, { startFrame, leg })).verdict
}

t.test('deepgram.yaml declares where a result is; the platform gets its times on the call timeline', async t => {
  t.ok(deepgram.time != null, 'the shipped Deepgram mapping says where its results are')
  const leg = new ResultTimeline()
  // A vendor session whose audio starts at the call's frame 100 (2 s): its 1.0 s is the call's 3.0 s.
  const v = await read(results(1.0, 0.5, true), 100, leg)
  t.equal(v.kind, 'result')
  const [m] = messages(v)
  t.same([m.parameters.start, m.parameters.duration, m.parameters.isFinal], [3, 0.5, true])
  t.equal(leg.deliveredMs, 3500, 'the delivered finals reach 3.5 s of the call')
  t.equal(leg.firstOpenFrame, 175, 'a replay would start at frame 175')
})

t.test('each final once: results wholly before the delivered finals are dropped, final or partial', async t => {
  const leg = new ResultTimeline()
  t.equal((await read(results(0, 1, true), 0, leg)).kind, 'result', 'the first final: 0-1 s')
  // A new session starting at frame 25 (0.5 s) transcribes 0.5-1.0 s again: wholly before 1 s.
  t.equal((await read(results(0, 0.5, true), 25, leg)).kind, 'before-delivered', 'a final transcribed again')
  t.equal((await read(results(0, 0.3, false), 25, leg)).kind, 'before-delivered', 'a partial of it too')
  t.equal((await read(results(0.5, 0.5, false), 25, leg)).kind, 'result', 'a partial past it goes')
  t.equal((await read(results(0.5, 1, true), 25, leg)).kind, 'result', 'and the next final')
  t.equal(leg.deliveredMs, 2000)
  t.equal(leg.dropped, 2)
  const untimed = await read({ type: 'UtteranceEnd', last_word_end: 0.2 }, 25, leg)
  t.equal(untimed.kind, 'result', 'a message that carries no time is delivered as it is')
})

t.test('a mapping that cannot say where results are declares it: no placing, no dropping', async t => {
  const none = { ...deepgram, time: null }
  const leg = new ResultTimeline()
  leg.deliveredMs = 5000
  const v = await readVendorMessage(none, { ...LEG_INPUT, msg: results(0, 1, true) }, 'ready', true, {
    startFrame: 0,
    leg
  })
  t.equal(v.verdict.kind, 'result')
  t.equal(messages(v.verdict)[0].parameters.start, 0, 'as the vendor gave it')
})

/** The platform messages of a result verdict, parsed. */
function messages(v: Verdict): { parameters: Record<string, unknown> }[] {
  return v.kind === 'result' ? v.messages.map(m => JSON.parse(m)) : []
}

/** A 160-byte frame whose every byte is `i`. */
const frame = (i: number): ArrayBuffer => new Uint8Array(160).fill(i).buffer

/** A feed with a 1 s replay ceiling whose frames are placed on `finals`' timeline (the delivered finals). */
const timedFeed = (counters: LegCounters, clock: FakeClock, finals: ResultTimeline): VendorFeed =>
  new VendorFeed(counters, { ...SETTINGS, replaySeconds: 1 }, clock, () => {}, undefined, 0, 0, 1, finals)

t.test('the replay starts at the first frame the platform has no final for, not at the start of the ring', async t => {
  const clock = new FakeClock()
  const feed = new VendorFeed(new LegCounters('r'), { ...SETTINGS, replaySeconds: 1 }, clock, () => {})
  const first: number[] = []
  feed.flowTo({ bufferedAmount: 0, writeAudio: d => first.push(new Uint8Array(d as ArrayBuffer)[0]) })
  for (let i = 0; i < 100; i++) feed.write(frame(i))
  t.equal(feed.nextFrame, 100)
  // The ring holds the last 1 s (frames 50-99); finals were delivered up to frame 80.
  const { replayed } = feed.recover(null, 80)
  t.equal(replayed, 20, 'frames 80-99 only')
  t.equal(feed.nextFrame, 80, 'the replacement session starts at the call frame 80')
  const next: number[] = []
  feed.flowTo({ bufferedAmount: 0, writeAudio: d => next.push((d as Uint8Array)[0]) })
  t.same(
    next,
    Array.from({ length: 20 }, (_, i) => 80 + i)
  )
  // Finals reaching before the ring: the whole ring is replayed (what it cannot cover is counted as today).
  const again = feed.recover(null, 10)
  t.equal(again.replayed, 20, 'the ring as it is')
})

t.test('speechmatics.yaml: AddTranscript and AddPartialTranscript placed by metadata start_time/end_time', async t => {
  // Speechmatics' Realtime API reference: RecognitionMetadata {start_time, end_time, transcript} in seconds.
  const sm = loadMapping(join(ROOT, 'mappings', 'speechmatics.yaml')).audio!
  const leg = new ResultTimeline()
  const msg = (message: string, start: number, end: number): unknown => ({
    message,
    format: '2.9',
    metadata: { start_time: start, end_time: end, transcript: 'hello there' },
    results: []
  })
  const at = async (m: unknown, startFrame: number): Promise<Verdict> =>
    (await readVendorMessage(sm, { ...LEG_INPUT, msg: m }, 'ready', true, { startFrame, leg })).verdict
  const [final] = messages(await at(msg('AddTranscript', 0.5, 1.5), 50))
  t.same([final.parameters.start, final.parameters.end, final.parameters.isFinal], [1.5, 2.5, true])
  t.equal((await at(msg('AddPartialTranscript', 0, 1.4), 50)).kind, 'before-delivered', 'a partial before it')
  t.equal((await at(msg('AddTranscript', 0, 0.4), 100)).kind, 'before-delivered', 'a final transcribed again')
  t.equal((await at(msg('AddPartialTranscript', 0.5, 1.0), 100)).kind, 'result', 'past it')
})

t.test('assemblyai.yaml: a Turn placed by its words (ms); the formatted end of turn is the final', async t => {
  // AssemblyAI Universal Streaming v3: Turn {transcript, end_of_turn, turn_is_formatted, words[{start, end}]} in ms.
  const aai = loadMapping(join(ROOT, 'mappings', 'assemblyai.yaml')).audio!
  const leg = new ResultTimeline()
  const turn = (start: number, end: number, endOfTurn: boolean, formatted: boolean): unknown => ({
    type: 'Turn',
    turn_order: 0,
    transcript: 'hello there',
    end_of_turn: endOfTurn,
    turn_is_formatted: formatted,
    words: [
      { text: 'hello', start, end: (start + end) / 2 },
      { text: 'there', start: (start + end) / 2, end }
    ]
  })
  const at = async (m: unknown, startFrame: number): Promise<Verdict> =>
    (await readVendorMessage(aai, { ...LEG_INPUT, msg: m }, 'ready', true, { startFrame, leg })).verdict
  t.equal((await at(turn(100, 900, true, false), 10)).kind, 'silent', 'the unformatted end of turn: not relayed')
  t.equal(leg.deliveredMs, 0, 'and not the final')
  const [final] = messages(await at(turn(100, 900, true, true), 10))
  t.same([final.parameters.start, final.parameters.end, final.parameters.isFinal], [300, 1100, true], 'call ms')
  t.equal(leg.deliveredMs, 1100)
  t.equal((await at(turn(0, 500, true, true), 30)).kind, 'before-delivered', 'the same turn from a replay')
})

t.test('item 4: the ring holds only audio not yet final; replaySeconds is its ceiling', async t => {
  const clock = new FakeClock()
  const finals = new ResultTimeline()
  const feed = timedFeed(new LegCounters('r'), clock, finals)
  feed.flowTo({ bufferedAmount: 0, writeAudio: () => {} })
  for (let i = 0; i < 100; i++) feed.write(frame(i))
  finals.admit(1600, true) // a final delivered up to frame 80
  feed.write(frame(100))
  // Lost with 30 frames written since its last sign of life (frames 71-100): the finals cover 71-79.
  // (The replay is not trimmed at recovery here, fromFrame 0: what it holds is what the ring kept.)
  const { replayed, unreplayed } = feed.recover({ bytesSinceLife: 30 * 160, unreadBytes: 0 }, 0)
  t.equal(replayed, 21, 'the ring had released frames 50-79: it held 80-100 only')
  t.equal(unreplayed, 0, 'what the finals cover is not counted as unreplayed')
  const none = new VendorFeed(new LegCounters('r'), { ...SETTINGS, replaySeconds: 1 }, clock, () => {})
  none.flowTo({ bufferedAmount: 0, writeAudio: () => {} })
  for (let i = 0; i < 101; i++) none.write(frame(i))
  t.equal(none.recover(null).replayed, 50, 'without result times: the whole 1 s ceiling, as before')
})

t.test(
  'item 4: with result times, audio no final covers that the ceiling let go is counted failover_unreplayed, even when the lost session had read it',
  async t => {
    const clock = new FakeClock()
    const finals = new ResultTimeline()
    const counters = new LegCounters('r')
    const feed = timedFeed(counters, clock, finals)
    feed.flowTo({ bufferedAmount: 0, writeAudio: () => {} })
    for (let i = 0; i < 100; i++) feed.write(frame(i))
    finals.admit(400, true) // a final delivered up to frame 20; frames 20-99 not final yet
    feed.write(frame(100))
    // Lost just after a sign of life (a result): it had read everything, and none of 20-100 will be final now.
    const { replayed, unreplayed } = feed.recover({ bytesSinceLife: 0, unreadBytes: 0 }, finals.firstOpenFrame)
    t.equal(replayed, 50, 'the replay: the 1 s ceiling, frames 51-100')
    t.equal(unreplayed, 31, 'frames 20-50: after the last final, before the replay')
    t.equal(counters.dropFailoverUnreplayed, 31, 'counted')
  }
)
