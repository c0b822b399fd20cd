import { randomBytes } from 'node:crypto'
import { FleetKey } from '../auth/fleet-key'
import { NonceRecord } from '../auth/relay-token'
import { systemClock } from '../clock'
import { adminRefused } from '../server/admin'
import { announceReload, configView, type ReloadReport } from '../server/reload'
import { CLOSED_LABELS } from '../server/metric-labels'
import { claimPort, reservePort } from '../server/listen'
import type { Config } from '../config/types'
import { MemoryStore } from '../store/memory'
import type { Store } from '../store/port'
import type { Logger } from '../telemetry/log'
import { FinalScrape } from '../telemetry/final-scrape'
import { LogLimiter } from '../telemetry/log-limit'
import { Metrics } from '../telemetry/metrics'
import { EMPTY_SPACE } from '../telemetry/seeds'
import { aggregateMetrics } from './aggregate-metrics'
import { InstanceCounters, type MetricJson } from './instance-counters'
import { MainServices } from './main-services'
import { startMainListeners } from './main-admin'
import type { ToMain } from './protocol'
import { SupervisorLifecycle } from './supervisor-lifecycle'
import { SLOT_UP } from './supervisor-states'
import { type Slot, WorkerSlots } from './worker-slots'

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

/** The ports the workers share, claimed and held by the main process until every worker listens there. */
interface Claimed {
  port: number
  fleetPort: number
  /** Let the held ports go (once every worker listens, or the start failed). */
  letGo: () => void
}

/** Claimed before the workers share them (server/listen.ts): a port another process has stops the start. */
async function claimPorts(config: Config): Promise<Claimed> {
  const port = await claimPort(config.listen.host, config.listen.port)
  const reserved = [await reservePort(config.listen.host, port)]
  const fleetPort =
    config.fleet.advertiseUrl !== undefined || config.fleet.port === 0
      ? await claimPort(config.fleet.host, config.fleet.port)
      : config.fleet.port
  if (fleetPort !== config.fleet.port || config.fleet.advertiseUrl !== undefined)
    reserved.push(await reservePort(config.fleet.host, fleetPort))
  return {
    port,
    fleetPort,
    letGo: () => {
      for (const release of reserved) release()
    }
  }
}

/**
 * The main process's parts: the workers' slots and their lifecycle, what the workers share (the memory
 * store, the admission, the relay tokens taken, the instance counters) and the config in force.
 */
class MainProcess {
  /** The config the main process counts limits and budgets by: the start's, then each successful reload's. */
  config: Config
  readonly metrics = new Metrics()
  readonly logLimit: LogLimiter
  readonly adminToken = randomBytes(32).toString('base64url')
  /** Each worker's last-known counters, and those of exited worker processes: the instance's never go down. */
  readonly counters = new InstanceCounters()
  /** The relay tokens the instance's workers took: one record, so a token is taken once whichever worker it reaches. */
  readonly nonces = new NonceRecord()
  readonly final = new FinalScrape()
  readonly slots: WorkerSlots
  readonly services: MainServices
  readonly lifecycle: SupervisorLifecycle
  private readonly syncTimer: NodeJS.Timeout

