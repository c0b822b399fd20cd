import t from 'tap'
import fc from 'fast-check'
import { Timer } from '../../gateway/clock'
import { FakeClock } from '../helpers/fake-clock'

// gateway/clock.ts `Timer`: the self-cancelling timer that replaced the `TimerHandle | null` fields (issue 31),
// on the fake clock.

t.test('a timer runs its callback once, when due, and is no longer pending then', async t => {
  const clock = new FakeClock()
  const timer = new Timer(clock)
  const runs: number[] = []
  timer.set(100, () => runs.push(clock.now()))
  t.ok(timer.pending)
  clock.advance(99)
  t.same(runs, [], 'not before it is due')
  clock.advance(1)
  t.same(runs, [100])
  t.notOk(timer.pending, 'not pending once run')
  clock.advance(1000)
  t.same(runs, [100], 'once')
})

t.test('set replaces what was pending; clear cancels; clearing twice is harmless', async t => {
  const clock = new FakeClock()
  const timer = new Timer(clock)
  const runs: string[] = []
  timer.set(100, () => runs.push('first'))
  timer.set(50, () => runs.push('second'))
  t.equal(clock.pending, 1, 'the replaced callback is no longer armed on the clock')
  clock.advance(200)
  t.same(runs, ['second'])
  timer.set(10, () => runs.push('third'))
  timer.clear()
  timer.clear()
  t.notOk(timer.pending)
  t.equal(clock.pending, 0)
  clock.advance(100)
  t.same(runs, ['second'], 'a cleared timer never fires')
})

t.test('every runs until cleared; set replaces an interval with a timeout', async t => {
  const clock = new FakeClock()
  const timer = new Timer(clock)
  let ticks = 0
  timer.every(20, () => ticks++)
  clock.advance(100)
  t.equal(ticks, 5)
  t.ok(timer.pending, 'an interval stays pending')
  timer.set(10, () => {
    ticks += 100
  })
  clock.advance(100)
  t.equal(ticks, 105, 'the interval stopped; the timeout ran once')
  timer.every(20, () => ticks++)
  timer.clear()
  clock.advance(100)
  t.equal(ticks, 105)
  t.equal(clock.pending, 0)
})

t.test('a callback may re-arm its own timer', async t => {
  const clock = new FakeClock()
  const timer = new Timer(clock)
  const runs: number[] = []
  const again = (): void => {
    runs.push(clock.now())
    if (runs.length < 3) timer.set(10, again)
  }
  timer.set(10, again)
  clock.advance(100)
  t.same(runs, [10, 20, 30])
  t.notOk(timer.pending)
})

type Step =
  | { kind: 'set'; ms: number; id: number }
  | { kind: 'every'; ms: number; id: number }
  | { kind: 'clear' }
  | { kind: 'advance'; ms: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), ms: fc.integer({ min: 0, max: 50 }), id: fc.nat(1000) }),
  fc.record({ kind: fc.constant('every' as const), ms: fc.integer({ min: 1, max: 50 }), id: fc.nat(1000) }),
  fc.record({ kind: fc.constant('clear' as const) }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 120 }) })
)

t.test(
  'any sequence of set, every, clear and advance: at most one callback pending, a cleared one never fires',
  async t => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), steps => {
        const clock = new FakeClock()
        const timer = new Timer(clock)
        // The callback armed last (by set or every) and not cleared or replaced since, and whether it repeats.
        let live: { id: number; repeats: boolean; due: number; every: number } | null = null
        const fired: number[] = []
        const arm =
          (id: number): (() => void) =>
          () =>
            fired.push(id)
        for (const s of steps) {
          switch (s.kind) {
            case 'set':
              timer.set(s.ms, arm(s.id))
              live = { id: s.id, repeats: false, due: clock.now() + s.ms, every: 0 }
              break
            case 'every':
              timer.every(s.ms, arm(s.id))
              live = { id: s.id, repeats: true, due: clock.now() + s.ms, every: s.ms }
              break
            case 'clear':
              timer.clear()
              live = null
              break
            case 'advance': {
              fired.length = 0
              const end = clock.now() + s.ms
              clock.advance(s.ms)
              let expected = 0
              if (live !== null && live.due <= end) {
                expected = live.repeats ? Math.floor((end - live.due) / live.every) + 1 : 1
                if (live.repeats) live.due += expected * live.every
              }
              // Only the live callback ever runs, as often as it fell due.
              if (fired.some(id => id !== live?.id) || fired.length !== expected) return false
              if (live !== null && !live.repeats && expected === 1) live = null
              break
            }
            default:
              return s satisfies never
          }
          if (timer.pending !== (live !== null)) return false
          if (clock.pending > 1) return false
        }
        return true
      }),
      { numRuns: 300 }
    )
    t.pass('300 sequences of up to 60 steps')
  }
)
