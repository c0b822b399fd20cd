import t from 'tap'
import { FrameSequence, MAX_RUNS, SEQ_FRAME_BYTES, SPLIT_GAP_MS } from '../../../gateway/tools/vendors/sequence'

/** n sequenced frames of one stream from `seq` on, sent at `sentAt`, in one message (as a coalesced vendor write). */
function frames(stream: number, seq: number, n: number, sentAt: number): Buffer {
  const b = Buffer.alloc(n * SEQ_FRAME_BYTES, 0xff)
  for (let i = 0; i < n; i++) {
    b.writeDoubleLE(sentAt, i * SEQ_FRAME_BYTES)
    b.writeUInt32LE(seq + i, i * SEQ_FRAME_BYTES + 8)
    b.writeUInt32LE(stream, i * SEQ_FRAME_BYTES + 12)
  }
  return b
}

t.test('consecutive frames arriving close together make one run; a write of 5 frames is 5 frames', async t => {
  const s = new FrameSequence()
  s.add(frames(7, 0, 5, 1000), 1010)
  s.add(frames(7, 5, 5, 1100), 1110)
  const r = s.report()
  t.equal(r.stream, 7)
  t.equal(r.frames, 10)
  t.same(r.runs, [[0, 9, 1010, 1110, 10]])
  t.equal(r.maxDelayMs, 10)
  t.equal(r.badLength, 0)
})

t.test('a missing number, a repeat (replay), a long pause and another stream each start a run', async t => {
  const s = new FrameSequence()
  s.add(frames(1, 0, 3, 0), 0)
  s.add(frames(1, 4, 2, 0), 20) // 3 missing
  s.add(frames(1, 4, 2, 0), 40) // 4-5 again
  s.add(frames(1, 6, 1, 0), 40 + SPLIT_GAP_MS + 1) // after a long pause
  s.add(frames(2, 7, 1, 0), 400 + SPLIT_GAP_MS) // another stream
  const r = s.report()
  t.same(
    r.runs.map(x => [x[0], x[1]]),
    [
      [0, 2],
      [4, 5],
      [4, 5],
      [6, 6],
      [7, 7]
    ]
  )
  t.equal(r.foreign, 1, 'the frame of stream 2 is counted as foreign')
  t.equal(r.frames, 9)
})

t.test('a message whose length is not whole frames is counted; its whole frames still count', async t => {
  const s = new FrameSequence()
  s.add(Buffer.concat([frames(1, 0, 2, 0), Buffer.alloc(10)]), 0)
  s.add(Buffer.alloc(5), 0)
  const r = s.report()
  t.equal(r.badLength, 2)
  t.equal(r.frames, 2)
})

t.test('runs are bounded: frames past MAX_RUNS runs are counted as unrecorded', async t => {
  const s = new FrameSequence()
  // Every other number: each frame starts a run.
  for (let i = 0; i < MAX_RUNS + 3; i++) s.add(frames(1, i * 2, 1, 0), 0)
  const r = s.report()
  t.equal(r.runs.length, MAX_RUNS)
  t.equal(r.unrecorded, 3)
  t.equal(r.frames, MAX_RUNS + 3)
})
