import * as uWS from 'uWebSockets.js'
import { SessionRegistry } from '../audio/registry'
import type { Config } from '../config/types'
import { loadMapping } from '../mapping/compile'
import { buildRoute, type RouteRuntime } from '../route'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import type { Store } from '../store/port'
import { TextHook } from '../text/utterance'
import { Prober } from '../upstream/health'
import { mountAdmin, mountHealth } from './admin'
import { mountAudio } from './audio-route'
import { mountExamples } from './examples'
import { mountText } from './text-route'
import { sendProblem } from './http'
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
  /** Stop accepting, end every live leg with SHUTTING_DOWN (1012), close the listeners. */
  close: () => void
}

export interface ServerOptions {
  config: Config
  log: Logger
  metrics: Metrics
  store: Store
  version: string
  /** Wall clock (epoch ms) of token issuing, expiry and revocation; default Date.now (tests pass their own). */
  nowMs?: () => number
}

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

  const tokens = await startTokenAuth(config, opts.nowMs)
  const routes = new Map<string, RouteRuntime>()
  let defaultRoute: RouteRuntime | null = null
  for (const rc of Object.values(config.routes)) {
    const r = buildRoute(rc, loadMapping(rc.mapping), store, config.health, tokens?.verifier)
    routes.set(rc.name, r)
    if (rc.default) defaultRoute = r
  }
  const sessions = new SessionRegistry()
  const state: ServerState = {
    config,
    routes,
    defaultRoute,
    metrics,
    log,
    draining: false,
    legs: new Set(),
    uwsNative: build.native,
    store,
    sessions
  }
  const pools = [...routes.values()].map(r => r.pool)
  metrics.replicaHealth = () =>
    pools.flatMap(p => p.replicas.map(r => ({ route: r.route, upstream: r.name, healthy: r.healthy })))
  metrics.storeIsUp = () => store.up()
  metrics.routeNames = () => [...routes.keys()]
  for (const pool of pools)
    pool.onDown((r, source, reason) => {
      if (source === 'probe') return // the prober logs its own verdicts (upstream_health)
      metrics.ejections.inc({ route: r.route, upstream: r.name })
      log.warn(
        { event: 'upstream_ejected', route: r.route, upstream: r.name, source, reason },
        'replica ejected after gateway-side failures'
      )
    })
  const prober = new Prober(pools, config.health.active, store, {
    checked: (r, ok) => metrics.healthChecks.inc({ route: r.route, upstream: r.name, result: ok ? 'ok' : 'failed' }),
    changed: (r, st, reason) => {
      log[st === 'down' ? 'error' : 'info'](
        { event: 'upstream_health', route: r.route, upstream: r.name, state: st, reason },
        `replica ${r.name} is ${st}`
      )
    }
  })
  // A replica probed down (here or by the fleet's prober) goes down in its pool: its streams move off it.
  store.onSync(() => {
    for (const p of pools) p.refreshProbes()
  })
  // This instance's stream counts go to the fleet with every store sync.
  const report = setInterval(
    () => {
      store.reportStreams(
        new Map(pools.flatMap(p => p.replicas.map(r => [r.key, r.activeStreams] as [string, number])))
      )
    },
    Math.max(100, config.store.syncIntervalSeconds * 1000)
  )
  report.unref()
  prober.start()

  const tls = config.listen.tls
  const app =
    tls === null
      ? uWS.App()
      : uWS.SSLApp({
          cert_file_name: tls.cert,
          key_file_name: tls.key,
          ...(tls.passphrase !== undefined ? { passphrase: tls.passphrase } : {})
        })
  if (tls === null)
    log.warn({ event: 'plain_listener' }, 'listen.tls is not configured: serving plain WS/HTTP; use TLS in production')
  mountAudio(app, state)
  const text = new TextHook(routes.values(), { settings: config.text, metrics, log })
  mountText(app, state, text)
  mountExamples(app, state)
  mountHealth(app, state)
  mountTokenEndpoint(app, state, tokens)
  app.any('/*', res => sendProblem(res, 'NOT_FOUND'))

  const admin = uWS.App()
  mountAdmin(admin, state)
  mountTokenAdmin(admin, state, tokens)
  admin.any('/*', res => sendProblem(res, 'NOT_FOUND'))

  const publicSocket = await listen(app, config.listen.host, config.listen.port)
  let adminSocket: uWS.us_listen_socket
  try {
    adminSocket = await listen(admin, config.admin.host, config.admin.port)
  } catch (err) {
    uWS.us_listen_socket_close(publicSocket)
    throw err
  }
  const port = uWS.us_socket_local_port(publicSocket as unknown as uWS.us_socket)
  const adminPort = uWS.us_socket_local_port(adminSocket as unknown as uWS.us_socket)
  log.info(
    { event: 'listening', host: config.listen.host, port, adminPort, tls: tls !== null, routes: [...routes.keys()] },
    'gateway listening'
  )

  let closed = false
  return {
    state,
    port,
    adminPort,
    close: () => {
      if (closed) return
      closed = true
      state.draining = true
      metrics.draining.set(1)
      prober.stop()
      clearInterval(report)
      uWS.us_listen_socket_close(publicSocket)
      uWS.us_listen_socket_close(adminSocket)
      for (const leg of [...state.legs]) leg.shutdown('SHUTTING_DOWN')
      for (const s of [...sessions.all()])
        s.close(true)
        // TemplatedApp.close() exists at run time (uWS ≥ 20.27) but is missing from the bundled typings.
      ;(app as unknown as { close: () => void }).close()
      ;(admin as unknown as { close: () => void }).close()
      text.close().catch(err => log.error({ event: 'text_close_failed', err }, 'closing vendor HTTP pools failed'))
    }
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
