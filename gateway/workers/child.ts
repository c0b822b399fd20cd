import type { RunningServer } from '../server/app'
import type { WorkerStore } from '../store/worker-store'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import type { Channel } from './protocol'
import type { WorkerRegistry } from './remote-session'

export interface WorkerRunning {
  server: RunningServer
  metrics: Metrics
  log: Logger
  close: () => Promise<void>
}

/**
 * One worker process of `serve --workers N`, once its gateway serves: reports ready, answers the main
 * process (metrics, reload, drain, stop) and feeds its store and session directory. Stop signals reach
 * the whole process group from a terminal; the worker leaves them to the main process, which fans them
 * out. When the main process is gone the worker stops at once.
 */
export function runAsWorker(
  running: WorkerRunning,
  parts: { store: WorkerStore; sessions: WorkerRegistry; channel: Channel }
): void {
  const { server, log } = running
  const { store, sessions, channel } = parts
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGQUIT', 'SIGHUP'] as const)
    process.on(signal, () => log.debug({ event: 'signal_left_to_main', signal }, `${signal}: left to the main process`))
  let exiting = false
  const exit = (): void => {
    if (exiting) return
    exiting = true
    running
      .close()
      .then(
        () => log.flush(),
        () => {}
      )
      .finally(() => setTimeout(() => process.exit(0), 100).unref())
  }
  process.on('disconnect', () => {
    log.warn({ event: 'main_process_gone' }, 'the main process is gone: stopping at once')
    server.stopNow('main process gone')
    exit()
  })
  channel.on(m => {
    switch (m.t) {
      case 'sync':
        return store.synced(m.health, m.others, m.leader)
      case 'aff':
        return store.answered(m.id, m.affinity)
      case 'store-answer':
        return store.storeAnswered(m.id, m.value, m.error)
      case 'dir':
        return sessions.directoryAll(m.entries)
      case 'dir-add':
        return sessions.directoryAdd(m.key, m.worker, m.caller)
      case 'dir-del':
        return sessions.directoryDel(m.key, m.worker)
      case 'relay':
        return sessions.linked(m.from, m.link, m.m)
      case 'worker-gone':
        return sessions.workerGone(m.worker)
      case 'metrics':
        running.metrics.registry.getMetricsAsJSON().then(
          json => channel.send({ t: 'metrics', id: m.id, json }),
          () => channel.send({ t: 'metrics', id: m.id, json: [] })
        )
        return
      case 'reload':
        server.reload(m.trigger).then(
          report => channel.send({ t: 'reloaded', id: m.id, ok: report.ok, report }),
          (err: unknown) =>
            channel.send({
              t: 'reloaded',
              id: m.id,
              ok: false,
              report: { ok: false, problems: [(err as Error).message] }
            })
        )
        return
      case 'drain':
        server.drain(m.signal).then(exit, exit)
        return
      case 'stop':
        server.stopNow(m.why)
        return
    }
  })
  channel.send({ t: 'ready', port: server.port, adminPort: server.adminPort, pid: process.pid })
}
