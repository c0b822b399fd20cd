import * as uWS from 'uWebSockets.js'
import { CallBook } from '../audio/leg/call-book'
import { type Holder, Placement } from '../audio/placement/placement'
import { SessionRegistry } from '../audio/session/registry'
import { type Admission, LocalAdmission } from '../auth/admission'
import { FailureBudget } from '../auth/failure-budget'
import { FleetKey } from '../auth/fleet-key'
import { LegLimits } from '../auth/leg-limits'
import { Quotas } from '../auth/quotas'
import { RelayTokens, type UsedNonces } from '../auth/relay-token'
import { systemClock } from '../clock'
import type { Config } from '../config/types'
import { routePools } from '../route'
import { redactAlso, type Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import { FinalScrape, lingerMs } from '../telemetry/final-scrape'
import { LogLimiter } from '../telemetry/log-limit'
import { type Tracing, untraced } from '../telemetry/tracing'
import { isQuotaStore, type Store } from '../store/port'
import type { UpstreamPool } from '../upstream/pool'
import { type AdminGate, adminRefused, mountAdmin, mountHealth, mountMetrics } from './admin'
import { mountCalls } from './calls-route'
import { mountStatusPage } from './status-page'
import { fleetApp } from './fleet-listener'
import { listen, type PortUse } from './listen'
import { mountAudio } from './audio-route'
import { mountExamples } from './examples'
import { mountText } from './text-route'
import { closeAfterParse, wantsClose } from './front-door'
import { sendProblem } from './http'
import { notFound, notFoundLine } from './refusals'
import {
  buildGeneration,
  configView,
  mountConfigView,
  mountReload,
  reloader,
  restartRequired,
  routeChanges,
  type ReloadReport,
  type Revalidate
} from './reload'
import { startDrain, type Drain } from './drain'
import { Rebalancer, workerShare } from '../upstream/rebalance'
import { sweepRevokedLegs } from './revoked-legs'
import { CLOSED_LABELS, labelSpaceOf } from './metric-labels'
import { checkUwsBuild } from './uws-build'
import { TextHooks } from './text-hooks'
import type { ServerState } from './state'
import { mountTokenAdmin, mountTokenEndpoint, startTokenAuth } from './token-routes'

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

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const { config, log, metrics, store } = opts
  const build = checkUwsBuild(config, log, metrics, opts.version)

  // Token auth is built once, from the config the process started with (key files are read here); a
  // change to `tokens` takes effect at the next restart (reload says so in restartRequired). So is the
  // fleet key (a reload keeps the key the process started with).
  const tokens = await startTokenAuth(config, opts.nowMs, store)
  const worker = opts.worker
  const fleetKey = worker?.fleetKey ?? FleetKey.fromConfig(config) ?? FleetKey.random()
  const logLimit = LogLimiter.of(systemClock, () => log, config.log.flood, worker?.workers)
  const genDeps = { store, metrics, log, verifier: tokens?.verifier, logLimit }
  let gen = buildGeneration(config, genDeps, null)
  const admission =
    worker?.admission ??
    new LocalAdmission(
      new FailureBudget(
        () => state.config.auth,
        systemClock,
        store.shared ? (address, windowMs, nowMs) => store.countFailure(address, windowMs, nowMs) : undefined
      ),
      new LegLimits(() => state.config.limits),
      new Quotas(() => state.config, systemClock, store.shared && isQuotaStore(store) ? store : undefined)
    )
  // Where this process is reached by the others that share its store: filled in once it listens.
  const holder: { -readonly [k in keyof Holder]: Holder[k] } = {
    instance: store.instanceId,
    group: worker?.group ?? store.instanceId,
    url: '',
    local: ''
  }
  const placement = new Placement(store, store.shared ? holder : null, systemClock)
  const sessions = new SessionRegistry(placement)
  const state: ServerState = {
    config,
    routes: gen.routes,
    defaultRoute: gen.defaultRoute,
    metrics,
    log,
    draining: false,
    leaving: false,
    legs: new Set(),
    uwsNative: build.native,
    store,
    sessions,
    placement,
    admission,
    fleetKey,
    relayTokens: new RelayTokens(fleetKey, Date.now, worker?.usedNonces),
    calls: new CallBook(
      store,
      systemClock,
      { instance: holder.group, process: store.instanceId, worker: worker?.index ?? null },
      () => state.legs
    ),
    logLimit,
    tracing: opts.tracing ?? untraced
  }
  sessions.onGone = s => state.calls.sessionGone(s)
  state.calls.start()
  log.info({ event: 'fleet_key', source: fleetKey.source }, `fleet key from ${fleetKey.source}`)
  // Pools of routes a reload replaced or removed, while live legs still hold streams on them.
  const retired = new Set<UpstreamPool>()
  const pools = (): UpstreamPool[] => {
    for (const p of retired) if (p.replicas.every(r => r.activeStreams === 0)) retired.delete(p)
    return [...[...gen.routes.values()].flatMap(routePools), ...retired]
  }
  metrics.replicaHealth = () =>
    [...gen.routes.values()].flatMap(rt =>
      routePools(rt).flatMap(p => p.replicas.map(r => ({ route: r.route, upstream: r.name, healthy: r.healthy })))
    )
  metrics.storeIsUp = () => store.up()
  // Every series the gateway can count exists at 0 from now on, and a reload's new routes' from its swap.
  metrics.seed(CLOSED_LABELS, () => labelSpaceOf(gen.routes.values(), Object.keys(gen.config.tenants ?? {})))
  // A replica probed down (here or by the fleet's prober) goes down in its pool: its streams move off it.
  store.onSync(() => {
    for (const p of pools()) p.refreshProbes()
  })
  // This instance's stream counts go to the fleet with every store sync.
  const report = setInterval(
    () => {
      const counts = new Map<string, number>()
      for (const p of pools()) for (const r of p.replicas) counts.set(r.key, (counts.get(r.key) ?? 0) + r.activeStreams)
      store.reportStreams(counts)
    },
    Math.max(100, config.store.syncIntervalSeconds * 1000)
  )
  report.unref()
  gen.prober.start()
  const stopSweep = sweepRevokedLegs(state, opts.nowMs)
  // Load that comes back to a recovered or new replica: calls of movable mappings move, paced.
  // audio.rebalance.perSecond is the instance's: each of N workers moves its calls at 1/N of it.
  const rebalancer = new Rebalancer(
    pools,
    () => workerShare(state.config.audio.rebalance, worker?.workers ?? 1),
    systemClock,
    (from, to) => {
      metrics.moves.inc({ route: from.route, from: from.name, to: to.name })
    }
  )
  rebalancer.start()
  const texts = new TextHooks(gen.text, config.text)

  const apply = (next: Config): Omit<ReloadReport, 'ok' | 'problems'> => {
    const prev = gen
    gen = buildGeneration(next, genDeps, prev)
    metrics.reseed()
    for (const [name, r] of prev.routes) if (gen.routes.get(name) !== r) for (const p of routePools(r)) retired.add(p)
    prev.prober.stop()
    gen.prober.start()
    texts.replace(gen.text, next.text)
    state.config = next
    state.routes = gen.routes
    state.defaultRoute = gen.defaultRoute
    log.level = next.log.level
    redactAlso(log, next.secrets)
    for (const w of next.warnings) log.warn({ event: 'config_warning' }, w)
    return { ...routeChanges(prev, gen), restartRequired: restartRequired(prev, gen) }
  }
  // A worker's reload is counted and logged once for the gateway, by its main process.
  const reload = reloader(opts.revalidate ?? noRevalidate, apply, genDeps, worker === undefined)

  const tls = config.listen.tls
  const app =
    tls === null
      ? uWS.App()
      : uWS.SSLApp({
          cert_file_name: tls.cert,
          key_file_name: tls.key,
          ...(tls.passphrase !== undefined ? { passphrase: tls.passphrase } : {}),
          ...(tls.ciphers !== undefined ? { ssl_ciphers: tls.ciphers } : {})
        })
  if (tls === null)
    log.warn({ event: 'plain_listener' }, 'listen.tls is not configured: serving plain WS/HTTP; use TLS in production')
  if (config.demo)
    log.warn(
      { event: 'demo_config' },
      'demo: true: secrets may have inline defaults (public demo values); not for production'
    )
  mountAudio(app, state)
  mountText(app, state, texts)
  mountExamples(app, state)
  mountHealth(app, state)
  mountTokenEndpoint(app, state, tokens)
  app.any('/*', (res, req) => {
    notFoundLine(state, 'public', res, req)
    if (wantsClose(req)) closeAfterParse(res, () => sendProblem(res, 'NOT_FOUND', [], {}, true))
    else sendProblem(res, 'NOT_FOUND')
  })

  // The admin API: its own listener, behind admin.token (a worker's is internal, behind its main process's token).
  // Its token is the one it started with: a reload never changes who may use the admin API (restartRequired says so).
  const adminToken = worker?.adminToken ?? config.admin.token ?? ''
  const gate: AdminGate = { token: () => adminToken, refused: adminRefused(state) }
  const admin = uWS.App()
  mountAdmin(admin, state, gate)
  mountReload(admin, reload, gate)
  mountConfigView(admin, () => configView(config, state.config), gate)
  mountTokenAdmin(admin, state, tokens, gate)
  mountCalls(admin, state, gate)
  mountStatusPage(admin, gate)
  admin.any('/*', notFound(state, 'admin'))
  // The scrape listener: /metrics, /livez, /readyz (a worker's metrics are scraped by its main process).
  const scrape = worker === undefined ? uWS.App() : null
  // A scrape after the drain finished: the final counters have been read (see `linger`).
  const final = new FinalScrape()
  if (scrape !== null) {
    mountMetrics(scrape, state, final)
    scrape.any('/*', notFound(state, 'metrics'))
  }
  // Fleet listeners (server/fleet-listener.ts): a worker's loopback one for its siblings; the instance's when advertised.
  const loopback = worker !== undefined ? fleetApp(state, 'worker', null) : null
  const fleetCfg = config.fleet
  const fleet = fleetCfg.advertiseUrl !== undefined ? fleetApp(state, 'instance', fleetCfg.tls ?? null) : null

  const sockets: uWS.us_listen_socket[] = []
  const open = async (a: uWS.TemplatedApp, host: string, p: number, use?: PortUse): Promise<number> => {
    const socket = await listen(a, host, p, use)
    sockets.push(socket)
    return uWS.us_socket_local_port(socket as unknown as uWS.us_socket)
  }
  let port: number
  let adminPort: number
  let metricsPort = 0
  let fleetPort = 0
  let scrapeSocket: uWS.us_listen_socket | null = null
  try {
    // A worker shares the public and fleet ports with its siblings (their main process claimed them).
    const sharing: PortUse = worker !== undefined ? 'shared' : 'exclusive'
    port = await open(app, config.listen.host, worker?.port ?? config.listen.port, sharing)
    adminPort =
      worker !== undefined ? await open(admin, '127.0.0.1', 0) : await open(admin, config.admin.host, config.admin.port)
    if (scrape !== null) {
      metricsPort = await open(scrape, config.metrics.host, config.metrics.port)
      scrapeSocket = sockets.at(-1) ?? null
    }
    if (loopback !== null) holder.local = `ws://127.0.0.1:${await open(loopback, '127.0.0.1', 0)}`
    if (fleet !== null) {
      fleetPort = await open(fleet, fleetCfg.host, worker?.fleetPort ?? fleetCfg.port, sharing)
      holder.url = advertisedUrl(fleetCfg.advertiseUrl, fleetPort)
    }
  } catch (err) {
    for (const s of sockets) uWS.us_listen_socket_close(s)
    throw err
  }
  const publicSocket = sockets[0]
  log.info(
    {
      event: 'listening',
      instance: store.instanceId,
      host: config.listen.host,
      port,
      metricsPort,
      adminPort,
      fleet: holder.url || undefined,
      fleetPort: fleetPort || undefined,
      tls: tls !== null,
      routes: [...gen.routes.keys()]
    },
    'gateway listening'
  )

  let accepting = true
  // Idempotent: uWS must not be asked to close a listen socket twice.
  // The fleet listeners stay open while the legs already placed here may still be joined by a relay.
  const stopAccepting = (): void => {
    if (accepting) uWS.us_listen_socket_close(publicSocket)
    accepting = false
  }
  let closed = false
  const finish = (): void => {
    if (closed) return
    closed = true
    state.draining = true
    metrics.draining.set(1)
    gen.prober.stop()
    stopSweep()
    rebalancer.stop()
    clearInterval(report)
    final.finished()
    stopAccepting()
    for (const socket of sockets.slice(1)) if (socket !== scrapeSocket) uWS.us_listen_socket_close(socket)
    placement.close()
    state.calls.close()
    logLimit.close()
    for (const leg of [...state.legs]) leg.shutdown('SHUTTING_DOWN')
    for (const s of [...sessions.all()]) s.close(true)
    // TemplatedApp.close() exists at run time (uWS ≥ 20.27) but is missing from the bundled typings.
    for (const a of [app, admin, loopback, fleet]) if (a !== null) (a as unknown as { close: () => void }).close()
    texts.close().catch(err => log.error({ event: 'text_close_failed', err }, 'closing vendor HTTP pools failed'))
  }
  let scrapeClosed = false
  const closeScrape = (): void => {
    if (scrapeClosed || scrape === null) return
    scrapeClosed = true
    if (scrapeSocket !== null) uWS.us_listen_socket_close(scrapeSocket)
    ;(scrape as unknown as { close: () => void }).close()
  }
  let drain: Drain | null = null
  let signalledAt = -1
  return {
    state,
    port,
    metricsPort,
    adminPort,
    reload,
    drain: signal => {
      if (signalledAt < 0) signalledAt = performance.now()
      drain ??= startDrain(
        {
          state,
          pendingText: () => texts.pending,
          stopAccepting,
          finish
        },
        signal
      )
      return drain.done
    },
    stopNow: why => {
      final.cancel()
      if (drain !== null) drain.stopNow(why)
      else finish()
    },
    close: () => {
      finish()
      closeScrape()
    },
    linger: async () => {
      const maxMs = signalledAt < 0 ? 0 : lingerMs(state.config.shutdown, performance.now() - signalledAt)
      if (scrape !== null && !scrapeClosed) {
        const how = await final.wait(maxMs)
        if (maxMs > 0) log.info({ event: 'metrics_final', how, lingerMs: Math.round(maxMs) }, `final metrics: ${how}`)
      }
      closeScrape()
    }
  }
}

/** `fleet.advertiseUrl` with the fleet listener's port when it names none; '' when not set. */
export function advertisedUrl(url: string | undefined, port: number): string {
  if (url === undefined) return ''
  const u = new URL(url)
  return `${u.protocol}//${u.host}${u.port === '' ? `:${port}` : ''}`
}
