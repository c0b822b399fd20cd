import * as uWS from 'uWebSockets.js'
import { SessionRegistry } from '../audio/registry'
import { JoinDirectory } from '../audio/join-relay'
import { AuthGuard } from '../auth/guard'
import { useCallerKey } from '../auth/hook-auth'
import { LegLimits } from '../auth/leg-limits'
import { systemClock } from '../clock'
import type { Config } from '../config/types'
import { routePools } from '../route'
import { redactAlso, type Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import type { Store } from '../store/port'
import type { UpstreamPool } from '../upstream/pool'
import { mountAdmin, mountHealth } from './admin'
import { mountAudio } from './audio-route'
import { mountExamples } from './examples'
import { mountText } from './text-route'
import { closeAfterParse, wantsClose } from './front-door'
import { sendProblem } from './http'
import {
  buildGeneration,
  mountReload,
  reloader,
  restartRequired,
  routeChanges,
  type ReloadReport,
  type Revalidate
} from './reload'
import { startDrain, type Drain } from './drain'
import { TextHooks } from './text-hooks'
import type { ServerState } from './state'
import { mountTokenAdmin, mountTokenEndpoint, startTokenAuth } from './token-routes'

/**
 * Which uWebSockets.js loaded. The unofficial build silently falls back to a pure-JS server when its
 * native binary does not load; native functions print as `[native code]`, the fallback's do not.
 */
function uwsBuild(): { native: boolean; binary: string | null } {
  const native = /\[native code\]/.test(Function.prototype.toString.call(uWS.App))
  const binary = Object.keys(require.cache).find(k => /uws_.*\.node$/.test(k)) ?? null
  return { native, binary }
}

export interface RunningServer {
  readonly state: ServerState
  readonly port: number
  readonly adminPort: number
  /** Re-read and validate the config (as `check` does) and apply it to new legs and requests. */
  reload: (trigger: string) => Promise<ReloadReport>
  /** The graceful drain (shutdown.*); resolves when everything is closed. Idempotent. */
  drain: (signal: string) => Promise<void>
  /** Cut a drain short (a second signal), or close at once when none runs. */
  stopNow: (why: string) => void
  /** Stop accepting, end every live leg with SHUTTING_DOWN (1012), close the listeners. */
  close: () => void
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
  /** The vendor sessions' registry; `serve --workers N` passes one that reaches the other workers. */
  sessions?: SessionRegistry
  /**
   * A worker of `serve --workers N`: its main process's instance id. The worker then also listens on a
   * loopback port, where the other workers relay the legs of the joined calls it holds.
   */
  workerOf?: string
}

const noRevalidate: Revalidate = async () => ({
  ok: false,
  problems: [{ file: '', pointer: '', message: 'this server was started without a config file to re-read' }]
})

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const { config, log, metrics, store } = opts
  const build = uwsBuild()
  metrics.buildInfo.set({ version: opts.version, uws_native: String(build.native) }, 1)
  if (!build.native) {
    if (!config.uws.allowFallback) {
      throw new Error(
        'uWebSockets.js loaded its pure-JS fallback, not the native binary: refusing to serve ' +
          '(set uws.allowFallback: true to serve anyway, never in production)'
      )
    }
    log.warn(
      { event: 'uws_fallback' },
      'uWebSockets.js is running its slow pure-JS fallback because uws.allowFallback is true'
    )
  } else {
    log.info({ event: 'uws_native', binary: build.binary }, 'uWebSockets.js native build loaded')
  }

  // Token auth is built once, from the config the process started with (key files are read here); a
  // change to `tokens` takes effect at the next restart (reload says so in restartRequired).
  const tokens = await startTokenAuth(config, opts.nowMs, store)
  useCallerKey(config.secrets)
  const genDeps = { store, metrics, log, verifier: tokens?.verifier }
  let gen = buildGeneration(config, genDeps, null)
  const sessions = opts.sessions ?? new SessionRegistry()
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
    guard: new AuthGuard(() => state.config.auth, store, systemClock),
    legLimits: new LegLimits(() => state.config.limits)
  }
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
  metrics.routeNames = () => [...gen.routes.keys()]
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
  const texts = new TextHooks(gen.text, config.text)

  const apply = (next: Config): Omit<ReloadReport, 'ok' | 'problems'> => {
    const prev = gen
    gen = buildGeneration(next, genDeps, prev)
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
  const reload = reloader(opts.revalidate ?? noRevalidate, apply, genDeps)

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
  mountAudio(app, state)
  mountText(app, state, texts)
  mountExamples(app, state)
  mountHealth(app, state)
  mountTokenEndpoint(app, state, tokens)
  app.any('/*', (res, req) => {
    if (wantsClose(req)) closeAfterParse(res, () => sendProblem(res, 'NOT_FOUND', [], {}, true))
    else sendProblem(res, 'NOT_FOUND')
  })

  const admin = uWS.App()
  mountAdmin(admin, state)
  mountReload(admin, reload)
  mountTokenAdmin(admin, state, tokens)
  admin.any('/*', res => sendProblem(res, 'NOT_FOUND'))

  const publicSocket = await listen(app, config.listen.host, config.listen.port)
  let adminSocket: uWS.us_listen_socket
  let relaySocket: uWS.us_listen_socket | null = null
  try {
    adminSocket = await listen(admin, config.admin.host, config.admin.port)
    if (opts.workerOf !== undefined) relaySocket = await listen(app, '127.0.0.1', 0)
  } catch (err) {
    uWS.us_listen_socket_close(publicSocket)
    throw err
  }
  const port = uWS.us_socket_local_port(publicSocket as unknown as uWS.us_socket)
  // Joins across processes need a store other processes share: Redis, or the workers' main process.
  if (store.kind === 'redis' || opts.workerOf !== undefined) {
    const scheme = tls === null ? 'ws' : 'wss'
    const local =
      relaySocket === null
        ? ''
        : `${scheme}://127.0.0.1:${uWS.us_socket_local_port(relaySocket as unknown as uWS.us_socket)}`
    state.joins = new JoinDirectory(store, {
      instance: store.instanceId,
      group: opts.workerOf ?? store.instanceId,
      url: advertisedUrl(config.listen.advertiseUrl, port),
      local
    })
  }
  const adminPort = uWS.us_socket_local_port(adminSocket as unknown as uWS.us_socket)
  log.info(
    {
      event: 'listening',
      host: config.listen.host,
      port,
      adminPort,
      tls: tls !== null,
      routes: [...gen.routes.keys()]
    },
    'gateway listening'
  )

  let accepting = true
  // Idempotent: uWS must not be asked to close a listen socket twice.
  const stopAccepting = (): void => {
    if (accepting) {
      uWS.us_listen_socket_close(publicSocket)
      if (relaySocket !== null) uWS.us_listen_socket_close(relaySocket)
    }
    accepting = false
  }
  let closed = false
  const finish = (): void => {
    if (closed) return
    closed = true
    state.draining = true
    metrics.draining.set(1)
    gen.prober.stop()
    clearInterval(report)
    stopAccepting()
    uWS.us_listen_socket_close(adminSocket)
    for (const leg of [...state.legs]) leg.shutdown('SHUTTING_DOWN')
    for (const s of [...sessions.all()])
      s.close(true)
      // TemplatedApp.close() exists at run time (uWS ≥ 20.27) but is missing from the bundled typings.
    ;(app as unknown as { close: () => void }).close()
    ;(admin as unknown as { close: () => void }).close()
    texts.close().catch(err => log.error({ event: 'text_close_failed', err }, 'closing vendor HTTP pools failed'))
  }
  let drain: Drain | null = null
  return {
    state,
    port,
    adminPort,
    reload,
    drain: signal => {
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
      if (drain !== null) drain.stopNow(why)
      else finish()
    },
    close: finish
  }
}

function listen(app: uWS.TemplatedApp, host: string, port: number): Promise<uWS.us_listen_socket> {
  return new Promise((resolve, reject) => {
    app.listen(host, port, socket => {
      if (socket === false) reject(new Error(`cannot listen on ${host}:${port} (in use, or not permitted)`))
      else resolve(socket)
    })
  })
}

/** `listen.advertiseUrl` with the listener's port when it names none; '' when not set. */
export function advertisedUrl(url: string | undefined, port: number): string {
  if (url === undefined) return ''
  const u = new URL(url)
  return `${u.protocol}//${u.host}${u.port === '' ? `:${port}` : ''}`
}
