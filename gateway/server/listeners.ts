import * as uWS from 'uWebSockets.js'
import type { OwnerProcess } from '../audio/placement/placement'
import type { Config } from '../config/types'
import type { FinalScrape } from '../telemetry/final-scrape'
import { type AdminGate, adminRefused, mountAdmin, mountHealth, mountMetrics } from './admin'
import { mountAudio } from './audio-route'
import { mountCalls } from './calls-route'
import { mountExamples } from './examples'
import { fleetApp } from './fleet-listener'
import { closeAfterParse, wantsClose } from './front-door'
import { sendProblem } from './http'
import { listen, type PortUse } from './listen'
import { notFound, notFoundLine } from './refusals'
import { configView, mountConfigView, mountReload, type ReloadReport } from './reload'
import type { ServerState } from './state'
import { mountStatusPage } from './status-page'
import type { TextHooks } from './text-hooks'
import { mountText } from './text-route'
import type { TokenAuth } from '../auth/token-auth'
import { mountTokenAdmin, mountTokenEndpoint } from './token-routes'

/** What the apps are built from: the server's state and parts, and what its main process handed a worker. */
export interface AppParts {
  state: ServerState
  /** The config the process started with (TLS, admin token, fleet listener: a reload changes none of them). */
  config: Config
  texts: TextHooks
  tokens: TokenAuth | undefined
  reload: (trigger: string) => Promise<ReloadReport>
  final: FinalScrape
  /** A worker of `serve --workers N`: its internal admin token; undefined for a process alone. */
  worker?: { adminToken: string }
}

/** The uWS apps of one server: public, admin, and (when this process has them) scrape, loopback and fleet. */
export interface Apps {
  readonly public: uWS.TemplatedApp
  readonly admin: uWS.TemplatedApp
  /** The scrape listener: /metrics, /livez, /readyz (a worker's metrics are scraped by its main process). */
  readonly scrape: uWS.TemplatedApp | null
  /** A worker's loopback fleet listener, for its siblings. */
  readonly loopback: uWS.TemplatedApp | null
  /** The instance's fleet listener, when `fleet.advertiseUrl` is set. */
  readonly fleet: uWS.TemplatedApp | null
}

/** The public listener's app: the audio and text hooks, health, examples, the token endpoint. */
function publicApp(parts: AppParts): uWS.TemplatedApp {
  const { state, config } = parts
  const { log } = state
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
  mountText(app, state, parts.texts)
  mountExamples(app, state)
  mountHealth(app, state)
  mountTokenEndpoint(app, state, parts.tokens)
  app.any('/*', (res, req) => {
    notFoundLine(state, 'public', res, req)
    if (wantsClose(req)) closeAfterParse(res, () => sendProblem(res, 'NOT_FOUND', [], {}, true))
    else sendProblem(res, 'NOT_FOUND')
  })
  return app
}

/**
 * The admin API: its own listener, behind admin.token (a worker's is internal, behind its main process's
 * token). Its token is the one it started with: a reload never changes who may use the admin API
 * (restartRequired says so).
 */
function adminApp(parts: AppParts): uWS.TemplatedApp {
  const { state, config } = parts
  const adminToken = parts.worker?.adminToken ?? config.admin.token ?? ''
  const gate: AdminGate = { token: () => adminToken, refused: adminRefused(state) }
  const admin = uWS.App()
  mountAdmin(admin, state, gate)
  mountReload(admin, parts.reload, gate)
  mountConfigView(admin, () => configView(config, state.config), gate)
  mountTokenAdmin(admin, state, parts.tokens, gate)
  mountCalls(admin, state, gate)
  mountStatusPage(admin, gate)
  admin.any('/*', notFound(state, 'admin'))
  return admin
}

export function buildApps(parts: AppParts): Apps {
  const { state, config } = parts
  const worker = parts.worker !== undefined
  const publicListener = publicApp(parts)
  const admin = adminApp(parts)
  const scrape = worker ? null : uWS.App()
  if (scrape !== null) {
    mountMetrics(scrape, state, parts.final)
    scrape.any('/*', notFound(state, 'metrics'))
  }
  // Fleet listeners (server/fleet-listener.ts): a worker's loopback one for its siblings; the instance's when advertised.
  const fleetCfg = config.fleet
  return {
    public: publicListener,
    admin,
    scrape,
    loopback: worker ? fleetApp(state, 'worker', null) : null,
    fleet: fleetCfg.advertiseUrl !== undefined ? fleetApp(state, 'instance', fleetCfg.tls ?? null) : null
  }
}

