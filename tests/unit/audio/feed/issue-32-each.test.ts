import t from 'tap'
import { join } from 'node:path'
import { ResultTimeline } from '../../../../gateway/audio/feed/result-timeline'
import { readVendorMessage, type Verdict } from '../../../../gateway/audio/connection/vendor-message'
import { loadMapping } from '../../../../gateway/mapping/compile'
import { LEG_INPUT } from '../harness'

// Issue 32 items 1-3 for vendors whose messages carry several results, or whose times are ISO 8601
// durations, or that transcribe two channels at once: the shipped mappings read by the gateway.
// - Amazon Transcribe: API reference, streaming "Result" (StartTime, EndTime in seconds, IsPartial) in a
//   TranscriptEvent's Transcript.Results (several per event).
// - AudioHook: the Genesys AudioHook protocol's `event` message, transcript entity {offset, duration
//   (ISO 8601 durations), isFinal} (EventEntityDataTranscript, purecloudlabs/audiohook-reference-implementation
//   protocol/entities-transcript.ts); several entities per event.
// - Deepgram stereo: live-streaming Results with channel_index [c, 2] (multichannel=true), one per channel.

const ROOT = join(__dirname, '..', '..', '..', '..')
const load = (name: string) => loadMapping(join(ROOT, 'mappings', `${name}.yaml`)).audio!

function messages(v: Verdict): { message: string; parameters: Record<string, unknown> }[] {
  return v.kind === 'result' ? v.messages.map(m => JSON.parse(m)) : []
}

t.test('amazon-transcribe.yaml: each Result of a TranscriptEvent is placed, and dropped, on its own', async t => {
  const tr = load('amazon-transcribe')
  const leg = new ResultTimeline()
  const result = (text: string, start: number, end: number, partial: boolean) => ({
    ResultId: text,
    StartTime: start,
    EndTime: end,
    IsPartial: partial,
    Alternatives: [{ Transcript: text, Items: [] }]
  })
  const event = (...results: unknown[]) => ({
    headers: { ':message-type': 'event', ':event-type': 'TranscriptEvent', ':content-type': 'application/json' },
    body: { Transcript: { Results: results } }
  })
  const read = async (msg: unknown, startFrame: number): Promise<Verdict> =>
    (await readVendorMessage(tr, { ...LEG_INPUT, msg }, 'ready', true, { startFrame, leg })).verdict
  // A session whose audio starts at the call's frame 50 (1 s).
  const first = messages(await read(event(result('one', 0, 1.2, false), result('two', 1.2, 1.5, true)), 50))
  t.same(
    first.map(m => [m.message, m.parameters.start, m.parameters.end, m.parameters.isFinal]),
    [
      ['one', 1, 2.2, true],
      ['two', 2.2, 2.5, false]
    ],
    'two results of one event, each with its own times on the call timeline'
  )
  t.equal(leg.deliveredMs, 2200, 'the final moved the mark, the partial did not')
  // A replacement session from frame 100 (2 s) transcribes 2.0-2.2 s again, then goes on.
  const next = messages(await read(event(result('again', 0, 0.2, false), result('three', 0.2, 0.9, false)), 100))
  t.same(
    next.map(m => m.message),
    ['three'],
    'the result wholly before the delivered finals is dropped, the other of the event goes'
  )
  t.equal(leg.dropped, 1)
  t.equal((await read(event(result('x', 0, 0.1, true)), 100)).kind, 'before-delivered', 'an event of only such')
  t.equal((await read(event(), 100)).kind, 'silent', 'an event without results')
})

t.test('audiohook.yaml: transcript entities placed by their ISO 8601 offset and duration', async t => {
  const ah = load('audiohook')
  const leg = new ResultTimeline()
  const transcript = (text: string, offset: string, duration: string, isFinal = true) => ({
    type: 'transcript',
    data: {
      id: text,
      channelId: 0,
      isFinal,
      offset,
      duration,
      alternatives: [{ confidence: 0.9, interpretations: [{ type: 'display', transcript: text }] }]
    }
  })
  const assist = {
    type: 'agentassist',
    data: { id: 'a', utterances: [], suggestions: [{ type: 'faq', id: 'f', question: 'How?', answer: 'So.' }] }
  }
  const event = (...entities: unknown[]) => ({ version: '2', id: 's', type: 'event', seq: 3, parameters: { entities } })
  const read = async (msg: unknown, startFrame: number): Promise<Verdict> =>
    (await readVendorMessage(ah, { ...LEG_INPUT, msg }, 'ready', true, { startFrame, leg })).verdict
  const out = messages(await read(event(transcript('hello', 'PT1.5S', 'PT0.5S'), assist), 100))
  t.same(
    out.map(m => [m.message, m.parameters.offset, m.parameters.duration]),
    [
      ['hello', 'PT3.5S', 'PT0.5S'],
      ['How?', undefined, undefined]
    ],
    'the transcript on the call timeline (frame 100 = 2 s), as ISO 8601 durations; the suggestion as it came'
  )
  t.equal(leg.deliveredMs, 4000)
  t.equal((await read(event(transcript('hello', 'PT0S', 'PT1M')), 2900)).kind, 'result', 'minutes read too')
  t.equal(leg.deliveredMs, 118_000)
  t.equal((await read(event(transcript('hello', 'PT0S', 'PT1S')), 0)).kind, 'before-delivered')
})

