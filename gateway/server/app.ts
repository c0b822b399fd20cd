import { CallBook } from '../audio/leg/call-book'
import { type OwnerProcess, Placement } from '../audio/placement/placement'
import { SessionRegistry } from '../audio/session/registry'
import { type Admission, LocalAdmission } from '../auth/admission'
import { FailureBudget } from '../auth/failure-budget'
import { FleetKey } from '../auth/fleet-key'
import { LegLimits } from '../auth/leg-limits'
import { Quotas } from '../auth/quotas'
import { RelayTokens, type UsedNonces } from '../auth/relay-token'
import { systemClock } from '../clock'
import type { Config } from '../config/types'
import { redactAlso, type Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import { FinalScrape, lingerMs } from '../telemetry/final-scrape'
import { LogLimiter } from '../telemetry/log-limit'
import { type Tracing, untraced } from '../telemetry/tracing'
import { isQuotaStore, type Store } from '../store/port'
import { Rebalancer, workerShare } from '../upstream/rebalance'
import { Generations } from './generations'
import { ServerLifecycle } from './lifecycle'
import { type Apps, buildApps, closeApp, type Listening, openListeners } from './listeners'
import { CLOSED_LABELS, labelSpaceOf } from './metric-labels'
import { reloader, restartRequired, routeChanges, type ReloadReport, type Revalidate } from './reload'
import { sweepRevokedLegs } from './revoked-legs'
import type { ServerState } from './state'
import { TextHooks } from './text-hooks'
import type { TokenAuth } from '../auth/token-auth'
import { startTokenAuth } from './token-routes'
import { checkUwsBuild } from './uws-build'

export interface RunningServer {
  readonly state: ServerState
  readonly port: number
  /** The metrics listener's port (0: none; a worker's metrics go to its main process). */
  readonly metricsPort: number
  readonly adminPort: number
  /** Re-read and validate the config (as `check` does) and apply it to new legs and requests. */
  reload: (trigger: string) => Promise<ReloadReport>
  /** The graceful drain (shutdown.*); resolves when everything is closed. Idempotent. */
  drain: (signal: string) => Promise<void>
  /** Cut a drain short (a second signal), or close at once when none runs. */
  stopNow: (why: string) => void
  /** Stop accepting, end every live leg with SHUTTING_DOWN (1012), close the listeners. */
  close: () => void
  /**
   * After a drain: the metrics listener stays until it has been scraped once more (the final counters
   * of the drained legs reach Prometheus) or shutdown.metricsLingerSeconds has passed, never past the
   * drain deadline; then it closes (telemetry/final-scrape.ts).
   */
  linger: () => Promise<void>
}

export interface ServerOptions {
  config: Config
  log: Logger
  metrics: Metrics
  store: Store
  version: string
  /** Re-reads and validates the config file as `check` does; without it a reload is refused. */
  revalidate?: Revalidate
  /** Wall clock (epoch ms) of token issuing, expiry and revocation; default Date.now (tests pass their own). */
  nowMs?: () => number
  /** A worker of `serve --workers N`: what its main process handed it (workers/child.ts). */
  worker?: WorkerParts
  /** Where utterance and leg spans start (telemetry/tracing.ts); default: no spans, the trace context passed on. */
  tracing?: Tracing
}

/**
 * What a worker of `serve --workers N` gets from its main process: its group (the main process's instance
 * id), the fleet key, the admission the main process counts for every worker, the token of its internal
 * admin listener, and the fleet listener's port they all share.
 */
export interface WorkerParts {
  group: string
  /** Its index in the group (`worker` in its log lines and call records). */
  index: number
  /** How many workers the group has (each writes its share of `log.flood.lines`, moves its share of rebalanced calls). */
  workers: number
  fleetKey: FleetKey
  admission: Admission
  /** The internal admin listener (127.0.0.1, ephemeral) answers only requests with this bearer token. */
  adminToken: string
  /** The public port its main process claimed (the config's `listen.port` may be 0); they all share it. */
  port: number
  fleetPort: number
  /** The instance's record of the relay tokens taken (its main process keeps it for every worker). */
  usedNonces: UsedNonces
}

const noRevalidate: Revalidate = async () => ({
  ok: false,
  problems: [{ file: '', pointer: '', message: 'this server was started without a config file to re-read' }]
})

/** What a server is made of before it listens: its state, generations, text hooks, token auth and upkeep. */
interface Core {
  state: ServerState
  gens: Generations
  texts: TextHooks
  tokens: TokenAuth | undefined
  /** Where this process is reached by the others that share its store: filled in once it listens. */
  owner: { -readonly [k in keyof OwnerProcess]: OwnerProcess[k] }
  reload: (trigger: string) => Promise<ReloadReport>
  /** Stop the background work: probes, the revoked-leg sweep, rebalancing, stream reports. */
  stopUpkeep: () => void
  lifecycle: ServerLifecycle
}

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const core = await buildCore(opts)
  const { state, owner } = core
  const { config, log, store, worker } = opts
  // A scrape after the drain finished: the final counters have been read (see `linger`).
  const final = new FinalScrape()
  const apps = buildApps({ state, config, texts: core.texts, tokens: core.tokens, reload: core.reload, final, worker })
  const listening = await openListeners(apps, { config, worker, owner })
  log.info(
    {
      event: 'listening',
      instance: store.instanceId,
      host: config.listen.host,
      port: listening.port,
      metricsPort: listening.metricsPort,
      adminPort: listening.adminPort,
      fleet: owner.url || undefined,
      fleetPort: listening.fleetPort || undefined,
      tls: config.listen.tls !== null,
      routes: [...core.gens.current.routes.keys()]
    },
    'gateway listening'
  )
  return running(core, apps, listening, final)
}

