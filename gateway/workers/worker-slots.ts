import { type ChildProcess, fork } from 'node:child_process'
import { unhandled } from '../result'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import type { InstanceCounters } from './instance-counters'
import { type Hello, type ToMain, type ToWorker, WORKER_ENV } from './protocol'
import { ON_RESTART_DUE, ON_WORKER_EXIT, ON_WORKER_FAILED, SLOT_UP, type SupervisorStage } from './supervisor-states'
import { workerExecArgv } from './worker-flags'

/** A slot's process, as its stage has it: none before the first fork and after an exit. */
type SlotState =
  | { readonly stage: 'unstarted' }
  | { readonly stage: 'starting'; readonly child: ChildProcess; readonly startedAt: number }
  | { readonly stage: 'up'; readonly child: ChildProcess; readonly startedAt: number; readonly adminPort: number }
  | { readonly stage: 'exited' }

/** One worker's place in the group: its process (by stage) and what outlives each process. */
export interface Slot {
  readonly index: number
  state: SlotState
  /** The last process that served in this slot (0 before any). */
  pid: number
  /** Processes started in this slot so far: tells a gathered answer from an exited process's. */
  incarnation: number
  restarts: number
  /** Exits in a row that came soon after a start (the backoff grows with them). */
  quickExits: number
}

/** What the slots tell their supervisor, and ask it. */
export interface SlotsParts {
  /** The arguments that start one worker: the same CLI with `serve --config FILE`. */
  workerArgs: string[]
  workers: number
  log: Logger
  metrics: Pick<Metrics, 'workerRestarts'>
  counters: InstanceCounters
  /** The first message every worker gets (workers/protocol.ts). */
  hello: Hello
  /** The supervisor's stage: whether an exit restarts, fails the start, or is let go. */
  stage: () => SupervisorStage
  /** A worker's message other than ready, failed and answers to asks (store, admission, relay nonces). */
  onMessage: (slot: Slot, m: ToMain) => void
  /** Tell every worker that is up what the others hold (after one is marked up, or exited). */
  sync: () => void
  /** A worker serves (marked up, synced, logged). */
  onReady: () => void
  /** A worker left (marked exited, before the sync): what it had goes. */
  onGone: (slot: Slot) => void
  /** The start failed: a worker could not start, or exited before serving. */
  startFailed: (err: Error) => void
  /** How a worker process is started (default: `fork` of `workerArgs`; unit tests pass fakes). */
  fork?: (index: number) => ChildProcess
  /** How a restart waits out its backoff (default: an unref'd timeout; unit tests fire them by hand). */
  later?: (fn: () => void, ms: number) => void
}

/** The longest backoff before a restart, and how long a worker must live for its exit not to count as quick. */
const MAX_BACKOFF_MS = 10_000
const QUICK_EXIT_MS = 30_000

/**
 * The worker processes of `serve --workers N`: forked into slots, restarted with backoff when one exits
 * unexpectedly (the supervisor's stage decides, workers/supervisor-states.ts), messaged and asked.
 */
export class WorkerSlots {
  readonly slots: Slot[]
  private readonly asks = new Map<number, (m: ToMain) => void>()
  private nextAsk = 1

  constructor(private readonly parts: SlotsParts) {
    this.slots = Array.from({ length: parts.workers }, (_, index) => ({
      index,
      state: { stage: 'unstarted' },
      pid: 0,
      incarnation: 0,
      restarts: 0,
      quickExits: 0
    }))
  }

  /** The slots whose worker serves. */
  up(): Slot[] {
    return this.slots.filter(s => SLOT_UP[s.state.stage])
  }

  allUp(): boolean {
    return this.slots.every(s => SLOT_UP[s.state.stage])
  }

  /** The admin port of every worker that serves. */
  admins(): { worker: number; adminPort: number }[] {
    return this.slots.flatMap(s => (s.state.stage === 'up' ? [{ worker: s.index, adminPort: s.state.adminPort }] : []))
  }

  startAll(): void {
    for (const s of this.slots) this.spawn(s)
  }

  /**
   * A worker can close its channel while it exits before this process sees it disconnect: the send then
   * fails (EPIPE) after `connected` said yes. With a callback the failure comes back here instead of as an
   * unhandled 'error' event that would end the main process (its drain and final scrape with it); the
   * worker's 'exit' handling covers what the message was for.
   */
  post(slot: Slot, m: ToWorker): void {
    const child = childOf(slot)
    if (child?.connected) child.send(m, ignoreSendError)
  }

  postAll(m: ToWorker): void {
    for (const s of this.slots) this.post(s, m)
  }

  killAll(): void {
    for (const s of this.slots) childOf(s)?.kill('SIGKILL')
  }