  constructor(
    private readonly opts: SupervisorOptions,
    readonly store: MemoryStore,
    claimed: Claimed
  ) {
    const { log } = opts
    this.config = opts.config
    this.logLimit = LogLimiter.of(systemClock, () => log, opts.config.log.flood)
    this.metrics.workers.set(opts.workers)
    const fleetKey = FleetKey.fromConfig(opts.config) ?? FleetKey.random()
    this.slots = new WorkerSlots({
      workerArgs: opts.workerArgs,
      workers: opts.workers,
      log,
      metrics: this.metrics,
      counters: this.counters,
      hello: {
        t: 'hello',
        group: opts.instanceId,
        workers: opts.workers,
        port: claimed.port,
        fleetPort: claimed.fleetPort,
        fleetKey: fleetKey.toHex(),
        fleetKeySource: fleetKey.source,
        adminToken: this.adminToken
      },
      stage: () => this.lifecycle.stage,
      onMessage: (slot, m) => this.onMessage(slot, m),
      sync: () => this.syncAll(),
      onReady: () => this.lifecycle.ready(),
      onGone: slot => this.services.workerGone(slot.index),
      startFailed: err => this.lifecycle.startFailed(err)
    })
    this.services = new MainServices(
      this.store,
      () => this.config,
      opts.fleetStore,
      (w, m) => this.slots.post(this.slots.slots[w], m),
      () => this.syncAll()
    )
    // The restart counter of every worker at 0 from the start (and the main process's closed label sets).
    this.metrics.seed(CLOSED_LABELS, () => ({ ...EMPTY_SPACE, workers: this.slots.slots.map(s => String(s.index)) }))
    this.syncTimer = setInterval(() => this.syncAll(), Math.max(100, opts.config.store.syncIntervalSeconds * 1000))
    this.syncTimer.unref()
    this.lifecycle = new SupervisorLifecycle({
      log,
      metrics: this.metrics,
      workers: {
        startAll: () => this.slots.startAll(),
        allUp: () => this.slots.allUp(),
        killAll: () => this.slots.killAll(),
        postAll: m => this.slots.postAll(m),
        exits: () => this.slots.exits(),
        count: opts.workers
      },
      final: this.final,
      shutdown: () => this.config.shutdown,
      stopSync: () => this.stopSync(),
      clock: systemClock
    })
  }

  stopSync(): void {
    clearInterval(this.syncTimer)
  }

  /** Every worker that is up learns the shared health, the others' stream counts, and whether it leads. */
  syncAll(): void {
    const up = this.slots.up()
    const leader = up[0]?.index ?? -1
    const health = [...this.store.sharedHealth()]
    for (const s of up)
      this.slots.post(s, { t: 'sync', health, others: this.services.othersOf(s.index), leader: s.index === leader })
  }

  private onMessage(slot: Slot, m: ToMain): void {
    switch (m.t) {
      case 'final-metrics':
        // A drained worker's last counters: folded when it exits, part of every scrape until the main process exits.
        this.counters.gathered(slot.index, m.json as MetricJson[])
        return
      case 'admit':
      case 'slot-take':
      case 'utterance-take':
      case 'slot-release':
        return this.services.admissionAsk(slot.index, m)
      case 'relay-take':
        return this.slots.post(slot, { t: 'relay-taken', id: m.id, taken: this.nonces.take(m.nonce, m.untilMs) })
      case 'ready':
      case 'failed':
      case 'metrics':
      case 'reloaded':
        // Handled by the slots (workers/worker-slots.ts).
        return
      default:
        return this.services.storeWrite(slot.index, m)
    }
  }

  /**
   * Every running worker's metrics: its answer (kept as its last-known), or its last-known when it did not
   * answer in time; none from a process that exited meanwhile (its counters are folded, workers/instance-counters.ts).
   */
  async gather(): Promise<{ worker: number; json: MetricJson[] }[]> {
    const asked = new Map(this.slots.up().map(s => [s.index, s.incarnation]))
    // A scrape is answered within about 2 s whatever a worker does (Prometheus gives up at its scrape timeout,
    // 10 s by default): a worker that is busy, or frozen, is counted with its last-known counters.
    const answers = await this.slots.askAll(id => ({ t: 'metrics', id }), METRICS_ANSWER_MS)
    const lists: { worker: number; json: MetricJson[] }[] = []
    for (const a of answers) {
      const slot = this.slots.slots[a.worker]
      if (slot.state.stage !== 'up' || slot.incarnation !== asked.get(a.worker)) continue
      if (a.m?.t === 'metrics') this.counters.gathered(a.worker, a.m.json as MetricJson[])
      const json = this.counters.lastKnown(a.worker)
      if (json !== undefined) lists.push({ worker: a.worker, json })
    }
    return lists
  }

