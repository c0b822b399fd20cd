import type { Clock } from '../clock'
import type { ShutdownSettings } from '../config/types'
import { unhandled } from '../result'
import { type FinalScrape, lingerMs } from '../telemetry/final-scrape'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import {
  LEAVING,
  SUPERVISOR_STEPS,
  type SupervisorAction,
  type SupervisorEvent,
  type SupervisorStage
} from './supervisor-states'

/** The worker processes as the lifecycle drives them (workers/worker-slots.ts). */
export interface Workers {
  startAll: () => void
  allUp: () => boolean
  killAll: () => void
  /** Every worker's message of the moment (a drain, a stop). */
  postAll: (m: { t: 'drain'; signal: string } | { t: 'stop'; why: string }) => void
  /** Resolves once every worker process running now has exited. */
  exits: () => Promise<void>
  /** How many slots the group has. */
  readonly count: number
}

export interface SupervisorParts {
  log: Logger
  metrics: Pick<Metrics, 'draining'>
  workers: Workers
  final: FinalScrape
  /** shutdown.* of the config in force. */
  shutdown: () => ShutdownSettings
  /** Every worker has exited: the periodic sync ends. */
  stopSync: () => void
  /** The clock of the drain's deadline and linger. */
  clock: Clock
}

/** The stage and what exists only in it: the start's settlement while starting, the drain's promise from its beginning. */
type Stage =
  | { readonly stage: 'starting'; readonly settle: (err: Error | null) => void }
  | { readonly stage: 'serving' }
  | { readonly stage: 'stopped' }
  | { readonly stage: 'draining'; readonly done: Promise<void> }
  | { readonly stage: 'closed'; readonly done: Promise<void> | null }

/** What an event brings: the failure of a start, the drain's signal and final close, a stop's reason. */
interface Detail {
  err?: Error
  drain?: { signal: string; close: () => Promise<void> }
  why?: string
}

/** The deadline of the workers' drains, and a little more for their exits, before they are killed. */
const EXIT_GRACE_SECONDS = 5

/**
 * The main process of `serve --workers N`: starting → serving → (stopped →) draining → closed; every
 * event in every stage is a row of workers/supervisor-states.ts. Before the start the stage is `starting`
 * with nothing to settle; `start` forks the workers.
 */
export class SupervisorLifecycle {
  private current: Stage = { stage: 'starting', settle: () => {} }

  constructor(private readonly parts: SupervisorParts) {}

  get stage(): SupervisorStage {
    return this.current.stage
  }

  /** /readyz answers 503. */
  get leaving(): boolean {
    return LEAVING[this.current.stage]
  }

  /** Fork every worker; resolves when every one serves, rejects when one fails or exits before serving. */
  start(): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.current = { stage: 'starting', settle: err => (err === null ? resolve() : reject(err)) }
      this.parts.workers.startAll()
    })
  }

  /** A worker serves: the start succeeds when every one does. */
  ready(): void {
    if (this.parts.workers.allUp()) this.on('all-ready')
  }

  /** A worker could not start or exited before serving, or the listeners could not open: every worker is killed. */
  startFailed(err: Error): void {
    this.on('start-failed', { err })
  }

  /**
   * The graceful drain on every worker; resolves when every worker has exited, the final scrape was
   * answered (or the linger ran out) and `close` closed the rest. Asked again, the same drain's promise.
   */
  drain(signal: string, close: () => Promise<void>): Promise<void> {
    this.on('drain', { drain: { signal, close } })
    const c = this.current
    if (c.stage === 'draining') return c.done
    return (c.stage === 'closed' ? c.done : null) ?? Promise.resolve()
  }

  /** A second signal: every worker stops at once, and no final scrape is waited for. */
  stopNow(why: string): void {
    this.parts.final.cancel()
    this.on('stop-now', { why })
  }

  private on(event: SupervisorEvent, detail: Detail = {}): void {
    const was = this.current
    this.run(SUPERVISOR_STEPS[was.stage][event][0], was, detail)
  }

  private run(action: SupervisorAction, was: Stage, detail: Detail): void {
    switch (action) {
      case 'serve':
        this.current = { stage: 'serving' }
        if (was.stage === 'starting') was.settle(null)
        return
      case 'abandon':
        this.current = { stage: 'closed', done: null }
        this.parts.workers.killAll()
        if (was.stage === 'starting') was.settle(detail.err ?? new Error('stopped while starting'))
        return
      case 'begin-drain':
        if (detail.drain !== undefined) this.beginDrain(detail.drain.signal, detail.drain.close)
        return
      case 'stop-workers':
        if (was.stage === 'serving') this.current = { stage: 'stopped' }
        this.parts.workers.postAll({ t: 'stop', why: detail.why ?? '' })
        return
      case 'close':
        if (was.stage === 'draining') this.current = { stage: 'closed', done: was.done }
        return
      case 'join':
      case 'ignore':
        return
      default:
        return unhandled(action)
    }
  }

  private beginDrain(signal: string, close: () => Promise<void>): void {
    const signalledAt = this.parts.clock.now()
    this.parts.metrics.draining.set(1)
    const gone = this.parts.workers.exits()
    const done = this.afterDrain(gone, signalledAt, close)
    // Draining before the workers are told: none that exits from now on is restarted.
    this.current = { stage: 'draining', done }
    this.parts.workers.postAll({ t: 'drain', signal })
  }

  private async afterDrain(gone: Promise<void>, signalledAt: number, close: () => Promise<void>): Promise<void> {
    const { log, final, workers, clock } = this.parts
    const graceMs = (this.parts.shutdown().deadlineSeconds + EXIT_GRACE_SECONDS) * 1000
    let deadline: () => void = () => {}
    const cut = new Promise<'deadline'>(resolve => {
      deadline = () => resolve('deadline')
    })
    const timer = clock.setTimeout(() => deadline(), graceMs)
    const why = await Promise.race([gone.then(() => 'drained' as const), cut])
    if (why === 'deadline') {
      workers.killAll()
      await gone
    }
    clock.clearTimeout(timer)
    this.parts.stopSync()
    // The gateway's drain is over when every worker's is (each logs its own, with its `worker`).
    log.info({ event: 'drain_finished', why, workers: workers.count }, 'drain complete: every worker has exited')
    // The workers' final counters (`final-metrics`) stay scrapeable for one more scrape.
    final.finished()
    const maxMs = lingerMs(this.parts.shutdown(), this.parts.clock.now() - signalledAt)
    const how = await final.wait(maxMs)
    if (maxMs > 0) log.info({ event: 'metrics_final', how, lingerMs: Math.round(maxMs) }, `final metrics: ${how}`)
    await close()
    this.on('drained')
  }
}