/** The running server: its lifecycle (server/lifecycle.ts) over what it opened. */
function running(core: Core, apps: Apps, listening: Listening, final: FinalScrape): RunningServer {
  const { state, lifecycle } = core
  const { log } = state
  lifecycle.listening({
    // The fleet listeners stay open while the legs already placed here may still be joined by a relay.
    stopAccepting: () => listening.public.close(),
    finish: () => closeAll(core, apps, listening, final)
  })
  const closeScrape = (): void => {
    if (listening.scrape === null || apps.scrape === null || !listening.scrape.open) return
    listening.scrape.close()
    closeApp(apps.scrape)
  }
  return {
    state,
    port: listening.port,
    metricsPort: listening.metricsPort,
    adminPort: listening.adminPort,
    reload: core.reload,
    drain: signal => lifecycle.drain(signal),
    stopNow: why => {
      final.cancel()
      lifecycle.stopNow(why)
    },
    close: () => {
      lifecycle.close()
      closeScrape()
    },
    linger: async () => {
      const signalledAt = lifecycle.signalledAt()
      const maxMs = signalledAt === null ? 0 : lingerMs(state.config.shutdown, performance.now() - signalledAt)
      if (listening.scrape?.open === true) {
        const how = await final.wait(maxMs)
        if (maxMs > 0) log.info({ event: 'metrics_final', how, lingerMs: Math.round(maxMs) }, `final metrics: ${how}`)
      }
      closeScrape()
    }
  }
}

/** The server's state and parts, built from the config it starts with; its background work started. */
async function buildCore(opts: ServerOptions): Promise<Core> {
  const { config, log, metrics, store, worker } = opts
  const build = checkUwsBuild(config, log, metrics, opts.version)
  // Token auth is built once, from the config the process started with (key files are read here); a
  // change to `tokens` takes effect at the next restart (reload says so in restartRequired). So is the
  // fleet key (a reload keeps the key the process started with).
  const tokens = await startTokenAuth(config, opts.nowMs, store)
  const fleetKey = worker?.fleetKey ?? FleetKey.fromConfig(config) ?? FleetKey.random()
  const logLimit = LogLimiter.of(systemClock, () => log, config.log.flood, worker?.workers)
  const genDeps = { store, metrics, log, verifier: tokens?.verifier, logLimit }
  const gens = new Generations(config, genDeps)
  const owner: Core['owner'] = {
    instance: store.instanceId,
    group: worker?.group ?? store.instanceId,
    url: '',
    local: ''
  }
  const placement = new Placement(store, store.shared ? owner : null, systemClock)
  const sessions = new SessionRegistry(placement)
  const lifecycle = new ServerLifecycle(
    {
      log,
      metrics,
      settings: () => ({
        shutdown: state.config.shutdown,
        reattachGraceSeconds: state.config.audio.reattachGraceSeconds
      }),
      legs: () => state.legs,
      pendingText: () => texts.pending
    },
    systemClock
  )
  const state: ServerState = {
    config,
    routes: gens.current.routes,
    defaultRoute: gens.current.defaultRoute,
    metrics,
    log,
    get draining() {
      return lifecycle.refusesNewWork
    },
    get leaving() {
      return lifecycle.leaving
    },
    legs: new Set(),
    uwsNative: build.native,
    store,
    sessions,
    placement,
    admission: worker?.admission ?? localAdmission(() => state.config, store),
    fleetKey,
    relayTokens: new RelayTokens(fleetKey, Date.now, worker?.usedNonces),
    calls: new CallBook(
      store,
      systemClock,
      { instance: owner.group, process: store.instanceId, worker: worker?.index ?? null },
      () => state.legs
    ),
    logLimit,
    tracing: opts.tracing ?? untraced
  }
  sessions.onGone = s => state.calls.sessionGone(s)
  state.calls.start()
  log.info({ event: 'fleet_key', source: fleetKey.source }, `fleet key from ${fleetKey.source}`)
  const stopUpkeep = startUpkeep(state, gens, opts)
  const texts = new TextHooks(gens.current.text, config.text)
  const apply = (next: Config): Omit<ReloadReport, 'ok' | 'problems'> => applyConfig(state, gens, texts, next)
  // A worker's reload is counted and logged once for the gateway, by its main process.
  const reload = reloader(opts.revalidate ?? noRevalidate, apply, genDeps, worker === undefined)
  return { state, gens, texts, tokens, owner, reload, stopUpkeep, lifecycle }
}