  async reload(trigger: string): Promise<{ ok: boolean; reports: { worker: number; report: unknown }[] }> {
    const answers = await this.slots.askAll(id => ({ t: 'reload', id, trigger }))
    const reports = answers.map(a => ({ worker: a.worker, report: a.m?.t === 'reloaded' ? a.m.report : null }))
    const ok = answers.every(a => a.m?.t === 'reloaded' && a.m.ok)
    if (ok) {
      const again = await this.opts.revalidate()
      if (again.ok) this.config = again.config
    }
    announceReload({ log: this.opts.log, metrics: this.metrics }, trigger, instanceReport(ok, reports))
    return { ok, reports }
  }

  /** The main process's metrics and admin listeners (workers/main-admin.ts). */
  async listen(): Promise<MainListeners> {
    const { opts, slots } = this
    // The admin API's token as the gateway started: a reload never changes who may use it (restartRequired).
    const startedToken = opts.config.admin.token ?? ''
    return await startMainListeners(
      {
        log: opts.log,
        leaving: () => this.lifecycle.leaving,
        workerAdmins: () => slots.admins(),
        internalToken: this.adminToken,
        adminToken: () => startedToken,
        config: () => configView(opts.config, this.config),
        refused: adminRefused({ log: opts.log, logLimit: this.logLimit, metrics: this.metrics }),
        logLimit: this.logLimit,
        calls: opts.fleetStore ?? this.store,
        metrics: async () =>
          await aggregateMetrics(await this.gather(), this.metrics, this.counters.folded(), slots.slots.length),
        final: this.final,
        reload: trigger => this.reload(trigger),
        describe: () => ({
          workers: slots.slots.map(s => ({
            worker: s.index,
            up: SLOT_UP[s.state.stage],
            pid: s.pid,
            restarts: s.restarts
          }))
        }),
        instanceId: opts.instanceId
      },
      this.config
    )
  }
}

type MainListeners = Awaited<ReturnType<typeof startMainListeners>>

/**
 * `serve --workers N` (N > 1): the main process. It forks N worker processes (each a whole gateway whose
 * uWS apps listen on the same public and fleet ports: SO_REUSEPORT, the kernel spreads new connections),
 * hands each what it must not read from its environment (workers/protocol.ts `Hello`: the fleet key, the
 * internal admin token), serves what the workers share (workers/main-services.ts: the memory store and
 * the admission), the metrics and admin listeners (workers/main-admin.ts), fans signals out, and restarts
 * a worker that exits unexpectedly (with backoff, counted; workers/worker-slots.ts). Its stages are
 * workers/supervisor-lifecycle.ts's. Worker processes rather than threads: a thread that ends with uWS
 * sockets open aborts the whole process, so a crash would take every leg.
 */
export async function startSupervisor(opts: SupervisorOptions): Promise<Supervisor> {
  const { log } = opts
  const store = new MemoryStore(opts.instanceId)
  await store.start()
  const claimed = await claimPorts(opts.config)
  const main = new MainProcess(opts, store, claimed)
  try {
    await main.lifecycle.start()
  } catch (err) {
    claimed.letGo()
    main.stopSync()
    throw err
  }
  // Every worker listens on the ports now: the main process lets them go.
  claimed.letGo()
  let listeners: MainListeners
  try {
    listeners = await main.listen()
  } catch (err) {
    main.lifecycle.startFailed(err as Error)
    main.stopSync()
    throw err
  }
  log.info(
    {
      event: 'listening',
      instance: opts.instanceId,
      host: main.config.listen.host,
      port: claimed.port,
      metricsPort: listeners.metricsPort,
      adminPort: listeners.adminPort,
      fleetPort: claimed.fleetPort,
      workers: opts.workers
    },
    `gateway listening with ${opts.workers} worker processes`
  )
  const close = async (): Promise<void> => {
    listeners.close()
    await main.store.close()
    await opts.fleetStore?.close()
  }
  return {
    port: claimed.port,
    metricsPort: listeners.metricsPort,
    adminPort: listeners.adminPort,
    reload: trigger => main.reload(trigger),
    config: () => main.config,
    drain: signal => main.lifecycle.drain(signal, close),
    stopNow: why => main.lifecycle.stopNow(why)
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
