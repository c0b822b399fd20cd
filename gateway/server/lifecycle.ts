import type { Clock, TimerHandle } from '../clock'
import { unhandled } from '../result'
import type { ShutdownSettings } from '../config/types'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import {
  LEAVING,
  REFUSES_NEW_WORK,
  SERVER_STEPS,
  type ServerAction,
  type ServerEvent,
  type ServerStage
} from './lifecycle-states'

/** What the lifecycle drives: the server's parts it opens, drains and closes (server/app.ts). */
export interface LifecycleParts {
  log: Logger
  metrics: Pick<Metrics, 'draining'>
  /** The config in force when a drain begins: its shutdown.* and the reattach grace of a handed-off session. */
  settings: () => { shutdown: ShutdownSettings; reattachGraceSeconds: number }
  /** Live audio legs. */
  legs: () => ReadonlySet<{ drain: (handOffSeconds: number) => void }>
  /** Text requests in flight (answered before the listeners close). */
  pendingText: () => number
}

/** What closes a server that listens: brought by its `listening` event, so it exists only from then on. */
export interface Closers {
  /** Close the public listening socket: no new connection is accepted. Closing twice is harmless. */
  stopAccepting: () => void
  /** Close whatever is still open (listeners but the metrics one, legs, parked sessions, vendor pools). */
  finish: () => void
}

/** A drain under way, or the one that ended: its signal, its start on the clock, its timers and its promise. */
interface DrainRun {
  readonly signal: string
  readonly signalledAt: number
  readonly settings: ShutdownSettings
  /** How long a leg's vendor session is kept for the platform's reconnect elsewhere. */
  readonly handOffSeconds: number
  readonly timers: Set<TimerHandle>
  /** When the drain last closed a leg itself (the clock's ms), or null: its close handshake may still be under way. */
  lastLegClosedAt: number | null
  readonly done: Promise<void>
  readonly resolve: () => void
}

/**
 * The stage and what exists only in it: the closers from serving on, a drain while leaving or draining,
 * the drain that ended (if one ran) once closed.
 */
type Stage =
  | { readonly stage: 'starting' }
  | { readonly stage: 'serving'; readonly closers: Closers }
  | { readonly stage: 'leaving' | 'draining'; readonly closers: Closers; readonly drain: DrainRun }
  | { readonly stage: 'closed'; readonly drain: DrainRun | null }

/** How often a drain looks for its last leg and text request. */
const DRAIN_POLL_MS = 50

/**
 * How long the drain waits after the last leg it closed before closing the rest: uWS forgets a socket as it
 * sends the close frame, and closing its app then cuts the connections still in their close handshake; a
 * platform still sending audio gets a reset, and may lose the ERROR frame and the 1012 before reading them.
 */
export const CLOSE_LINGER_MS = 1000

/**
 * One server process's life: starting → serving → leaving → draining → closed (server/lifecycle-states.ts says what
 * every event does in every stage). The drain runs in the order a load balancer and the platform need it
 * (shutdown.* in the config):
 * 1. at once: /readyz 503 (leaving) while everything is still served, for drainDelaySeconds;
 * 2. then stop accepting (new upgrades and requests on open connections get SHUTTING_DOWN) and close
 *    the live legs one by one, spread over legDrainSeconds (ERROR SHUTTING_DOWN, 1012, the vendor
 *    session handed off with its affinity), while text requests in flight are answered;
 * 3. when no leg and no text request is left, or at deadlineSeconds from the signal, close the rest.
 */
export class ServerLifecycle {
  private current: Stage = { stage: 'starting' }

  constructor(
    private readonly parts: LifecycleParts,
    private readonly clock: Clock
  ) {}

  get stage(): ServerStage {
    return this.current.stage
  }

  /** /readyz answers 503. */
  get leaving(): boolean {
    return LEAVING[this.current.stage]
  }

  /** New upgrades and text requests get SHUTTING_DOWN. */
  get refusesNewWork(): boolean {
    return REFUSES_NEW_WORK[this.current.stage]
  }

  /** When the drain began (the clock's ms), or null when none has. */
  signalledAt(): number | null {
    return drainOf(this.current)?.signalledAt ?? null
  }

  /** Every listener is open: serving, closed by `closers` (at once, if the server was closed meanwhile). */
  listening(closers: Closers): void {
    this.on('listening', '', closers)
  }

  /** The graceful drain; resolves when everything is closed. Asked again, the same drain's promise. */
  drain(signal: string): Promise<void> {
    this.on('drain', signal)
    return drainOf(this.current)?.done ?? Promise.resolve()
  }

  /** Cut a drain short (a second signal), or close at once when none runs. */
  stopNow(why: string): void {
    this.on('stop-now', why)
  }

  /** The process is done with the server: close everything (a drain under way ends, cut short). */
  close(): void {
    this.on('close', 'closed')
  }

  /** Apply the event's step: the stage changes first, so what the action closes sees the new stage. */
  private on(event: ServerEvent, detail: string, given: Closers | null = null): void {
    const was = this.current
    this.run(SERVER_STEPS[was.stage][event][0], was, detail, given)
  }