/** A reload's new config, swapped in for new legs and requests: returns what changed. */
function applyConfig(
  state: ServerState,
  gens: Generations,
  texts: TextHooks,
  next: Config
): Omit<ReloadReport, 'ok' | 'problems'> {
  const { log } = state
  const prev = gens.swap(next)
  const gen = gens.current
  texts.replace(gen.text, next.text)
  state.config = next
  state.routes = gen.routes
  state.defaultRoute = gen.defaultRoute
  log.level = next.log.level
  redactAlso(log, next.secrets)
  for (const w of next.warnings) log.warn({ event: 'config_warning' }, w)
  return { ...routeChanges(prev, gen), restartRequired: restartRequired(prev, gen) }
}

/** The failure budget, leg limits and quotas of a process alone (a worker's are its main process's). */
function localAdmission(config: () => Config, store: Store): Admission {
  return new LocalAdmission(
    new FailureBudget(
      () => config().auth,
      systemClock,
      store.shared ? (address, windowMs, nowMs) => store.countFailure(address, windowMs, nowMs) : undefined
    ),
    new LegLimits(() => config().limits),
    new Quotas(config, systemClock, store.shared && isQuotaStore(store) ? store : undefined)
  )
}

/**
 * The server's background work over its generations' pools: replica health and store metrics, probed-down
 * replicas, stream reports to the fleet, the revoked-leg sweep, rebalancing. Returns its stop.
 */
function startUpkeep(state: ServerState, gens: Generations, opts: ServerOptions): () => void {
  const { config, metrics, store, worker } = opts
  metrics.replicaHealth = () => gens.replicaHealth()
  metrics.storeIsUp = () => store.up()
  // Every series the gateway can count exists at 0 from now on, and a reload's new routes' from its swap.
  metrics.seed(CLOSED_LABELS, () =>
    labelSpaceOf(gens.current.routes.values(), Object.keys(gens.current.config.tenants ?? {}))
  )
  // A replica probed down (here or by the fleet's prober) goes down in its pool: its streams move off it.
  store.onSync(() => {
    for (const p of gens.pools()) p.refreshProbes()
  })
  // This instance's stream counts go to the fleet with every store sync.
  const report = setInterval(
    () => store.reportStreams(gens.streamCounts()),
    Math.max(100, config.store.syncIntervalSeconds * 1000)
  )
  report.unref()
  gens.current.prober.start()
  const stopSweep = sweepRevokedLegs(state, opts.nowMs)
  // Load that comes back to a recovered or new replica: calls of movable mappings move, paced.
  // audio.rebalance.perSecond is the instance's: each of N workers moves its calls at 1/N of it.
  const rebalancer = new Rebalancer(
    () => gens.pools(),
    () => workerShare(state.config.audio.rebalance, worker?.workers ?? 1),
    systemClock,
    (from, to) => {
      metrics.moves.inc({ route: from.route, from: from.name, to: to.name })
    }
  )
  rebalancer.start()
  return () => {
    gens.current.prober.stop()
    stopSweep()
    rebalancer.stop()
    clearInterval(report)
  }
}

/** Close everything but the scrape listener: the server's `finish`, run once by its lifecycle. */
function closeAll(core: Core, apps: Apps, listening: Listening, final: FinalScrape): void {
  const { state, texts } = core
  core.stopUpkeep()
  final.finished()
  listening.public.close()
  for (const l of listening.others) l.close()
  state.placement.close()
  state.calls.close()
  state.logLimit.close()
  for (const leg of [...state.legs]) leg.shutdown('SHUTTING_DOWN')
  for (const s of [...state.sessions.all()]) s.close(true)
  for (const a of [apps.public, apps.admin, apps.loopback, apps.fleet]) if (a !== null) closeApp(a)
  texts.close().catch(err => state.log.error({ event: 'text_close_failed', err }, 'closing vendor HTTP pools failed'))
}

export { advertisedUrl } from './listeners'
