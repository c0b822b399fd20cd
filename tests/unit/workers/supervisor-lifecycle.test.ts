import { EventEmitter } from 'node:events'
import type { ChildProcess } from 'node:child_process'
import t from 'tap'
import fc from 'fast-check'
import type { ShutdownSettings } from '../../../gateway/config/types'
import { FinalScrape } from '../../../gateway/telemetry/final-scrape'
import type { Logger } from '../../../gateway/telemetry/log'
import { InstanceCounters } from '../../../gateway/workers/instance-counters'
import type { Hello } from '../../../gateway/workers/protocol'
import { SupervisorLifecycle } from '../../../gateway/workers/supervisor-lifecycle'
import {
  LEAVING,
  ON_RESTART_DUE,
  ON_WORKER_EXIT,
  SUPERVISOR_STEPS,
  type SupervisorEvent,
  type SupervisorStage
} from '../../../gateway/workers/supervisor-states'
import { WorkerSlots } from '../../../gateway/workers/worker-slots'
import { FakeClock, flush } from '../../helpers/fake-clock'

// The main process of `serve --workers N` as its lifecycle (workers/supervisor-lifecycle.ts) and its worker
// slots (workers/worker-slots.ts) run it together, with fake worker processes (an exit, a ready, a failure
// are events the test sends) on a fake clock: the tables, the start, a crash, a drain, and a fast-check
// property over arbitrary sequences of worker readies, failures and exits, restarts falling due, signals
// and time. A real worker crash and drain are tests/integration/workers.test.ts's.

const STAGES = Object.keys(SUPERVISOR_STEPS) as SupervisorStage[]
const EVENTS = Object.keys(SUPERVISOR_STEPS.serving) as SupervisorEvent[]

/** A worker process as the main process sees it: messages in, an exit, sends and kills recorded. */
class FakeChild extends EventEmitter {
  connected = true
  readonly sent: { t: string }[] = []
  readonly kills: string[] = []
  gone = false

  constructor(readonly pid: number) {
    super()
  }

  send(m: { t: string }, _cb?: (err: Error | null) => void): boolean {
    this.sent.push(m)
    return true
  }

  kill(signal: string): boolean {
    this.kills.push(signal)
    // A killed process exits soon after, as a real one does.
    queueMicrotask(() => this.exit(null, signal))
    return true
  }

  exit(code: number | null, signal: string | null = null): void {
    if (this.gone) return
    this.gone = true
    this.connected = false
    this.emit('exit', code, signal)
  }

  say(m: { t: string; [k: string]: unknown }): void {
    if (!this.gone) this.emit('message', m)
  }
}

const HELLO: Hello = {
  t: 'hello',
  group: 'g',
  workers: 2,
  port: 1,
  fleetPort: 2,
  fleetKey: '00',
  fleetKeySource: 'main process',
  adminToken: 'x'
}

/** A main process of `workers` slots: lifecycle and slots joined as workers/supervisor.ts joins them. */
function group(workers = 2, shutdown: Partial<ShutdownSettings> = {}) {
  const clock = new FakeClock()
  const lines: { event: string; why?: string }[] = []
  const log = {
    info: (o: { event: string; why?: string }) => lines.push(o),
    error: (o: { event: string }) => lines.push(o),
    warn: (o: { event: string }) => lines.push(o)
  } as unknown as Logger
  const children: FakeChild[][] = Array.from({ length: workers }, () => [])
  const forks: { index: number; stage: SupervisorStage }[] = []
  const due: (() => void)[] = []
  const failures: Error[] = []
  let nextPid = 100
  const settings: ShutdownSettings = {
    drainDelaySeconds: 0,
    legDrainSeconds: 0,
    deadlineSeconds: 10,
    metricsLingerSeconds: 0,
    ...shutdown
  }
  const slots: WorkerSlots = new WorkerSlots({
    workerArgs: [],
    workers,
    log,
    metrics: { workerRestarts: { inc: () => {} } } as never,
    counters: new InstanceCounters(),
    hello: HELLO,
    stage: () => lifecycle.stage,
    onMessage: () => {},
    sync: () => {},
    onReady: () => lifecycle.ready(),
    onGone: () => {},
    startFailed: err => {
      failures.push(err)
      lifecycle.startFailed(err)
    },
    fork: index => {
      forks.push({ index, stage: lifecycle.stage })
      const child = new FakeChild(nextPid++)
      children[index].push(child)
      return child as unknown as ChildProcess
    },
    later: fn => due.push(fn)
  })
  let syncStopped = 0
  const lifecycle = new SupervisorLifecycle({
    log,
    metrics: { draining: { set: () => {} } } as never,
    workers: {
      startAll: () => slots.startAll(),
      allUp: () => slots.allUp(),
      killAll: () => slots.killAll(),
      postAll: m => slots.postAll(m),
      exits: () => slots.exits(),
      count: workers
    },
    final: new FinalScrape(clock.now),
    shutdown: () => settings,
    stopSync: () => syncStopped++,
    clock
  })
  const current = (i: number): FakeChild | undefined => children[i].at(-1)
  let closes = 0
  const close = async (): Promise<void> => {
    closes++
  }
  return {
    clock,
    lines,
    children,
    forks,
    due,
    failures,
    slots,
    lifecycle,
    current,
    close,
    closes: () => closes,
    syncStopped: () => syncStopped,
    ready: (i: number) => current(i)?.say({ t: 'ready', port: 1, adminPort: 9000 + i, pid: current(i)?.pid }),
    fireDue: () => {
      for (const fn of due.splice(0)) fn()
    }
  }
}