  private run(action: ServerAction, was: Stage, detail: string, given: Closers | null): void {
    switch (action) {
      case 'serve':
        if (given !== null) this.current = { stage: 'serving', closers: given }
        return
      case 'begin-drain':
        if (was.stage === 'serving') return this.beginDrain(was.closers, detail)
        return
      case 'stop-accepting':
        if (was.stage === 'leaving') return this.stopAccepting(was.closers, was.drain)
        return
      case 'end-drain':
        if (was.stage === 'leaving' || was.stage === 'draining') return this.endDrain(was.closers, was.drain, detail)
        return
      case 'finish':
        return this.finish(was, given)
      case 'join':
      case 'ignore':
        return
      default:
        return unhandled(action)
    }
  }

  /** Closed with no drain to end: what is open closes (what opens later, at its `listening`). */
  private finish(was: Stage, given: Closers | null): void {
    this.current = { stage: 'closed', drain: drainOf(was) }
    this.parts.metrics.draining.set(1)
    const closers = 'closers' in was ? was.closers : given
    closers?.finish()
  }

  private beginDrain(closers: Closers, signal: string): void {
    const { log, metrics } = this.parts
    const config = this.parts.settings()
    const settings = config.shutdown
    let resolve: () => void = () => {}
    const done = new Promise<void>(r => {
      resolve = r
    })
    const drain: DrainRun = {
      signal,
      signalledAt: this.clock.now(),
      settings,
      // The platform reconnects within seconds; the affinity outlives the deadline comfortably.
      handOffSeconds: Math.max(config.reattachGraceSeconds, settings.deadlineSeconds + 60),
      timers: new Set(),
      lastLegClosedAt: null,
      done,
      resolve
    }
    this.current = { stage: 'leaving', closers, drain }
    metrics.draining.set(1)
    log.info(
      { event: 'drain_started', signal, ...settings, legs: this.parts.legs().size },
      `${signal}: draining; /readyz answers 503, still serving for ${settings.drainDelaySeconds} s`
    )
    this.poll(drain)
    this.later(drain, settings.deadlineSeconds * 1000, () => this.on('deadline', 'deadline'))
    this.later(drain, settings.drainDelaySeconds * 1000, () => this.on('delay-over', 'delay'))
  }

  private stopAccepting(closers: Closers, drain: DrainRun): void {
    this.current = { stage: 'draining', closers, drain }
    closers.stopAccepting()
    const legs = [...this.parts.legs()]
    const settings = drain.settings
    this.parts.log.info(
      { event: 'drain_closing', legs: legs.length, textInFlight: this.parts.pendingText(), ...settings },
      `no longer accepting; closing ${legs.length} leg(s) over ${settings.legDrainSeconds} s`
    )
    const step = legs.length > 0 ? (settings.legDrainSeconds * 1000) / legs.length : 0
    legs.forEach((leg, i) =>
      this.later(drain, i * step, () => {
        leg.drain(drain.handOffSeconds)
        drain.lastLegClosedAt = this.clock.now()
      })
    )
  }

  private endDrain(closers: Closers, drain: DrainRun, why: string): void {
    this.current = { stage: 'closed', drain }
    for (const t of drain.timers) this.clock.clearTimeout(t)
    drain.timers.clear()
    const legs = [...this.parts.legs()]
    const text = this.parts.pendingText()
    for (const leg of legs) leg.drain(drain.handOffSeconds)
    closers.finish()
    this.parts.log[legs.length > 0 || text > 0 ? 'warn' : 'info'](
      { event: 'drain_finished', why, legsCut: legs.length, textCut: text },
      why === 'drained' ? 'drain complete' : `drain cut short (${why})`
    )
    drain.resolve()
  }

  /** Until the drain ends: is every leg and text request gone? (A timeout re-armed, so it holds the process.) */
  private poll(drain: DrainRun): void {
    this.later(drain, DRAIN_POLL_MS, () => {
      if (this.parts.legs().size === 0 && this.parts.pendingText() === 0 && this.closesSettled(drain))
        this.on('drained', 'drained')
      if (this.current.stage !== 'closed') this.poll(drain)
    })
  }

  /** The last leg the drain closed did so at least CLOSE_LINGER_MS ago (or it closed none). */
  private closesSettled(drain: DrainRun): boolean {
    return drain.lastLegClosedAt === null || this.clock.now() - drain.lastLegClosedAt >= CLOSE_LINGER_MS
  }

  /** A timer of the drain: cleared when the drain ends. */
  private later(drain: DrainRun, ms: number, fn: () => void): void {
    const timer = this.clock.setTimeout(() => {
      drain.timers.delete(timer)
      fn()
    }, ms)
    drain.timers.add(timer)
  }
}

/** The drain under way, or the one that ended; null when none has begun. */
function drainOf(s: Stage): DrainRun | null {
  switch (s.stage) {
    case 'starting':
    case 'serving':
      return null
    case 'leaving':
    case 'draining':
    case 'closed':
      return s.drain
    default:
      return unhandled(s)
  }
}
