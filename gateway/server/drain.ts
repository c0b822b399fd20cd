import type { ServerState } from './state'

export interface DrainHooks {
  state: ServerState
  /** Text requests in flight (answered before the listeners close). */
  pendingText: () => number
  /** Close the public listening socket: no new connection is accepted. */
  stopAccepting: () => void
  /** Close whatever is still open (listeners, parked sessions, vendor pools). */
  finish: () => void
}

export interface Drain {
  /** Resolves once everything is closed: drained, or cut at the deadline or by `stopNow`. */
  readonly done: Promise<void>
  /** A second signal: close everything at once. */
  stopNow: (why: string) => void
}

/**
 * The drain, in the order a load balancer and the platform need it (shutdown.* in the config):
 * 1. at once: /readyz 503 (state.leaving) while everything is still served, for drainDelaySeconds;
 * 2. then stop accepting (new upgrades and requests on open connections get SHUTTING_DOWN) and close
 *    the live legs one by one, spread over legDrainSeconds (ERROR SHUTTING_DOWN, 1012, the vendor
 *    session handed off with its affinity), while text requests in flight are answered;
 * 3. when no leg and no text request is left, or at deadlineSeconds from the signal, close the rest.
 */
export function startDrain(hooks: DrainHooks, signal: string): Drain {
  const { state } = hooks
  const { log, metrics } = state
  const settings = state.config.shutdown
  // The platform reconnects within seconds; the affinity outlives the deadline comfortably.
  const handOffSeconds = Math.max(state.config.audio.reattachGraceSeconds, settings.deadlineSeconds + 60)
  const timers = new Set<NodeJS.Timeout>()
  const later = (ms: number, fn: () => void): void => {
    const timer = setTimeout(() => {
      timers.delete(timer)
      fn()
    }, ms)
    timers.add(timer)
  }
  let resolve!: () => void
  const done = new Promise<void>(r => {
    resolve = r
  })
  let finished = false
  const finish = (why: string): void => {
    if (finished) return
    finished = true
    for (const t of timers) clearTimeout(t)
    clearInterval(poll)
    const legs = [...state.legs]
    const text = hooks.pendingText()
    state.draining = true
    for (const leg of legs) leg.drain(handOffSeconds)
    hooks.finish()
    log[legs.length > 0 || text > 0 ? 'warn' : 'info'](
      { event: 'drain_finished', why, legsCut: legs.length, textCut: text },
      why === 'drained' ? 'drain complete' : `drain cut short (${why})`
    )
    resolve()
  }

  state.leaving = true
  metrics.draining.set(1)
  log.info(
    { event: 'drain_started', signal, ...settings, legs: state.legs.size },
    `${signal}: draining; /readyz answers 503, still serving for ${settings.drainDelaySeconds} s`
  )
  const poll = setInterval(() => {
    if (state.draining && state.legs.size === 0 && hooks.pendingText() === 0) finish('drained')
  }, 50)
  later(settings.deadlineSeconds * 1000, () => finish('deadline'))
  later(settings.drainDelaySeconds * 1000, () => {
    state.draining = true
    hooks.stopAccepting()
    const legs = [...state.legs]
    log.info(
      { event: 'drain_closing', legs: legs.length, textInFlight: hooks.pendingText(), ...settings },
      `no longer accepting; closing ${legs.length} leg(s) over ${settings.legDrainSeconds} s`
    )
    const step = legs.length > 0 ? (settings.legDrainSeconds * 1000) / legs.length : 0
    legs.forEach((leg, i) => later(i * step, () => leg.drain(handOffSeconds)))
  })
  return { done, stopNow: why => finish(why) }
}