t.test('the tables: every event in every stage; closed is final; a drain begun is never undone', async t => {
  for (const s of STAGES) {
    t.same(Object.keys(SUPERVISOR_STEPS[s]).sort(), [...EVENTS].sort(), `${s}: a row for every event`)
    for (const e of EVENTS) {
      const [action, to] = SUPERVISOR_STEPS[s][e]
      if (action === 'join' || action === 'ignore') t.equal(to, s, `${s} + ${e}: ${action} stays`)
    }
  }
  for (const e of EVENTS) t.equal(SUPERVISOR_STEPS.closed[e][1], 'closed', `closed + ${e} stays closed`)
  for (const e of EVENTS)
    t.equal(SUPERVISOR_STEPS.draining[e][1] === 'draining' || SUPERVISOR_STEPS.draining[e][1] === 'closed', true)
  t.same(
    STAGES.filter(s => ON_WORKER_EXIT[s] === 'restart' || ON_RESTART_DUE[s] === 'spawn'),
    ['starting', 'serving'],
    'workers are restarted only before any stop'
  )
  t.same(
    STAGES.filter(s => LEAVING[s]),
    ['draining', 'closed']
  )
})

t.test('the start: resolves when every worker serves; a worker that exits before serving fails it', async t => {
  const ok = group(2)
  const started = ok.lifecycle.start()
  ok.ready(0)
  t.equal(ok.lifecycle.stage, 'starting')
  ok.ready(1)
  await started
  t.equal(ok.lifecycle.stage, 'serving')
  t.same(ok.current(0)?.sent[0], HELLO, 'each worker gets its hello first')

  const bad = group(2)
  const failing = bad.lifecycle.start()
  bad.ready(0)
  bad.current(1)?.exit(1)
  await t.rejects(failing, /worker 1 exited before serving \(code 1\)/)
  t.equal(bad.lifecycle.stage, 'closed')
  await flush(2)
  t.same(bad.current(0)?.kills, ['SIGKILL'], 'the others are killed')
  t.equal(bad.forks.length, 2, 'nothing restarted')
})

t.test('a worker that crashes while serving is restarted; one that exits during a drain is not', async t => {
  const g = group(2)
  const started = g.lifecycle.start()
  g.ready(0)
  g.ready(1)
  await started
  g.current(0)?.exit(null, 'SIGKILL')
  t.match(g.lines.at(-1), { event: 'worker_exited', worker: 0, restartInMs: 100 })
  g.fireDue()
  t.equal(g.children[0].length, 2, 'forked again')
  t.equal(g.slots.up().length, 1, 'not up until it says so')
  g.ready(0)
  t.equal(g.slots.up().length, 2)

  const drained = g.lifecycle.drain('SIGTERM', g.close)
  t.equal(g.lifecycle.stage, 'draining')
  t.ok(g.lifecycle.leaving)
  t.same(g.current(1)?.sent.at(-1), { t: 'drain', signal: 'SIGTERM' })
  g.current(0)?.exit(0)
  t.equal(g.due.length, 0, 'no restart during a drain')
  t.equal(g.lifecycle.drain('SIGINT', g.close), drained, 'asked again: the same drain')
  g.current(1)?.exit(0)
  await drained
  t.equal(g.lifecycle.stage, 'closed')
  t.equal(g.closes(), 1)
  t.match(
    g.lines.find(l => l.event === 'drain_finished'),
    { why: 'drained' }
  )
})