/** A listening socket that closes once (uWS must not be asked to close a listen socket twice). */
export class Listener {
  private state: { readonly stage: 'open'; readonly socket: uWS.us_listen_socket } | { readonly stage: 'closed' }

  constructor(socket: uWS.us_listen_socket) {
    this.state = { stage: 'open', socket }
  }

  get open(): boolean {
    return this.state.stage === 'open'
  }

  get port(): number {
    return this.state.stage === 'open' ? uWS.us_socket_local_port(this.state.socket as unknown as uWS.us_socket) : 0
  }

  /** Stop listening (open connections stay). Closing twice is harmless. */
  close(): void {
    if (this.state.stage === 'closed') return
    uWS.us_listen_socket_close(this.state.socket)
    this.state = { stage: 'closed' }
  }
}

/** TemplatedApp.close() exists at run time (uWS ≥ 20.27) but is missing from the bundled typings. */
export function closeApp(app: uWS.TemplatedApp): void {
  ;(app as unknown as { close: () => void }).close()
}

/** One server's listening sockets: the public one first (a drain closes it alone, first), then the others. */
export interface Listening {
  readonly public: Listener
  /** Admin, loopback and fleet: closed with everything else. */
  readonly others: readonly Listener[]
  /** The scrape listener, closed last (it may linger for a final scrape); null in a worker. */
  readonly scrape: Listener | null
  readonly port: number
  readonly adminPort: number
  readonly metricsPort: number
  readonly fleetPort: number
}

/** Where the server listens: the config's addresses, or (a worker) the ports its main process claimed. */
export interface ListenAt {
  config: Config
  worker?: { port: number; fleetPort: number }
  /** Filled in here: the worker's loopback URL and the advertised fleet URL. */
  owner: { -readonly [k in keyof OwnerProcess]: OwnerProcess[k] }
}

/** Listen on every app's address; when one cannot, close what was opened and reject. */
export async function openListeners(apps: Apps, at: ListenAt): Promise<Listening> {
  const { config, worker, owner } = at
  const opened: Listener[] = []
  const open = async (a: uWS.TemplatedApp, host: string, p: number, use?: PortUse): Promise<Listener> => {
    const l = new Listener(await listen(a, host, p, use))
    opened.push(l)
    return l
  }
  try {
    // A worker shares the public and fleet ports with its siblings (their main process claimed them).
    const sharing: PortUse = worker !== undefined ? 'shared' : 'exclusive'
    const publicListener = await open(apps.public, config.listen.host, worker?.port ?? config.listen.port, sharing)
    const admin =
      worker !== undefined
        ? await open(apps.admin, '127.0.0.1', 0)
        : await open(apps.admin, config.admin.host, config.admin.port)
    const scrape = apps.scrape === null ? null : await open(apps.scrape, config.metrics.host, config.metrics.port)
    const others = [admin]
    if (apps.loopback !== null) {
      const loopback = await open(apps.loopback, '127.0.0.1', 0)
      others.push(loopback)
      owner.local = `ws://127.0.0.1:${loopback.port}`
    }
    let fleetPort = 0
    if (apps.fleet !== null) {
      const fleetCfg = config.fleet
      const fleet = await open(apps.fleet, fleetCfg.host, worker?.fleetPort ?? fleetCfg.port, sharing)
      others.push(fleet)
      fleetPort = fleet.port
      owner.url = advertisedUrl(fleetCfg.advertiseUrl, fleetPort)
    }
    const metricsPort = scrape?.port ?? 0
    return {
      public: publicListener,
      others,
      scrape,
      port: publicListener.port,
      adminPort: admin.port,
      metricsPort,
      fleetPort
    }
  } catch (err) {
    for (const l of opened) l.close()
    throw err
  }
}

/** `fleet.advertiseUrl` with the fleet listener's port when it names none; '' when not set. */
export function advertisedUrl(url: string | undefined, port: number): string {
  if (url === undefined) return ''
  const u = new URL(url)
  return `${u.protocol}//${u.host}${u.port === '' ? `:${port}` : ''}`
}
