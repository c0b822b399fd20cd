import t from 'tap'
import fc from 'fast-check'
import { livenessOf } from '../../../../gateway/audio/connection/liveness'
import { type AudioSink, VendorFeed } from '../../../../gateway/audio/feed/feed'
import { defaultReplaySeconds, FINALS_TRAIL_SECONDS } from '../../../../gateway/audio/feed/replay-ceiling'
import type { ReplayRing } from '../../../../gateway/audio/feed/replay-ring'
import { FRAME_MS, ResultTimeline } from '../../../../gateway/audio/feed/result-timeline'
import { audioSlabs } from '../../../../gateway/audio/feed/slab-pool'
import { LegCounters } from '../../../../gateway/telemetry/metrics'
import { FakeClock } from '../../../helpers/fake-clock'
import { SETTINGS } from '../harness'

// Issue 32 item 4 on the fake clock: the ring holds only what delivered finals do not cover, never more
// than its ceiling (`audio.replaySeconds`), in slabs of the process's pool that it takes and gives back.

const FRAME = 160
const SLAB = audioSlabs.slabBytes

/** A platform frame carrying its number on the call (bytes 0-3), the rest filled. */
function numbered(n: number): ArrayBuffer {
  const b = new Uint8Array(FRAME).fill(n & 0xff)
  new DataView(b.buffer).setUint32(0, n, true)
  return b.buffer
}

/** Platform frames in the largest write any recorder was given (the ceiling pushes out whole writes). */
let largestWrite = 1

/** A vendor connection that records the call frames it is given (a write may hold several). */
function recorder(): AudioSink & { frames: number[] } {
  const frames: number[] = []
  return {
    frames,
    bufferedAmount: 0,
    writeAudio: data => {
      const u = data instanceof Uint8Array ? data : new Uint8Array(data)
      const dv = new DataView(u.buffer, u.byteOffset, u.byteLength)
      for (let o = 0; o + FRAME <= u.length; o += FRAME) frames.push(dv.getUint32(o, true))
      largestWrite = Math.max(largestWrite, Math.floor(u.length / FRAME))
    }
  }
}

interface Leg {
  feed: VendorFeed
  finals: ResultTimeline
  sink: AudioSink & { frames: number[] }
  /** Frames that came in (the call's timeline). */
  entered: number
  /**
   * The newest frame the ceiling may have pushed out of the ring: the ring's end less the ceiling, at its
   * highest, and (coalesced) the rest of the write that frame is in (whole writes go).
   */
  ceilingCut: number
}

function ringOf(feed: VendorFeed): ReplayRing {
  return (feed as unknown as { ring: ReplayRing }).ring
}

function newLeg(clock: FakeClock, replaySeconds: number, chunkMs: number): Leg {
  const finals = new ResultTimeline()
  const settings = {
    ...SETTINGS,
    replaySeconds,
    bufferBytes: 1 << 20,
    holdBufferBytes: 1 << 20,
    vendorHighWaterBytes: 1 << 30
  }
  const feed = new VendorFeed(
    new LegCounters('r'),
    settings,
    clock,
    () => {},
    () => false,
    0,
    chunkMs,
    1,
    finals
  )
  const sink = recorder()
  feed.flowTo(sink)
  return { feed, finals, sink, entered: 0, ceilingCut: 0 }
}

type Step =
  | { kind: 'write'; leg: number; frames: number }
  | { kind: 'final'; leg: number; frames: number; midFrame: boolean }
  | { kind: 'tick'; ms: number }
  | { kind: 'replay'; leg: number }

const step = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('write' as const),
      leg: fc.nat(1),
      frames: fc.integer({ min: 1, max: 12 })
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('final' as const),
      leg: fc.nat(1),
      frames: fc.integer({ min: 0, max: 60 }),
      midFrame: fc.boolean()
    })
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 1, max: 150 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('replay' as const), leg: fc.nat(1) }) }
)

/** What must hold after every step: the ceiling, finals-only release, storage that follows content, one owner per slab. */
function check(legs: Leg[], capFrames: number, ceiling: number, base: number): string | null {
  const held: number[] = []
  for (const [i, leg] of legs.entries()) {
    const ring = ringOf(leg.feed)
    if (ring.bytes > ceiling) return `leg ${i}: the ring holds ${ring.bytes} bytes over its ceiling ${ceiling}`
    if (ring.storageBytes > Math.ceil(ring.bytes / SLAB) * SLAB + SLAB)
      return `leg ${i}: ${ring.storageBytes} bytes of slabs for ${ring.bytes} bytes of audio`
    // Everything written from the first frame no final covers is in the ring, unless the ceiling pushed it out.
    const first = leg.feed.nextFrame - ring.frames
    const open = leg.finals.firstOpenFrame
    if (first > Math.max(open, leg.ceilingCut))
      return `leg ${i}: frame ${Math.max(open, leg.ceilingCut)} released before a final covered it (ring from ${first})`
    if (capFrames > 0 && ring.frames > capFrames) return `leg ${i}: ${ring.frames} frames over ${capFrames}`
    held.push(...ring.slabsInUse())
  }
  if (new Set(held).size !== held.length) return 'a slab is held by two rings'
  if (audioSlabs.taken - base !== held.length) return `${audioSlabs.taken - base} slabs taken, ${held.length} held`
  return null
}

