import t from 'tap'
import fc from 'fast-check'
import type { ShutdownSettings } from '../../../gateway/config/types'
import { CLOSE_LINGER_MS, type Closers, ServerLifecycle } from '../../../gateway/server/lifecycle'
import {
  LEAVING,
  REFUSES_NEW_WORK,
  SERVER_STEPS,
  type ServerEvent,
  type ServerStage
} from '../../../gateway/server/lifecycle-states'
import type { Logger } from '../../../gateway/telemetry/log'
import { FakeClock, flush } from '../../helpers/fake-clock'

// The server's lifecycle (server/lifecycle.ts) on a fake clock: its table, a drain step by step, and a
// fast-check property over arbitrary sequences of signals, closes, legs ending and time passing.

const STAGES = Object.keys(SERVER_STEPS) as ServerStage[]
const EVENTS = Object.keys(SERVER_STEPS.serving) as ServerEvent[]

interface Leg {
  drained: number[]
  drain: (handOffSeconds: number) => void
}

/** A lifecycle on a fake clock, with counted closers, legs that leave when drained (or not), and a log that keeps lines. */
function harness(settings: Partial<ShutdownSettings> = {}, legCount = 0, legsLeaveWhenDrained = true) {
  const clock = new FakeClock()
  const lines: { level: string; event: string; why?: string }[] = []
  const logAt =
    (level: string) =>
    (o: { event: string; why?: string }): void => {
      lines.push({ level, event: o.event, why: o.why })
    }
  const log = { info: logAt('info'), warn: logAt('warn'), error: logAt('error') } as unknown as Logger
  const legs = new Set<Leg>()
  const addLeg = (): Leg => {
    const leg: Leg = {
      drained: [],
      drain: s => {
        leg.drained.push(s)
        if (legsLeaveWhenDrained) legs.delete(leg)
      }
    }
    legs.add(leg)
    return leg
  }
  for (let i = 0; i < legCount; i++) addLeg()
  let text = 0
  const gauge: number[] = []
  const calls = { stopAccepting: 0, finish: 0 }
  const closers: Closers = {
    stopAccepting: () => calls.stopAccepting++,
    finish: () => calls.finish++
  }
  const shutdown: ShutdownSettings = {
    drainDelaySeconds: 1,
    legDrainSeconds: 2,
    deadlineSeconds: 10,
    metricsLingerSeconds: 0,
    ...settings
  }
  const lifecycle = new ServerLifecycle(
    {
      log,
      metrics: { draining: { set: (v: number) => gauge.push(v) } } as never,
      settings: () => ({ shutdown, reattachGraceSeconds: 30 }),
      legs: () => legs,
      pendingText: () => text
    },
    clock
  )
  return {
    clock,
    lines,
    legs,
    addLeg,
    gauge,
    calls,
    closers,
    lifecycle,
    setText: (n: number) => {
      text = n
    }
  }
}

t.test('the table: every event in every stage has a step; closed is final; a drain begun is never undone', async t => {
  for (const s of STAGES) {
    t.same(Object.keys(SERVER_STEPS[s]).sort(), [...EVENTS].sort(), `${s}: a row for every event`)
    for (const e of EVENTS) {
      const [action, to] = SERVER_STEPS[s][e]
      t.ok(STAGES.includes(to), `${s} + ${e} → a stage`)
      if (action === 'join' || action === 'ignore') t.equal(to, s, `${s} + ${e}: ${action} stays`)
    }
  }
  for (const e of EVENTS) t.equal(SERVER_STEPS.closed[e][1], 'closed', `closed + ${e} stays closed`)
  for (const s of ['leaving', 'draining'] as const)
    for (const e of EVENTS) t.notOk(['starting', 'serving'].includes(SERVER_STEPS[s][e][1]), `${s} + ${e}: no way back`)
  for (const s of STAGES) t.ok(!LEAVING[s] || s !== 'serving', 'serving is ready')
  t.same(
    STAGES.filter(s => REFUSES_NEW_WORK[s]),
    ['draining', 'closed'],
    'new work is refused once the public listener is closed'
  )
})

