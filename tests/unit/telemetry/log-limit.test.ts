import t from 'tap'
import fc from 'fast-check'
import { createLogger } from '../../../gateway/telemetry/log'
import { LogLimiter } from '../../../gateway/telemetry/log-limit'
import { FakeClock } from '../../helpers/fake-clock'
import { LogCapture } from '../../helpers/gateway'

function setup(): { clock: FakeClock; cap: LogCapture; limiter: LogLimiter; write: (kind: string) => boolean } {
  const clock = new FakeClock(1000)
  const cap = new LogCapture()
  const log = createLogger({ level: 'info', secrets: [], destination: cap.stream })
  const limiter = new LogLimiter(clock, () => log, 3, 10_000)
  const write = (kind: string): boolean => {
    const ok = limiter.allow(kind)
    if (ok) log.warn({ event: 'refused', code: kind }, 'refused')
    return ok
  }
  return { clock, cap, limiter, write }
}

t.test('the first lines of a kind per window are written, the rest counted, then one summary line', async t => {
  const { clock, cap, write } = setup()
  const allowed = Array.from({ length: 10 }, () => write('AUTH_INVALID'))
  t.same(allowed, [true, true, true, false, false, false, false, false, false, false], 'three per window')
  t.ok(write('NOT_FOUND'), 'each kind has its own window')
  t.equal(cap.lines.filter(l => l.event === 'log_suppressed').length, 0, 'no summary before the window ends')
  clock.advance(9_999)
  t.equal(cap.lines.filter(l => l.event === 'log_suppressed').length, 0, 'still none 1 ms before its end')
  clock.advance(1)
  const summaries = cap.lines.filter(l => l.event === 'log_suppressed')
  t.equal(summaries.length, 1, 'one summary at the end of the window, without a further line to trigger it')
  t.match(summaries[0], { kind: 'AUTH_INVALID', suppressed: 7, windowMs: 10_000, msg: 'suppressed 7 similar lines' })
  t.ok(write('AUTH_INVALID'), 'a new window writes again')
  t.equal(cap.lines.filter(l => l.event === 'refused').length, 5)
})

t.test('a window with nothing suppressed ends silently; a line after the window starts a new one', async t => {
  const { clock, cap, write } = setup()
  for (let i = 0; i < 3; i++) t.ok(write('ROUTE_NOT_FOUND'))
  clock.advance(20_000)
  t.equal(cap.lines.filter(l => l.event === 'log_suppressed').length, 0)
  for (let i = 0; i < 5; i++) write('ROUTE_NOT_FOUND')
  clock.advance(3_000)
  for (let i = 0; i < 5; i++) t.notOk(write('ROUTE_NOT_FOUND'), 'the same window (13 s old) still suppresses')
  clock.advance(7_000)
  t.match(
    cap.lines.filter(l => l.event === 'log_suppressed'),
    [{ kind: 'ROUTE_NOT_FOUND', suppressed: 7 }]
  )
  t.equal(clock.pending, 0, 'no timer left armed')
})

t.test('close writes the summaries of open windows', async t => {
  const { clock, cap, limiter, write } = setup()
  for (let i = 0; i < 5; i++) write('MESSAGE_TOO_LARGE')
  limiter.close()
  t.match(cap.lines.at(-1), { event: 'log_suppressed', kind: 'MESSAGE_TOO_LARGE', suppressed: 2 })
  t.equal(clock.pending, 0)
})

t.test('whatever the sequence: at most `lines` of a kind per window, and every line written or counted', async t => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 5 }),
      fc.array(fc.record({ kind: fc.constantFrom('A', 'B', 'C'), dt: fc.nat(4_000) }), { maxLength: 200 }),
      (lines, calls) => {
        const clock = new FakeClock(0)
        const cap = new LogCapture()
        const log = createLogger({ level: 'info', secrets: [], destination: cap.stream })
        const limiter = new LogLimiter(clock, () => log, lines, 10_000)
        const allowed: { kind: string; at: number }[] = []
        for (const { kind, dt } of calls) {
          clock.advance(dt)
          if (limiter.allow(kind)) allowed.push({ kind, at: clock.now() })
        }
        limiter.close()
        const summaries = cap.lines.filter(l => l.event === 'log_suppressed')
        const counted = summaries.reduce((n, l) => n + Number(l.suppressed), 0)
        if (allowed.length + counted !== calls.length) return false
        // A window opens at a kind's first line: any 10 s span overlaps at most two, so holds at most 2 × lines.
        for (const a of allowed) {
          const inWindow = allowed.filter(b => b.kind === a.kind && b.at >= a.at && b.at < a.at + 10_000)
          if (inWindow.length > lines * 2) return false
        }
        return clock.pending === 0
      }
    )
  )
  t.pass('held for every sequence tried')
})

t.test("a worker of `serve --workers N` writes its share of the instance's lines, rounded up", async t => {
  const clock = new FakeClock(0)
  const cap = new LogCapture()
  const log = createLogger({ level: 'info', secrets: [], destination: cap.stream })
  const share = (workers: number): number => {
    const limiter = LogLimiter.of(clock, () => log, { lines: 20, windowSeconds: 10 }, workers)
    let n = 0
    while (limiter.allow('AUTH_INVALID')) n++
    limiter.close()
    return n
  }
  t.same([1, 2, 3, 40].map(share), [20, 10, 7, 1])
})
