import * as uWS from 'uWebSockets.js'
import type { Config } from '../config/types'
import { ADMIN_REQUESTED_WITH, type AdminGate, answerScrape, guarded } from '../server/admin'
import { answerCalls } from '../server/calls-route'
import { answerWhenSettled, send, sendJson } from '../server/http'
import { listen } from '../server/listen'
import { notFound } from '../server/refusals'
import { mergeRecent, mountStatusPage } from '../server/status-page'
import { RECENT_KEPT } from '../telemetry/recent'
import type { Store } from '../store/port'
import type { Logger } from '../telemetry/log'
import type { LogLimiter } from '../telemetry/log-limit'
import type { FinalScrape } from '../telemetry/final-scrape'
import { mergeReadiness, mergeUpstreams } from './merge-upstreams'

/** What the admin listener of `serve --workers N` asks of the supervisor. */
export interface AdminHost {
  log: Logger
  /** A drain has begun: /readyz answers 503. */
  leaving: () => boolean
  /** Internal admin ports of the workers that are up, by worker index. */
  workerAdmins: () => { worker: number; adminPort: number }[]
  /** The bearer token of the workers' internal admin listeners. */
  internalToken: string
  /** `admin.token` as the gateway started ('' on loopback without one), and what a refusal does (counted, logged). */
  adminToken: () => string
  /** GET /admin/config: the config in force, every secret redacted (server/reload.ts configView). */
  config: () => unknown
  refused: AdminGate['refused']
  /** Rate-limits the lines a client can flood (401s, 404s). */
  logLimit: LogLimiter
  /** Where GET /admin/calls looks: the fleet's Redis, or the memory store every worker publishes to. */
  calls: Store
  /** The aggregated exposition text. */
  metrics: () => Promise<{ contentType: string; text: string }>
  /** Told of each scrape, for the linger after a drain (telemetry/final-scrape.ts). */
  final: FinalScrape
  /** POST /admin/reload on every worker (each re-reads and validates the file). */
  reload: (trigger: string) => Promise<{ ok: boolean; reports: { worker: number; report: unknown }[] }>
  /** GET /admin/workers. */
  describe: () => unknown
  /** The main process's instance id (the workers' ids extend it). */
  instanceId: string
}

interface Answer {
  worker: number
  status: number
  type: string
  body: string
}

