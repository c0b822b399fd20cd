import type { RunningServer } from '../server/app'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import type { AdmissionClient } from './admission-client'
import type { Channel, Hello } from './protocol'
import type { RelayNonceClient } from './relay-nonces'
import type { WorkerStore } from './worker-store'

export interface WorkerRunning {
  server: RunningServer
  metrics: Metrics
  log: Logger
  close: () => Promise<void>
}

/** The worker's first message from its main process: what it must know before it serves. */
export function awaitHello(channel: Channel): Promise<Hello> {
  return new Promise(resolve => {
    let done = false
    channel.on(m => {
      if (m.t !== 'hello' || done) return
      done = true
      resolve(m)
    })
  })
}

/**
 * One worker process of `serve --workers N`, once its gateway serves: reports ready, answers the main
 * process (metrics, reload, drain, stop) and routes its answers to the store and the admission. Stop
 * signals reach the whole process group from a terminal; the worker leaves them to the main process,
 * which fans them out. When the main process is gone the worker stops at once.
 */
export function runAsWorker(
  running: WorkerRunning,
  parts: { store: WorkerStore | null; admission: AdmissionClient; nonces: RelayNonceClient; channel: Channel }
): void {
  const { server, log } = running
  const { store, admission, nonces, channel } = parts
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
    admission.close()
    nonces.close()
    server.stopNow('main process gone')
    exit()
  })
  channel.on(m => {
    switch (m.t) {
      case 'hello':
        return
      case 'sync':
        return store?.synced(m.health, m.others, m.leader)
      case 'store-answer':
        return store?.answered(m.id, m.value, m.error)
      case 'admitted':
        return admission.admitted(m.id, m.address, m.verdict)
      case 'slot-taken':
        return admission.taken(m.id, m.slot, m.limit)
      case 'utterance-taken':
        return admission.utteranceTaken(m.id, m.taken)
      case 'relay-taken':
        return nonces.taken(m.id, m.taken)
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
        // Drained: the last counters go to the main process, which serves them until its final scrape.
        server
          .drain(m.signal)
          .then(async () => await running.metrics.registry.getMetricsAsJSON())
          .then(json => channel.send({ t: 'final-metrics', json }))
          .then(exit, exit)
        return
      case 'stop':
        server.stopNow(m.why)
        return
    }
  })
  channel.send({ t: 'ready', port: server.port, adminPort: server.adminPort, pid: process.pid })
}
