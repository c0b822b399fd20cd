import type { Logger } from '../telemetry/log'

/**
 * Signals whose default action would end the process without a word (and every call with it): each
 * is logged and ignored. Not listed: SIGUSR1 (Node's inspector), SIGPROF (profilers), SIGPIPE (Node
 * ignores it), SIGBUS/SIGFPE/SIGSEGV/SIGILL (a JS handler cannot recover from them), SIGKILL/SIGSTOP
 * (cannot be caught).
 */
const IGNORED: readonly NodeJS.Signals[] = [
  'SIGUSR2',
  'SIGALRM',
  'SIGVTALRM',
  'SIGIO',
  'SIGPOLL',
  'SIGPWR',
  'SIGXCPU',
  'SIGXFSZ',
  'SIGSTKFLT',
  'SIGTRAP',
  'SIGSYS'
]

export interface SignalActions {
  log: Logger
  /** SIGHUP. */
  reload: (trigger: string) => Promise<unknown>
  /** SIGTERM, SIGINT, SIGQUIT: the graceful drain. */
  drain: (signal: string) => void
  /** A second stop signal during the drain: stop at once. */
  stopNow: (signal: string) => void
}

/** Install the serve command's signal handling; returns a function that removes it. */
export function installSignals(actions: SignalActions): () => void {
  const { log } = actions
  let stopping = false
  const handlers = new Map<NodeJS.Signals, () => void>()
  const on = (signal: NodeJS.Signals, fn: () => void): void => {
    try {
      process.on(signal, fn)
      handlers.set(signal, fn)
    } catch {
      // Not a signal on this platform.
    }
  }
  on('SIGHUP', () => {
    log.info({ event: 'signal', signal: 'SIGHUP' }, 'SIGHUP: reloading the config')
    actions.reload('SIGHUP').catch(err => log.error({ event: 'config_reload_bug', err }, 'config reload failed'))
  })
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGQUIT'] as const)
    on(signal, () => {
      if (stopping) {
        log.warn({ event: 'signal', signal }, `${signal} during the drain: stopping at once`)
        actions.stopNow(signal)
        return
      }
      stopping = true
      actions.drain(signal)
    })
  for (const signal of IGNORED)
    on(signal, () => log.warn({ event: 'signal_ignored', signal }, `${signal} received and ignored`))
  return () => {
    for (const [signal, fn] of handlers) process.off(signal, fn)
  }
}