t.test('a drain: readiness off, then the listener closed and the legs drained spread out, then closed', async t => {
  const h = harness({ drainDelaySeconds: 1, legDrainSeconds: 2 }, 4)
  const legs = [...h.legs]
  h.lifecycle.listening(h.closers)
  t.equal(h.lifecycle.stage, 'serving')
  let done = false
  const drained = h.lifecycle.drain('SIGTERM').then(() => {
    done = true
  })
  t.equal(h.lifecycle.stage, 'leaving')
  t.ok(h.lifecycle.leaving, '/readyz 503 at once')
  t.notOk(h.lifecycle.refusesNewWork, 'new work still served during the delay')
  t.equal(h.lifecycle.drain('SIGINT'), h.lifecycle.drain('SIGTERM'), 'asked again: the same drain')
  h.clock.advance(999)
  t.equal(h.calls.stopAccepting, 0)
  h.clock.advance(1)
  t.equal(h.lifecycle.stage, 'draining')
  t.equal(h.calls.stopAccepting, 1, 'the public listener closes after the delay')
  t.ok(h.lifecycle.refusesNewWork)
  t.same(
    legs.map(l => l.drained.length),
    [1, 0, 0, 0],
    'the first leg at once'
  )
  h.clock.advance(500)
  t.same(
    legs.map(l => l.drained.length),
    [1, 1, 0, 0],
    'then one every legDrainSeconds / legs'
  )
  h.clock.advance(1000)
  t.same(
    legs.map(l => l.drained.length),
    [1, 1, 1, 1]
  )
  t.same(legs[0].drained, [70], 'handed off for the deadline + 60 s (more than the reattach grace)')
  h.clock.advance(CLOSE_LINGER_MS - 50)
  t.equal(h.lifecycle.stage, 'draining', 'the last leg closed: its close handshake gets CLOSE_LINGER_MS')
  t.equal(h.calls.finish, 0)
  h.clock.advance(50)
  t.equal(h.lifecycle.stage, 'closed')
  t.equal(h.calls.finish, 1)
  await drained
  t.ok(done, 'the drain resolves')
  t.same(
    h.lines.map(l => `${l.event}${l.why === undefined ? '' : `:${l.why}`}`),
    ['drain_started', 'drain_closing', 'drain_finished:drained']
  )
  t.equal(h.clock.pending, 0, 'no timer left')
  t.equal(h.lifecycle.signalledAt(), 0, 'its start stays known for the final scrape')
})

t.test('the deadline cuts a drain whose legs never leave; a second signal cuts it at once', async t => {
  const slow = harness({ deadlineSeconds: 3 }, 2, false)
  slow.lifecycle.listening(slow.closers)
  const cut = slow.lifecycle.drain('SIGTERM')
  slow.clock.advance(3000)
  await cut
  t.equal(slow.lifecycle.stage, 'closed')
  t.same(slow.lines.at(-1), { level: 'warn', event: 'drain_finished', why: 'deadline' })
  t.equal(slow.clock.pending, 0)

  const now = harness({}, 1, false)
  now.lifecycle.listening(now.closers)
  const stopped = now.lifecycle.drain('SIGTERM')
  now.lifecycle.stopNow('second signal (SIGTERM)')
  await stopped
  t.same(now.lines.at(-1), { level: 'warn', event: 'drain_finished', why: 'second signal (SIGTERM)' })
  t.equal(now.calls.finish, 1)
  t.equal(now.clock.pending, 0)
})

t.test('closed without a drain: finished once, nothing drained, later signals change nothing', async t => {
  const h = harness({}, 1)
  h.lifecycle.listening(h.closers)
  h.lifecycle.stopNow('main process gone')
  t.equal(h.lifecycle.stage, 'closed')
  t.same(h.gauge, [1])
  await h.lifecycle.drain('SIGTERM')
  h.lifecycle.close()
  t.equal(h.calls.finish, 1)
  t.same([...h.legs][0].drained, [], 'no leg handed off')
  t.equal(h.lifecycle.signalledAt(), null)
  t.same(h.lines, [])
})

