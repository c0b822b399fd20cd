import t from 'tap'
import { VendorFeed, type Overflow } from '../../../../gateway/audio/feed/feed'
import { LegCounters } from '../../../../gateway/telemetry/metrics'
import { FakeClock } from '../../../helpers/fake-clock'
import { frame, recordingSink, SETTINGS } from '../harness'

// The per-frame path alone: modes, bounds and counters, on a sink that records what it is given.

function newFeed(settings = {}) {
  const clock = new FakeClock()
  const counters = new LegCounters('r')
  const overflows: Overflow[] = []
  const r = new VendorFeed(counters, { ...SETTINGS, ...settings }, clock, code => overflows.push(code))
  return { r, clock, counters, overflows }
}

const sink = recordingSink
/** The first byte of each write a sink got (frames are told apart by their first byte). */
const got = (s: { writes: Buffer[] }): number[] => s.writes.map(w => w[0])

t.test('recover: the replay ring goes in front of the queue, trimmed to bufferBytes oldest first, counted', async t => {
  const { r, counters } = newFeed({ replaySeconds: 1 })
  const s = sink()
  r.flowTo(s)
  for (let i = 0; i < 15; i++) r.write(frame(i))
  t.equal(r.recover().replayed, 15, 'all 15 written frames fit in one second of replay')
  for (let i = 15; i < 25; i++) r.write(frame(i))
  t.equal(counters.dropFailover, 5, '25 frames for a 20-frame bound: the 5 oldest go')
  const next = sink()
  r.flowTo(next)
  t.same(
    got(next),
    Array.from({ length: 20 }, (_, i) => i + 5)
  )
})

t.test('gated: audio queues behind a control frame, then flows in order; retarget keeps the mode', async t => {
  const { r } = newFeed()
  const a = sink()
  r.flowTo(a)
  r.gate()
  r.write(frame(1))
  const b = sink()
  r.retarget(b)
  r.write(frame(2))
  t.same([got(a), got(b)], [[], []])
  r.flowTo(b)
  r.write(frame(3))
  t.same(got(b), [1, 2, 3])
})

t.test('drainTo hands queued audio over without replay; close counts what is left and later frames', async t => {
  const { r, counters, clock } = newFeed()
  const s = sink()
  r.flowTo(s)
  s.bufferedAmount = 5000
  r.write(frame(1))
  r.write(frame(2))
  r.drainTo(s)
  t.same(got(s), [1, 2])
  r.write(frame(3))
  r.close()
  r.write(frame(4))
  t.equal(counters.dropAfterClose, 2, 'the queued frame and the late one')
  t.equal(counters.bufferedBytes, 0)
  t.equal(clock.pending, 0, 'the backlog poll is cancelled')
})