function run(steps: Step[], replaySeconds: number, chunkMs: number): string | null {
  const clock = new FakeClock()
  const base = audioSlabs.taken
  largestWrite = 1
  const ceiling = Math.round(replaySeconds * 8000)
  const capFrames = Math.floor(ceiling / FRAME)
  const legs = [newLeg(clock, replaySeconds, chunkMs), newLeg(clock, replaySeconds, chunkMs)]
  try {
    for (const s of steps) {
      if (s.kind === 'tick') clock.advance(s.ms)
      else if (s.kind === 'write') {
        const leg = legs[s.leg]
        for (let k = 0; k < s.frames; k++) leg.feed.write(numbered(leg.entered++))
      } else if (s.kind === 'final') {
        // A final covers audio the vendor has heard, from where the last one ended.
        const leg = legs[s.leg]
        const heard = leg.feed.nextFrame
        const end = Math.min(heard, leg.finals.firstOpenFrame + s.frames)
        const endMs = end * FRAME_MS + (s.midFrame && end < heard ? FRAME_MS / 2 : 0)
        if (endMs > leg.finals.deliveredMs) leg.finals.admit(endMs, true)
      } else {
        const bad = replay(legs[s.leg], capFrames, chunkMs)
        if (bad !== null) return bad
      }
      // Whole writes go: the ceiling may push out the rest of the write the cut falls in (a replay's
      // writes join whole writes up to the chunk size, so they can be larger than a chunk).
      const slack = largestWrite - 1
      for (const leg of legs) leg.ceilingCut = Math.max(leg.ceilingCut, leg.feed.nextFrame - capFrames + slack)
      const bad = check(legs, capFrames, ceiling, base)
      if (bad !== null) return bad
    }
    for (const leg of legs) leg.feed.close()
    if (audioSlabs.taken !== base) return `closed: ${audioSlabs.taken - base} slabs not given back`
    return null
  } finally {
    for (const leg of legs) leg.feed.close()
  }
}

/**
 * The vendor connection is lost: the replay to the new one starts where the delivered finals end (inside
 * a coalesced write too), unless the ceiling pushed it out, and runs, in order, to the newest frame in.
 */
function replay(leg: Leg, capFrames: number, chunkMs: number): string | null {
  const open = leg.finals.firstOpenFrame
  leg.feed.recover(null, open)
  const next = recorder()
  leg.feed.flowTo(next)
  leg.sink = next
  const got = next.frames
  const end = leg.feed.nextFrame
  if (got.length === 0) return end > open && capFrames > 0 ? `nothing replayed from ${open} to ${end}` : null
  for (let k = 1; k < got.length; k++) if (got[k] !== got[k - 1] + 1) return `replay out of order: ${got.join(',')}`
  if (got[got.length - 1] !== end - 1 && chunkMs === 0) return `replay ends at ${got[got.length - 1]}, not ${end - 1}`
  const from = got[0]
  if (from > Math.max(open, leg.ceilingCut)) return `replay from ${from}: frames from ${open} lost`
  if (from < open) return `replay from ${from}: frames before the final's end ${open} again`
  return null
}

const PROPERTIES: [string, number[], number, string][] = [
  [
    'one write per frame',
    [0.1, 0.3, 1],
    0,
    'ceiling kept, only finalized audio released, exact replays, no slab leaked or shared'
  ],
  [
    'writes coalesced to 100 ms',
    [0.3, 1, 3.5],
    100,
    'the same with coalesced writes: released and replayed as whole writes'
  ]
]

for (const [writes, replays, coalesceMs, holds] of PROPERTIES)
  t.test(`the ring over arbitrary writes, finals and replays, ${writes}`, async t => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 150 }), fc.constantFrom(...replays), (steps, replaySeconds) => {
        const bad = run(steps, replaySeconds, coalesceMs)
        if (bad !== null) throw new Error(bad)
      }),
      { numRuns: 300 }
    )
    t.pass(holds)
  })

t.test('a leg whose vendor finalizes every second holds about a second of audio, not its ceiling', async t => {
  const clock = new FakeClock()
  const base = audioSlabs.taken
  const leg = newLeg(clock, 10, 100)
  let most = 0
  for (let ms = 0; ms < 30_000; ms += FRAME_MS) {
    leg.feed.write(numbered(leg.entered++))
    clock.advance(FRAME_MS)
    // The vendor finalizes each second of audio it has heard, 300 ms after hearing its end.
    const heardMs = leg.feed.nextFrame * FRAME_MS
    const finalMs = Math.floor((heardMs - 300) / 1000) * 1000
    if (finalMs > leg.finals.deliveredMs) leg.finals.admit(finalMs, true)
    most = Math.max(most, ringOf(leg.feed).storageBytes)
  }
  t.ok(most <= 1.5 * 8000 + 2 * SLAB, `at most ${most} bytes of slabs (1.3 s of audio and two slabs), ceiling 80,000`)
  leg.feed.close()
  t.equal(audioSlabs.taken, base, 'closed: its slabs are back in the pool')
})

t.test(
  'the default ceiling: detection and a margin, plus the longest bounded trail of finals with result times',
  async t => {
    const settings = { ...SETTINGS, replaySeconds: undefined, vendorPingSeconds: 1, vendorPongTimeoutSeconds: 2 }
    const timed = { liveness: null, time: { start: () => 0 } } as unknown as Parameters<typeof livenessOf>[1]
    const untimed = { liveness: null, time: null } as unknown as Parameters<typeof livenessOf>[1]
    t.equal(
      livenessOf(settings, untimed).replaySeconds,
      3.5,
      'no result times: the ring never releases, 3.5 s as before'
    )
    t.equal(livenessOf(settings, timed).replaySeconds, 3.5 + FINALS_TRAIL_SECONDS, 'result times: 7.5 s, a ceiling')
    t.equal(livenessOf({ ...settings, replaySeconds: 2 }, timed).replaySeconds, 2, 'the config has the last word')
    t.equal(defaultReplaySeconds(0, false), 2, 'no pings: 2 s')
  }
)