t.test('closed before it listened: what opens later closes at once', async t => {
  const h = harness()
  h.lifecycle.close()
  t.equal(h.lifecycle.stage, 'closed')
  h.lifecycle.listening(h.closers)
  t.equal(h.lifecycle.stage, 'closed')
  t.equal(h.calls.finish, 1)
})

type Op =
  | { kind: 'event'; event: 'listening' | 'drain' | 'stop-now' | 'close' }
  | { kind: 'advance'; ms: number }
  | { kind: 'leg'; add: boolean }
  | { kind: 'text'; n: number }

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('event' as const), event: fc.constantFrom('listening', 'drain', 'stop-now', 'close') }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 4000 }) }),
  fc.record({ kind: fc.constant('leg' as const), add: fc.boolean() }),
  fc.record({ kind: fc.constant('text' as const), n: fc.integer({ min: 0, max: 2 }) })
)

t.test('any sequence of signals, closes, legs and time: every step is a row of the table', async t => {
  await fc.assert(
    fc.asyncProperty(
      fc.record({
        delay: fc.integer({ min: 0, max: 3 }),
        legDrain: fc.integer({ min: 0, max: 3 }),
        deadline: fc.integer({ min: 1, max: 8 }),
        leave: fc.boolean(),
        ops: fc.array(op, { maxLength: 40 })
      }),
      async ({ delay, legDrain, deadline, leave, ops }) => {
        const h = harness({ drainDelaySeconds: delay, legDrainSeconds: legDrain, deadlineSeconds: deadline }, 1, leave)
        const seen: ServerStage[] = [h.lifecycle.stage]
        let drain: Promise<void> | null = null
        let resolved = false
        let listened = false
        for (const o of ops) {
          const was = h.lifecycle.stage
          // A server listens once (startServer), at any point of the sequence.
          if (o.kind === 'event' && o.event === 'listening' && listened) continue
          if (o.kind === 'event') {
            if (o.event === 'listening') {
              listened = true
              h.lifecycle.listening(h.closers)
            } else if (o.event === 'drain') {
              const p = h.lifecycle.drain('SIGTERM')
              if (drain === null && was === 'serving') {
                drain = p
                p.then(() => {
                  resolved = true
                })
              }
            } else if (o.event === 'stop-now') h.lifecycle.stopNow('second signal')
            else h.lifecycle.close()
            // A direct event moves exactly as its row says.
            if (h.lifecycle.stage !== SERVER_STEPS[was][o.event][1]) return false
          } else if (o.kind === 'advance') h.clock.advance(o.ms)
          else if (o.kind === 'leg') {
            if (o.add) h.addLeg()
            else h.legs.delete([...h.legs][0])
          } else h.setText(o.n)
          const now = h.lifecycle.stage
          // A change by the clock is a timer's row (delay-over, drained or deadline).
          if (now !== was && !EVENTS.some(e => SERVER_STEPS[was][e][1] === now)) return false
          seen.push(now)
          if (h.lifecycle.leaving !== LEAVING[now] || h.lifecycle.refusesNewWork !== REFUSES_NEW_WORK[now]) return false
        }
        await flush(2)
        const first = (s: ServerStage): number => seen.indexOf(s)
        // Closed is final; a drain begun is never undone.
        if (first('closed') >= 0 && seen.slice(first('closed')).some(s => s !== 'closed')) return false
        const begun = seen.findIndex(s => s === 'leaving' || s === 'draining')
        if (begun >= 0 && seen.slice(begun).some(s => s === 'serving' || s === 'starting')) return false
        // The closers ran at most once each; a drain's promise resolves once the server is closed, never before.
        if (h.calls.finish > 1 || h.calls.stopAccepting > 1) return false
        if (h.lifecycle.stage === 'closed' && seen.includes('serving') && h.calls.finish !== 1) return false
        if (drain !== null && resolved !== (h.lifecycle.stage === 'closed')) return false
        // No timer outlives the drain.
        return h.lifecycle.stage !== 'closed' || h.clock.pending === 0
      }
    ),
    { numRuns: 300 }
  )
  t.pass('checked over 300 random sequences of signals, closes, legs, text requests and time')
})