t.test("audiohook-stereo.yaml: each entity to the leg of its channel, with that leg's perspective", async t => {
  const ah = load('audiohook-stereo')
  const leg = new ResultTimeline(2)
  const event = (ch: number) => ({
    version: '2',
    id: 's',
    type: 'event',
    seq: 3,
    parameters: {
      entities: [
        {
          type: 'transcript',
          data: {
            id: 'x',
            channelId: ch,
            isFinal: true,
            offset: 'PT1S',
            duration: 'PT1S',
            alternatives: [{ confidence: 0.9, interpretations: [{ type: 'display', transcript: 'hi' }] }]
          }
        }
      ]
    }
  })
  for (const ch of [0, 1]) {
    const input = { ...LEG_INPUT, leg: { ...LEG_INPUT.leg, perspective: 'TX+RX' }, msg: event(ch) }
    const v = (await readVendorMessage(ah, input, 'ready', true, { startFrame: 0, leg })).verdict
    t.match(v, { kind: 'result', channel: ch }, `channel ${ch}: to its leg, not dropped by the other's final`)
    t.match(messages(v)[0].parameters, { channelId: ch, perspective: ['TX', 'RX'][ch], offset: 'PT1S' })
  }
})

t.test('deepgram-stereo.yaml: each channel keeps its own delivered finals; a replay starts at the lower', async t => {
  const dg = load('deepgram-stereo')
  const leg = new ResultTimeline(2)
  const results = (ch: number, start: number, duration: number, final = true) => ({
    type: 'Results',
    channel_index: [ch, 2],
    start,
    duration,
    is_final: final,
    channel: { alternatives: [{ transcript: `channel ${ch}`, confidence: 0.9 }] }
  })
  const read = async (msg: unknown, startFrame: number): Promise<Verdict> =>
    (
      await readVendorMessage(
        dg,
        { ...LEG_INPUT, leg: { ...LEG_INPUT.leg, perspective: 'TX+RX' }, msg },
        'ready',
        true,
        {
          startFrame,
          leg
        }
      )
    ).verdict
  const a = await read(results(0, 0, 2), 0)
  t.match(a, { kind: 'result', channel: 0 })
  t.equal(leg.firstOpenFrame, 0, 'channel 1 has no final yet: a replay would start at the call start')
  const b = await read(results(1, 0, 2), 0)
  t.match(b, { kind: 'result', channel: 1 }, "the other channel's final over the same stretch goes")
  t.equal(leg.firstOpenFrame, 100)
  t.equal((await read(results(0, 2, 1), 0)).kind, 'result')
  t.equal(leg.firstOpenFrame, 100, 'the lower channel decides where a replay starts')
  t.equal((await read(results(1, 0, 1), 50)).kind, 'before-delivered', 'a replay of channel 1 before its mark')
  t.equal((await read(results(0, 0, 1), 50)).kind, 'before-delivered', 'and of channel 0 before its own')
})

t.test('ResultTimeline: a result naming no channel is held against the lowest mark, a final moves all', async t => {
  const leg = new ResultTimeline(2)
  t.ok(leg.admit(1000, true, 0))
  t.ok(leg.admit(500, false, null), 'before channel 0 mark but not the lowest (0)')
  t.ok(leg.admit(1500, true, null))
  t.equal(leg.deliveredMs, 1500)
  t.notOk(leg.admit(1200, true, 1), 'channel 1 was moved by the final naming none')
  const mono = new ResultTimeline()
  t.ok(mono.admit(800, true, 3), 'a one-channel session ignores channel numbers')
  t.equal(mono.deliveredMs, 800)
})