  /** Resolves once every worker process running now has exited. */
  exits(): Promise<void> {
    const running = this.slots.flatMap(s => {
      const child = childOf(s)
      return child === null ? [] : [new Promise<void>(resolve => child.once('exit', () => resolve()))]
    })
    return Promise.all(running).then(() => {})
  }

  /** Every worker that is up, asked at once; one that has not answered within `ms` counts as no answer. */
  async askAll(make: (id: number) => ToWorker, ms = 10_000): Promise<{ worker: number; m: ToMain | null }[]> {
    return await Promise.all(
      this.up().map(
        async s =>
          await new Promise<{ worker: number; m: ToMain | null }>(resolve => {
            const id = this.nextAsk++
            const timer = setTimeout(() => {
              this.asks.delete(id)
              resolve({ worker: s.index, m: null })
            }, ms)
            this.asks.set(id, m => {
              clearTimeout(timer)
              resolve({ worker: s.index, m })
            })
            this.post(s, make(id))
          })
      )
    )
  }

  /** An answer to an ask (`metrics`, `reloaded`). */
  answered(id: number, m: ToMain): void {
    this.asks.get(id)?.(m)
    this.asks.delete(id)
  }

  private fork(index: number): ChildProcess {
    if (this.parts.fork !== undefined) return this.parts.fork(index)
    return fork(this.parts.workerArgs[0], this.parts.workerArgs.slice(1), {
      execArgv: workerExecArgv(),
      serialization: 'advanced',
      env: { ...process.env, [WORKER_ENV]: String(index) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc']
    })
  }

  private spawn(slot: Slot): void {
    const child = this.fork(slot.index)
    slot.state = { stage: 'starting', child, startedAt: Date.now() }
    slot.incarnation++
    child.send(this.parts.hello)
    child.on('message', raw => this.received(slot, child, raw as ToMain))
    child.on('exit', (code, signal) => this.exited(slot, child, code, signal))
  }

  private received(slot: Slot, child: ChildProcess, m: ToMain): void {
    switch (m.t) {
      case 'ready':
        if (slot.state.stage === 'starting' && slot.state.child === child)
          slot.state = { stage: 'up', child, startedAt: slot.state.startedAt, adminPort: m.adminPort }
        slot.pid = m.pid
        this.parts.sync()
        this.parts.log.info(
          { event: 'worker_started', worker: slot.index, pid: m.pid, port: this.parts.hello.port },
          `worker ${slot.index} serving`
        )
        return this.parts.onReady()
      case 'failed':
        if (ON_WORKER_FAILED[this.parts.stage()] === 'fail-start') this.parts.startFailed(new Error(m.message))
        return
      case 'metrics':
      case 'reloaded':
        return this.answered(m.id, m)
      default:
        return this.parts.onMessage(slot, m)
    }
  }

  private exited(slot: Slot, child: ChildProcess, code: number | null, signal: string | null): void {
    const was = slot.state
    if (childOf(slot) !== child || was.stage === 'unstarted' || was.stage === 'exited') return
    this.parts.counters.exited(slot.index)
    slot.state = { stage: 'exited' }
    this.parts.onGone(slot)
    this.parts.sync()
    const then = ON_WORKER_EXIT[this.parts.stage()]
    switch (then) {
      case 'let-go':
        return
      case 'fail-start-unless-up':
        if (was.stage !== 'up')
          return this.parts.startFailed(
            new Error(`worker ${slot.index} exited before serving (code ${code ?? signal})`)
          )
        return this.restart(slot, was.startedAt, code, signal)
      case 'restart':
        return this.restart(slot, was.startedAt, code, signal)
      default:
        return unhandled(then)
    }
  }

  private restart(slot: Slot, startedAt: number, code: number | null, signal: string | null): void {
    slot.restarts++
    this.parts.metrics.workerRestarts.inc({ worker: String(slot.index) })
    const lived = Date.now() - startedAt
    slot.quickExits = lived > QUICK_EXIT_MS ? 0 : slot.quickExits + 1
    const delay = Math.min(MAX_BACKOFF_MS, 100 * 2 ** Math.max(0, slot.quickExits - 1))
    this.parts.log.error(
      { event: 'worker_exited', worker: slot.index, pid: slot.pid, code, signal, restartInMs: delay },
      `worker ${slot.index} exited unexpectedly; restarting it (its legs reconnect to the other workers)`
    )
    const later = this.parts.later ?? ((fn, ms) => setTimeout(fn, ms).unref())
    later(() => {
      if (ON_RESTART_DUE[this.parts.stage()] === 'spawn') this.spawn(slot)
    }, delay)
  }
}

/** The slot's process while it has one. */
function childOf(slot: Slot): ChildProcess | null {
  return slot.state.stage === 'starting' || slot.state.stage === 'up' ? slot.state.child : null
}

/** `ChildProcess.send`'s callback for a worker that may be exiting: the failed message is not needed. */
function ignoreSendError(_err: Error | null): void {}
