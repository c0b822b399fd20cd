import * as uWS from 'uWebSockets.js'
import { send, sendJson } from '../server/http'
import { mergeUpstreams } from './merge-upstreams'
import type { Logger } from '../telemetry/log'

/** What the admin listener of `serve --workers N` asks of the supervisor. */
export interface AdminHost {
  log: Logger
  /** A drain has begun: /readyz answers 503. */
  leaving: () => boolean
  /** Internal admin ports of the workers that are up, by worker index. */
  workerAdmins: () => { worker: number; adminPort: number }[]
  /** The aggregated exposition text. */
  metrics: () => Promise<{ contentType: string; text: string }>
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
  adminPort: number,
  worker: number,
  method: string,
  path: string,
  body: Buffer | null
): Promise<Answer> {
  try {
    const r = await fetch(`http://127.0.0.1:${adminPort}${path}`, {
      method,
      ...(body !== null && body.length > 0 ? { body, headers: { 'content-type': 'application/json' } } : {}),
      signal: AbortSignal.timeout(10_000)
    })
    return { worker, status: r.status, type: r.headers.get('content-type') ?? 'application/json', body: await r.text() }
  } catch (err) {
    return { worker, status: 502, type: 'application/json', body: JSON.stringify({ error: (err as Error).message }) }
  }
}

/**
 * The one admin listener of a multi-worker gateway (the main process). /livez answers here; /metrics
 * sums every worker's metrics (prom-client's AggregatorRegistry); /readyz is ready while no drain runs
 * and at least one worker is ready; POST /admin/reload reloads every worker. Every other admin request
 * is passed to the workers' internal admin listeners (127.0.0.1, ephemeral ports); GET /admin/upstreams
 * merges every worker's view (workers/merge-upstreams.ts); other reads go to the first
 * worker that is up, writes (token revocation …) to every worker, answered with the first failure or
 * else the first answer.
 */
export async function startMainAdmin(
  host: AdminHost,
  listenHost: string,
  port: number
): Promise<{ port: number; close: () => void }> {
  const app = uWS.App()
  app.get('/livez', res => sendJson(res, 200, { live: true }))
  app.get('/metrics', res => {
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    host.metrics().then(
      m => {
        if (!aborted) send(res, 200, m.contentType, m.text)
      },
      err => {
        host.log.error({ event: 'metrics_failed', err }, 'collecting metrics failed')
        if (!aborted) send(res, 500, 'text/plain', 'metrics collection failed\n')
      }
    )
  })
  app.get('/admin/workers', res => sendJson(res, 200, host.describe()))
  app.get('/readyz', (res, req) => {
    const query = req.getQuery() ?? ''
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    const path = `/readyz${query === '' ? '' : `?${query}`}`
    Promise.all(host.workerAdmins().map(w => ask(w.adminPort, w.worker, 'GET', path, null))).then(
      answers => {
        if (aborted) return
        const workers = answers.map(a => ({ worker: a.worker, ...(JSON.parse(a.body) as Record<string, unknown>) }))
        const reasons: string[] = []
        if (host.leaving()) reasons.push('draining')
        if (!answers.some(a => a.status === 200)) reasons.push('no worker is ready')
        sendJson(res, reasons.length === 0 ? 200 : 503, { ready: reasons.length === 0, reasons, workers })
      },
      () => {}
    )
  })
  // Every worker's replicas, merged (workers/merge-upstreams.ts): one gateway's view, as with one process.
  app.get('/admin/upstreams', res => {
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    Promise.all(host.workerAdmins().map(w => ask(w.adminPort, w.worker, 'GET', '/admin/upstreams', null))).then(
      answers => {
        if (aborted) return
        const views = answers
          .filter(a => a.status === 200)
          .map(a => ({ worker: a.worker, view: JSON.parse(a.body) as Record<string, unknown> }))
        if (views.length === 0) return sendJson(res, 503, { error: 'no worker is up' })
        sendJson(res, 200, mergeUpstreams(views, host.instanceId))
      },
      () => {}
    )
  })
  app.post('/admin/reload', res => {
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    host.reload('admin').then(
      r => {
        if (aborted) return
        const first = (r.reports[0]?.report ?? {}) as Record<string, unknown>
        sendJson(res, r.ok ? 200 : 409, { ...first, ok: r.ok, workers: r.reports })
      },
      () => {
        if (!aborted) sendJson(res, 500, { ok: false, problems: ['reload failed'] })
      }
    )
  })
  app.any('/*', (res, req) => {
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
      const body = Buffer.concat(chunks)
      const admins = host.workerAdmins()
      const targets = method === 'GET' || method === 'HEAD' ? admins.slice(0, 1) : admins
      Promise.all(targets.map(w => ask(w.adminPort, w.worker, method, path, body))).then(
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
  const socket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(listenHost, port, s => {
      if (s === false) reject(new Error(`cannot listen on ${listenHost}:${port} (in use, or not permitted)`))
      else resolve(s)
    })
  })
  return {
    port: uWS.us_socket_local_port(socket as unknown as uWS.us_socket),
    close: () => {
      uWS.us_listen_socket_close(socket)
      ;(app as unknown as { close: () => void }).close()
    }
  }
}