t.test('the deadline kills workers that do not exit; a second signal tells every worker to stop', async t => {
  const g = group(2, { deadlineSeconds: 3 })
  const started = g.lifecycle.start()
  g.ready(0)
  g.ready(1)
  await started
  const drained = g.lifecycle.drain('SIGTERM', g.close)
  g.lifecycle.stopNow('second signal (SIGTERM)')
  t.same(g.current(0)?.sent.at(-1), { t: 'stop', why: 'second signal (SIGTERM)' })
  t.equal(g.lifecycle.stage, 'draining', 'still draining')
  await flush(2)
  g.clock.advance(8000)
  await drained
  t.same(g.current(0)?.kills, ['SIGKILL'])
  t.match(
    g.lines.find(l => l.event === 'drain_finished'),
    { why: 'deadline' }
  )
  t.equal(g.lifecycle.stage, 'closed')
  t.equal(g.clock.pending, 0)
})

type Op =
  | { kind: 'ready' | 'fail' | 'exit'; worker: number }
  | { kind: 'due' | 'drain' | 'stop-now' | 'flush' }
  | { kind: 'advance'; ms: number }

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constantFrom('ready' as const, 'fail' as const, 'exit' as const),
    worker: fc.integer({ min: 0, max: 2 })
  }),
  fc.record({ kind: fc.constantFrom('due' as const, 'drain' as const, 'stop-now' as const, 'flush' as const) }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 20_000 }) })
)

t.test('any sequence of readies, failures, exits, restarts, signals and time: the tables hold', async t => {
  await fc.assert(
    // Half the runs start with every worker ready (serving), so crashes, restarts and drains follow.
    fc.asyncProperty(fc.boolean(), fc.array(op, { maxLength: 40 }), async (allReady, ops) => {
      const g = group(3, { deadlineSeconds: 5 })
      let settled: 'resolved' | 'rejected' | null = null
      g.lifecycle.start().then(
        () => {
          settled = 'resolved'
        },
        () => {
          settled = 'rejected'
        }
      )
      if (allReady) for (const i of [0, 1, 2]) g.ready(i)
      const seen: SupervisorStage[] = [g.lifecycle.stage]
      let drain: Promise<void> | null = null
      let drained = false
      for (const o of ops) {
        const was = g.lifecycle.stage
        switch (o.kind) {
          case 'ready':
            g.ready(o.worker)
            break
          case 'fail':
            g.current(o.worker)?.say({ t: 'failed', message: 'cannot listen' })
            break
          case 'exit':
            g.current(o.worker)?.exit(1)
            break
          case 'due':
            g.fireDue()
            break
          case 'drain': {
            const p = g.lifecycle.drain('SIGTERM', g.close)
            if (SUPERVISOR_STEPS[was].drain[1] !== g.lifecycle.stage) return false
            if (drain === null && g.lifecycle.stage === 'draining') {
              drain = p
              p.then(() => {
                drained = true
              })
            }
            break
          }
          case 'stop-now':
            g.lifecycle.stopNow('second signal')
            if (SUPERVISOR_STEPS[was]['stop-now'][1] !== g.lifecycle.stage) return false
            break
          case 'flush':
            await flush(2)
            break
          case 'advance':
            g.clock.advance(o.ms)
            await flush(2)
            break
        }
        const now = g.lifecycle.stage
        if (now !== was && !EVENTS.some(e => SUPERVISOR_STEPS[was][e][1] === now)) return false
        seen.push(now)
      }
      await flush(3)
      seen.push(g.lifecycle.stage)
      // Closed is final; a drain begun is never undone.
      const closedAt = seen.indexOf('closed')
      if (closedAt >= 0 && seen.slice(closedAt).some(s => s !== 'closed')) return false
      const drainAt = seen.indexOf('draining')
      if (drainAt >= 0 && seen.slice(drainAt).some(s => s !== 'draining' && s !== 'closed')) return false
      // No worker is forked once the gateway stops; the start settles once, as its stage says.
      if (g.forks.some(f => f.stage === 'stopped' || f.stage === 'draining' || f.stage === 'closed')) return false
      if (seen.includes('serving') && settled !== 'resolved') return false
      if (!seen.includes('serving') && seen.includes('closed') && settled !== 'rejected') return false
      // A drain resolves only once every worker process has exited and the rest is closed.
      if (drained && (g.children.some(c => c.some(ch => !ch.gone)) || g.closes() !== 1)) return false
      return !drained || g.lifecycle.stage === 'closed'
    }),
    { numRuns: 300 }
  )
  t.pass('checked over 300 random sequences of readies, failures, exits, restarts, signals and time')
})
