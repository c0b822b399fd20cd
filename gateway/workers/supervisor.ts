import { fork, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { FleetKey } from '../auth/fleet-key'
import { NonceRecord } from '../auth/relay-token'
import { systemClock } from '../clock'
import { adminRefused } from '../server/admin'
import { announceReload, configView, type ReloadReport } from '../server/reload'
import { CLOSED_LABELS } from '../server/metric-labels'
import { claimPort, holdPort } from '../server/listen'
import type { Config } from '../config/types'
import { MemoryStore } from '../store/memory'
import type { Store } from '../store/port'
import type { Logger } from '../telemetry/log'
import { FinalScrape, lingerMs } from '../telemetry/final-scrape'
import { LogLimiter } from '../telemetry/log-limit'
import { Metrics } from '../telemetry/metrics'
import { EMPTY_SPACE } from '../telemetry/seeds'
import { aggregateMetrics } from './aggregate-metrics'
import { InstanceCounters, type MetricJson } from './instance-counters'
import { MainServices } from './main-services'
import { startMainListeners } from './main-admin'
import { WORKER_ENV, type ToMain, type ToWorker } from './protocol'

export interface SupervisorOptions {
  config: Config
  /** The arguments that start one worker: the same CLI with `serve --config FILE`. */
  workerArgs: string[]
  workers: number
  log: Logger
  instanceId: string
  /** The main process's own connection to the fleet's store (Redis), when the config has one. */
  fleetStore: Store | null
  /** Re-reads and validates the config file, as each worker does on a reload (the main process's limits follow it). */
  revalidate: () => Promise<{ ok: true; config: Config } | { ok: false }>
}

export interface Supervisor {
  readonly port: number
  readonly metricsPort: number
  readonly adminPort: number
  reload: (trigger: string) => Promise<unknown>
  /** The config in force: the start's, then each successful reload's. */
  config: () => Config
  /** The graceful drain on every worker; resolves when every worker has exited. */
  drain: (signal: string) => Promise<void>
  stopNow: (why: string) => void
}

interface Slot {
  index: number
  child: ChildProcess | null
  up: boolean
  pid: number
  adminPort: number
  startedAt: number
  /** Processes started in this slot so far: tells a gathered answer from an exited process's. */
  incarnation: number
  restarts: number
  /** Exits in a row that came soon after a start (the backoff grows with them). */
  quickExits: number
}

/**
 * `serve --workers N` (N > 1): the main process. It forks N worker processes (each a whole gateway whose
 * uWS apps listen on the same public and fleet ports: SO_REUSEPORT, the kernel spreads new connections),
 * hands each what it must not read from its environment (workers/protocol.ts `Hello`: the fleet key, the
 * internal admin token), serves what the workers share (workers/main-services.ts: the memory store and
 * the admission), the metrics and admin listeners (workers/main-admin.ts), fans signals out, and restarts
 * a worker that exits unexpectedly (with backoff, counted). Worker processes rather than threads: a
 * thread that ends with uWS sockets open aborts the whole process, so a crash would take every leg.
 */
export async function startSupervisor(opts: SupervisorOptions): Promise<Supervisor> {
  const { log } = opts
  // The config the main process counts limits and budgets by: the start's, then each successful reload's.
  let config = opts.config
  const startedToken = opts.config.admin.token ?? ''
  const metrics = new Metrics()
  const logLimit = LogLimiter.of(systemClock, () => log, config.log.flood)
  metrics.workers.set(opts.workers)
  const store = new MemoryStore(opts.instanceId)
  await store.start()
  const fleetKey = FleetKey.fromConfig(config) ?? FleetKey.random()
  const adminToken = randomBytes(32).toString('base64url')
  // Claimed before the workers share them (server/listen.ts): a port another process holds stops the start.
  const port = await claimPort(config.listen.host, config.listen.port)
  const holds = [await holdPort(config.listen.host, port)]
  const fleetPort =
    config.fleet.advertiseUrl !== undefined || config.fleet.port === 0
      ? await claimPort(config.fleet.host, config.fleet.port)
      : config.fleet.port
  if (fleetPort !== config.fleet.port || config.fleet.advertiseUrl !== undefined)
    holds.push(await holdPort(config.fleet.host, fleetPort))
  const letGo = (): void => {
    for (const release of holds) release()
  }
  const slots: Slot[] = Array.from({ length: opts.workers }, (_, index) => ({
    index,
    child: null,
    up: false,
    pid: 0,
    adminPort: 0,
    startedAt: 0,
    incarnation: 0,
    restarts: 0,
    quickExits: 0
  }))
  let stopping = false
  let leaving = false
  const asks = new Map<number, (m: ToMain) => void>()
  // Each worker's last-known counters, and those of exited worker processes: the instance's never go down.
  const counters = new InstanceCounters()
  // The restart counter of every worker at 0 from the start (and the main process's closed label sets).
  metrics.seed(CLOSED_LABELS, () => ({ ...EMPTY_SPACE, workers: slots.map(s => String(s.index)) }))
  const final = new FinalScrape()
  // The relay tokens the instance's workers took: one record, so a token is taken once whichever worker it reaches.
  const nonces = new NonceRecord()
  let nextAsk = 1

  // A worker can close its channel while it exits before this process sees it disconnect: the send then
  // fails (EPIPE) after `connected` said yes. With a callback the failure comes back here instead of as an
  // unhandled 'error' event that would end the main process (its drain and final scrape with it); the
  // worker's 'exit' handling covers what the message was for.
  const post = (slot: Slot, m: ToWorker): void => {
    if (slot.child?.connected) slot.child.send(m, ignoreSendError)
  }
  const everyUp = (): Slot[] => slots.filter(s => s.up)
  const syncAll = (): void => {
    const leader = everyUp()[0]?.index ?? -1
    const health = [...store.sharedHealth()]
    for (const s of everyUp())
      post(s, { t: 'sync', health, others: services.othersOf(s.index), leader: s.index === leader })
  }
  const services = new MainServices(
    store,
    () => config,
    opts.fleetStore,
    (w, m) => post(slots[w], m),
    syncAll
  )
  const syncTimer = setInterval(syncAll, Math.max(100, config.store.syncIntervalSeconds * 1000))
  syncTimer.unref()

  const onMessage = (slot: Slot, m: ToMain): void => {
    switch (m.t) {
      case 'final-metrics':
        // A drained worker's last counters: folded when it exits, part of every scrape until the main process exits.
        counters.gathered(slot.index, m.json as MetricJson[])
        return
      case 'metrics':
      case 'reloaded':
        asks.get(m.id)?.(m)
        asks.delete(m.id)
        return
      case 'admit':
      case 'place-take':
      case 'utterance-take':
      case 'place-release':
        return services.admissionAsk(slot.index, m)
      case 'relay-take':
        return post(slot, { t: 'relay-taken', id: m.id, taken: nonces.take(m.nonce, m.untilMs) })
      case 'ready':
      case 'failed':
        return
      default:
        return services.storeWrite(slot.index, m)
    }
  }

  let firstStart: ((err: Error | null) => void) | null = null
  const spawn = (slot: Slot): void => {
    const child = fork(opts.workerArgs[0], opts.workerArgs.slice(1), {
      serialization: 'advanced',
      env: { ...process.env, [WORKER_ENV]: String(slot.index) },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc']
    })
    slot.child = child
    slot.incarnation++
    slot.startedAt = Date.now()
    child.send({
      t: 'hello',
      group: opts.instanceId,
      workers: opts.workers,
      port,
      fleetPort,
      fleetKey: fleetKey.toHex(),
      fleetKeySource: fleetKey.source,
      adminToken
    } satisfies ToWorker)
    child.on('message', raw => {
      const m = raw as ToMain
      if (m.t === 'ready') {
        slot.up = true
        slot.pid = m.pid
        slot.adminPort = m.adminPort
        syncAll()
        log.info({ event: 'worker_started', worker: slot.index, pid: m.pid, port }, `worker ${slot.index} serving`)
        if (firstStart !== null && slots.every(s => s.up)) firstStart(null)
        return
      }
      if (m.t === 'failed') {
        if (firstStart !== null) firstStart(new Error(m.message))
        return
      }
      onMessage(slot, m)
    })
    child.on('exit', (code, signal) => exited(slot, child, code, signal))
  }

  const exited = (slot: Slot, child: ChildProcess, code: number | null, signal: string | null): void => {
    if (slot.child !== child) return
    counters.exited(slot.index)
    const wasUp = slot.up
    slot.up = false
    slot.child = null
    services.workerGone(slot.index)
    syncAll()
    if (stopping) return
    if (!wasUp && firstStart !== null) {
      firstStart(new Error(`worker ${slot.index} exited before serving (code ${code ?? signal})`))
      return
    }
    slot.restarts++
    metrics.workerRestarts.inc({ worker: String(slot.index) })
    const lived = Date.now() - slot.startedAt
    slot.quickExits = lived > 30_000 ? 0 : slot.quickExits + 1
    const delay = Math.min(10_000, 100 * 2 ** Math.max(0, slot.quickExits - 1))
    log.error(
      { event: 'worker_exited', worker: slot.index, pid: slot.pid, code, signal, restartInMs: delay },
      `worker ${slot.index} exited unexpectedly; restarting it (its legs reconnect to the other workers)`
    )
    setTimeout(() => {
      if (!stopping) spawn(slot)
    }, delay).unref()
  }

  const killAll = (): void => {
    stopping = true
    for (const s of slots) s.child?.kill('SIGKILL')
  }
  try {
    await new Promise<void>((resolve, reject) => {
      firstStart = err => {
        firstStart = null
        if (err === null) resolve()
        else reject(err)
      }
      for (const s of slots) spawn(s)
    })
  } catch (err) {
    letGo()
    killAll()
    clearInterval(syncTimer)
    throw err
  }
  // Every worker listens on the ports now: the main process lets them go.
  letGo()

  /** Every worker that is up, asked at once; one that has not answered within `ms` counts as no answer. */
  const askAll = async (make: (id: number) => ToWorker, ms = 10_000): Promise<{ worker: number; m: ToMain | null }[]> =>
    await Promise.all(
      everyUp().map(
        async s =>
          await new Promise<{ worker: number; m: ToMain | null }>(resolve => {
            const id = nextAsk++
            const timer = setTimeout(() => {
              asks.delete(id)
              resolve({ worker: s.index, m: null })
            }, ms)
            asks.set(id, m => {
              clearTimeout(timer)
              resolve({ worker: s.index, m })
            })
            post(s, make(id))
          })
      )
    )

  /**
   * Every running worker's metrics: its answer (kept as its last-known), or its last-known when it did not
   * answer in time; none from a process that exited meanwhile (its counters are folded, workers/instance-counters.ts).
   */
  const gather = async (): Promise<{ worker: number; json: MetricJson[] }[]> => {
    const asked = new Map(everyUp().map(s => [s.index, s.incarnation]))
    // A scrape is answered within about 2 s whatever a worker does (Prometheus gives up at its scrape timeout,
    // 10 s by default): a worker that is busy, or frozen, is counted with its last-known counters.
    const answers = await askAll(id => ({ t: 'metrics', id }), METRICS_ANSWER_MS)
    const lists: { worker: number; json: MetricJson[] }[] = []
    for (const a of answers) {
      const slot = slots[a.worker]
      if (!slot.up || slot.incarnation !== asked.get(a.worker)) continue
      if (a.m?.t === 'metrics') counters.gathered(a.worker, a.m.json as MetricJson[])
      const json = counters.lastKnown(a.worker)
      if (json !== undefined) lists.push({ worker: a.worker, json })
    }
    return lists
  }

  const reload = async (trigger: string): Promise<{ ok: boolean; reports: { worker: number; report: unknown }[] }> => {
    const answers = await askAll(id => ({ t: 'reload', id, trigger }))
    const reports = answers.map(a => ({ worker: a.worker, report: a.m?.t === 'reloaded' ? a.m.report : null }))
    const ok = answers.every(a => a.m?.t === 'reloaded' && a.m.ok)
    if (ok) {
      const again = await opts.revalidate()
      if (again.ok) config = again.config
    }
    announceReload({ log, metrics }, trigger, instanceReport(ok, reports))
    return { ok, reports }
  }

  let listeners: Awaited<ReturnType<typeof startMainListeners>>
  try {
    listeners = await startMainListeners(
      {
        log,
        leaving: () => leaving,
        workerAdmins: () => everyUp().map(s => ({ worker: s.index, adminPort: s.adminPort })),
        internalToken: adminToken,
        // The admin API's token as the gateway started: a reload never changes who may use it (restartRequired).
        adminToken: () => startedToken,
        config: () => configView(opts.config, config),
        refused: adminRefused({ log, logLimit, metrics }),
        logLimit,
        calls: opts.fleetStore ?? store,
        metrics: async () => await aggregateMetrics(await gather(), metrics, counters.folded(), slots.length),
        final,
        reload,
        describe: () => ({
          workers: slots.map(s => ({ worker: s.index, up: s.up, pid: s.pid, restarts: s.restarts }))
        }),
        instanceId: opts.instanceId
      },
      config
    )
  } catch (err) {
    killAll()
    clearInterval(syncTimer)
    throw err
  }
  log.info(
    {
      event: 'listening',
      instance: opts.instanceId,
      host: config.listen.host,
      port,
      metricsPort: listeners.metricsPort,
      adminPort: listeners.adminPort,
      fleetPort,
      workers: opts.workers
    },
    `gateway listening with ${opts.workers} worker processes`
  )

  let drained: Promise<void> | null = null
  return {
    port,
    metricsPort: listeners.metricsPort,
    adminPort: listeners.adminPort,
    reload,
    config: () => config,
    drain: signal => {
      drained ??= (async () => {
        const signalledAt = performance.now()
        leaving = true
        metrics.draining.set(1)
        stopping = true
        const gone = slots
          .filter(s => s.child !== null)
          .map(s => new Promise<void>(resolve => s.child!.once('exit', () => resolve())))
        for (const s of slots) post(s, { t: 'drain', signal })
        let why = 'drained'
        const cut = setTimeout(
          () => {
            why = 'deadline'
            killAll()
          },
          (config.shutdown.deadlineSeconds + 5) * 1000
        )
        await Promise.all(gone)
        clearTimeout(cut)
        clearInterval(syncTimer)
        // The gateway's drain is over when every worker's is (each logs its own, with its `worker`).
        log.info({ event: 'drain_finished', why, workers: slots.length }, 'drain complete: every worker has exited')
        // The workers' final counters (`final-metrics`) stay scrapeable for one more scrape.
        final.finished()
        const maxMs = lingerMs(config.shutdown, performance.now() - signalledAt)
        const how = await final.wait(maxMs)
        if (maxMs > 0) log.info({ event: 'metrics_final', how, lingerMs: Math.round(maxMs) }, `final metrics: ${how}`)
        listeners.close()
        await store.close()
        await opts.fleetStore?.close()
      })()
      return drained
    },
    stopNow: why => {
      stopping = true
      final.cancel()
      for (const s of slots) post(s, { t: 'stop', why })
    }
  }
}

/** The gateway's reload as its workers report it: the first refusal, or the first worker's report (one config file). */
function instanceReport(ok: boolean, reports: { worker: number; report: unknown }[]): ReloadReport {
  const all = reports.map(r => r.report as ReloadReport | null)
  const first = ok ? all[0] : all.find(r => r !== null && !r.ok)
  if (first != null) return first
  const problems = ['a worker did not answer the reload']
  return { ok: false, problems, added: [], changed: [], removed: [], restartRequired: [] }
}

/** How long a scrape waits for a worker's own metrics before it takes that worker's last-known ones. */
const METRICS_ANSWER_MS = 2000

/** `ChildProcess.send`'s callback for a worker that may be exiting: the failed message is not needed. */
function ignoreSendError(_err: Error | null): void {}