async function ask(
  token: string,
  adminPort: number,
  worker: number,
  method: string,
  path: string,
  body: Buffer | null
): Promise<Answer> {
  try {
    const r = await fetch(`http://127.0.0.1:${adminPort}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        'x-requested-with': ADMIN_REQUESTED_WITH,
        ...(body !== null && body.length > 0 ? { 'content-type': 'application/json' } : {})
      },
      ...(body !== null && body.length > 0 ? { body } : {}),
      signal: AbortSignal.timeout(10_000)
    })
    return { worker, status: r.status, type: r.headers.get('content-type') ?? 'application/json', body: await r.text() }
  } catch (err) {
    return { worker, status: 502, type: 'application/json', body: JSON.stringify({ error: (err as Error).message }) }
  }
}

/**
 * The listeners of a multi-worker gateway's main process.
 * - Metrics (`metrics:`): /metrics sums every worker's metrics (prom-client's AggregatorRegistry); /livez;
 *   /readyz is ready while no drain runs and at least one worker is ready. Nothing else.
 * - Admin (`admin:`, behind `admin.token`): POST /admin/reload reloads every worker; GET /admin/upstreams
 *   and /admin/readiness merge every worker's view; GET /admin/workers; GET /admin/config (the main process's
 *   view of the config in force, secrets redacted); every other admin request is passed
 *   to the workers' internal admin listeners (127.0.0.1, ephemeral ports, behind a token only the main
 *   process holds): reads to the first worker that is up, writes (token revocation …) to every worker,
 *   answered with the first failure or else the first answer.
 */
export async function startMainListeners(
  host: AdminHost,
  config: Config
): Promise<{ metricsPort: number; adminPort: number; close: () => void }> {
  const toWorkers = (method: string, path: string, body: Buffer | null, all: boolean): Promise<Answer[]> => {
    const admins = host.workerAdmins()
    const targets = all ? admins : admins.slice(0, 1)
    return Promise.all(targets.map(w => ask(host.internalToken, w.adminPort, w.worker, method, path, body)))
  }
  const readinessOf = (): Promise<ReturnType<typeof mergeReadiness>> =>
    toWorkers('GET', '/admin/readiness', null, true).then(answers => {
      const views = answers.map(a => ({ worker: a.worker, status: a.status, view: JSON.parse(a.body) }))
      return mergeReadiness(views, host.instanceId, host.leaving())
    })

  const scrape = uWS.App()
  scrape.get('/livez', res => sendJson(res, 200, { live: true }))
  scrape.get('/metrics', res => answerScrape(res, () => host.metrics(), host.log, host.final))
  scrape.get('/readyz', res =>
    answerWhenSettled(res, readinessOf(), r =>
      sendJson(res, r.ready ? 200 : 503, { ready: r.ready, reasons: r.reasons })
    )
  )
  scrape.any('/*', notFound(host, 'metrics'))

  const admin = uWS.App()
  const token: AdminGate = { token: host.adminToken, refused: host.refused }
  admin.get(
    '/admin/workers',
    guarded(token, res => sendJson(res, 200, host.describe()))
  )
  admin.get(
    '/admin/config',
    guarded(token, res => sendJson(res, 200, host.config()))
  )
  admin.get(
    '/admin/readiness',
    guarded(token, res => answerWhenSettled(res, readinessOf(), r => sendJson(res, r.ready ? 200 : 503, r)))
  )
  // Every worker's replicas, merged (workers/merge-upstreams.ts): one gateway's view, as with one process.
  admin.get(
    '/admin/upstreams',
    guarded(token, res =>
      answerWhenSettled(res, toWorkers('GET', '/admin/upstreams', null, true), answers => {
        const views = answers
          .filter(a => a.status === 200)
          .map(a => ({ worker: a.worker, view: JSON.parse(a.body) as Record<string, unknown> }))
        if (views.length === 0) return sendJson(res, 503, { error: 'no worker is up' })
        sendJson(res, 200, mergeUpstreams(views, host.instanceId))
      })
    )
  )
  // Every worker's last failovers, replica changes and refusals, as one list (telemetry/recent.ts).
  admin.get(
    '/admin/recent',
    guarded(token, res =>
      answerWhenSettled(res, toWorkers('GET', '/admin/recent', null, true), answers => {
        const views = answers.filter(a => a.status === 200).map(a => ({ worker: a.worker, view: JSON.parse(a.body) }))
        sendJson(res, 200, mergeRecent(views, RECENT_KEPT))
      })
    )
  )
  // The status page is served here, so its reads are this process's merged ones (server/status-page.ts).
  mountStatusPage(admin, token)
  // Every worker's legs, through the store they all publish to (audio/leg/call-book.ts).
  admin.get(
    '/admin/calls',
    guarded(token, (res, req) =>
      answerCalls(res, req, host.calls, host.instanceId, host.calls.kind === 'redis' ? 'redis' : 'workers')
    )
  )
  admin.post(
    '/admin/reload',
    guarded(token, res =>
      answerWhenSettled(
        res,
        host.reload('admin'),
        r => {
          const first = (r.reports[0]?.report ?? {}) as Record<string, unknown>
          sendJson(res, r.ok ? 200 : 409, { ...first, ok: r.ok, workers: r.reports })
        },
        () => sendJson(res, 500, { ok: false, problems: ['reload failed'] })
      )
    )
  )
  admin.any(
    '/admin/*',
    guarded(token, (res, req) => {
      const method = req.getMethod().toUpperCase()
      const query = req.getQuery() ?? ''
      const path = `${req.getUrl()}${query === '' ? '' : `?${query}`}`
      const chunks: Buffer[] = []
      let aborted = false
      res.onAborted(() => {
        aborted = true
      })
      res.onData((chunk, last) => {
        chunks.push(Buffer.from(chunk.slice(0)))
        if (!last) return
        toWorkers(method, path, Buffer.concat(chunks), method !== 'GET' && method !== 'HEAD').then(
          answers => {
            if (aborted) return
            if (answers.length === 0) return sendJson(res, 503, { error: 'no worker is up' })
            const a = answers.find(x => x.status >= 300) ?? answers[0]
            send(res, a.status, a.type, a.body)
          },
          () => {}
        )
      })
    })
  )
  admin.any('/*', notFound(host, 'admin'))

  const sockets: uWS.us_listen_socket[] = []
  const open = async (app: uWS.TemplatedApp, listenHost: string, port: number): Promise<number> => {
    const socket = await listen(app, listenHost, port)
    sockets.push(socket)
    return uWS.us_socket_local_port(socket as unknown as uWS.us_socket)
  }
  try {
    const metricsPort = await open(scrape, config.metrics.host, config.metrics.port)
    const adminPort = await open(admin, config.admin.host, config.admin.port)
    return {
      metricsPort,
      adminPort,
      close: () => {
        for (const s of sockets) uWS.us_listen_socket_close(s)
        for (const a of [scrape, admin]) (a as unknown as { close: () => void }).close()
      }
    }
  } catch (err) {
    for (const s of sockets) uWS.us_listen_socket_close(s)
    throw err
  }
}
