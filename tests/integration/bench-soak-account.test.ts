import t from 'tap'
import { countIn, legRecords, mergeIntervals, slope, windowFrames } from '../bench/soak/account'

// The soak bench's bookkeeping (tests/bench/soak/account.ts): which frames count as delivered, stranded,
// sent twice, and the longest gap, from the emulators' runs [firstSeq, lastSeq, firstAt, lastAt, maxDelay].

t.test('intervals merge when they touch (sequence numbers) and count within a window', async t => {
  t.same(
    mergeIntervals([
      [5, 9],
      [0, 4],
      [12, 14]
    ]),
    [
      [0, 9],
      [12, 14]
    ]
  )
  t.equal(
    countIn(
      [
        [0, 9],
        [12, 14]
      ],
      5,
      13
    ),
    6
  )
})

t.test('a failover with replay: every frame delivered once, the replayed ones counted as sent twice', async t => {
  const legs = legRecords(
    [
      { replica: 'v1', openedAt: 0, stream: 0, runs: [[0, 99, 0, 1980, 5]] },
      // Replays 90-99, then live from 100; opened 500 ms after the last arrival on v1.
      { replica: 'v2', openedAt: 2400, stream: 0, runs: [[90, 199, 2480, 4000, 600]] }
    ],
    1
  )
  const f = windowFrames(legs, { at: 0, seq: [0], notSent: [0] }, { at: 5000, seq: [200], notSent: [0] })
  t.equal(f.sent, 200)
  t.equal(f.delivered, 200)
  t.equal(f.duplicates, 10)
  t.equal(f.stranded, 0)
  t.same(f.longestGap, [500])
})

t.test('frames read by a session after the gateway moved on are stranded, not delivered, and no arrival', async t => {
  const legs = legRecords(
    [
      // Frozen at 2000 after frame 99; frames 100-149 read from its buffer at 17000 (after SIGCONT).
      {
        replica: 'v1',
        openedAt: 0,
        stream: 0,
        runs: [
          [0, 99, 0, 1980, 5],
          [100, 149, 17000, 17001, 15000]
        ]
      },
      // The gateway's new session from 12000: frames from 600 on (100-599 were never replayed).
      { replica: 'v2', openedAt: 11900, stream: 0, runs: [[600, 899, 12000, 18000, 50]] }
    ],
    1
  )
  const f = windowFrames(legs, { at: 0, seq: [0], notSent: [0] }, { at: 20000, seq: [900], notSent: [0] })
  t.equal(f.delivered, 400)
  t.equal(f.stranded, 50, 'the 50 read after SIGCONT')
  t.same(f.longestGap, [10020], 'from the last arrival before the freeze to the first on the new session')
})

t.test('a window counts the frames between its marks; gaps belong to the window they start in', async t => {
  const legs = legRecords(
    [
      {
        replica: 'v1',
        openedAt: 0,
        stream: 1,
        runs: [
          [0, 49, 0, 1000, 1],
          [60, 99, 3000, 4000, 1]
        ]
      }
    ],
    2
  )
  const marks = [
    { at: 0, seq: [0, 0], notSent: [0, 0] },
    { at: 2000, seq: [0, 55], notSent: [0, 3] },
    { at: 5000, seq: [0, 100], notSent: [0, 3] }
  ]
  const a = windowFrames(legs, marks[0], marks[1])
  const b = windowFrames(legs, marks[1], marks[2])
  t.same([a.sent, a.delivered, a.notSent], [55, 50, 3])
  t.same([b.sent, b.delivered, b.notSent], [45, 40, 0])
  t.same(a.longestGap, [0, 2000])
  t.same(b.longestGap, [0, 0])
  t.equal(
    Math.round(
      slope([
        [0, 1],
        [1, 3],
        [2, 5]
      ])
    ),
    2
  )
})
