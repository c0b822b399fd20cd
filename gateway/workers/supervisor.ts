import { fork, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:net'
import type { Config } from '../config/types'
import { MemoryStore } from '../store/memory'
import type { HealthRecord, Store } from '../store/port'
import type { Logger } from '../telemetry/log'
import { Metrics, PREFIX } from '../telemetry/metrics'
import { aggregateWorkers, type ProcessMetrics } from '../telemetry/worker-metrics'
import { startMainAdmin } from './main-admin'
import { type StoreAsk, WORKER_ENV, WORKER_INSTANCE_ENV, WORKER_PORT_ENV, type ToMain, type ToWorker } from './protocol'

export interface SupervisorOptions {
  config: Config
  /** The arguments that start one worker: the same CLI with `serve --config FILE`. */
  workerArgs: string[]
  workers: number
  log: Logger
  instanceId: string
}

export interface Supervisor {
  readonly port: number
  readonly adminPort: number
  reload: (trigger: string) => Promise<unknown>
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
  restarts: number
  /** Exits in a row that came soon after a start (the backoff grows with them). */
  quickExits: number
  streams: Map<string, number>
}

async function freePort(host: string): Promise<number> {
  const s = createServer()
  await new Promise<void>((resolve, reject) => {
    s.once('error', reject)
    s.listen(0, host, () => resolve())
  })
  const port = (s.address() as { port: number }).port
  await new Promise<void>(resolve => s.close(() => resolve()))
  return port
}

/**
 * `serve --workers N` (N > 1): the main process. It forks N worker processes (each a whole gateway whose
 * uWS app listens on the same public port: SO_REUSEPORT, the kernel spreads new connections), holds the
 * in-memory store they share (health verdicts, stream counts, affinity) and the directory of their vendor
 * sessions, serves the one admin listener (metrics summed over the workers), fans signals out, and
 * restarts a worker that exits unexpectedly (with backoff, counted). Worker processes rather than threads:
 * a thread that ends with uWS sockets open aborts the whole process, so a crash would take every leg.
 */
export async function startSupervisor(opts: SupervisorOptions): Promise<Supervisor> {
  const { config, log } = opts
  const metrics = new Metrics()
  metrics.workers.set(opts.workers)
  // The workers' memory store: health and affinity here, stream counts per worker.
  const store = new MemoryStore(opts.instanceId)
  await store.start()
  const directory = new Map<string, { worker: number; caller: string }>()
  const tagKey = randomBytes(32).toString('hex')
  const port = config.listen.port !== 0 ? config.listen.port : await freePort(config.listen.host)
  const slots: Slot[] = Array.from({ length: opts.workers }, (_, index) => ({
    index,
    child: null,
    up: false,
    pid: 0,
    adminPort: 0,
    startedAt: 0,
    restarts: 0,
    quickExits: 0,
    streams: new Map()
  }))
  let stopping = false
  let leaving = false
  const asks = new Map<number, (m: ToMain) => void>()
  let nextAsk = 1

  const post = (slot: Slot, m: ToWorker): void => {
    if (slot.child?.connected) slot.child.send(m)
  }
  const everyUp = (): Slot[] => slots.filter(s => s.up)
  const broadcast = (m: ToWorker, except = -1): void => {
    for (const s of everyUp()) if (s.index !== except) post(s, m)
  }
  const syncAll = (): void => {
    const leader = everyUp()[0]?.index ?? -1
    const health = [...store.sharedHealth()]
    for (const s of everyUp()) {
      const others = new Map<string, number>()
      for (const o of slots) if (o !== s) for (const [k, n] of o.streams) others.set(k, (others.get(k) ?? 0) + n)
      post(s, { t: 'sync', health, others: [...others], leader: s.index === leader })
    }
  }
  const syncTimer = setInterval(syncAll, Math.max(100, config.store.syncIntervalSeconds * 1000))
  syncTimer.unref()

  const onMessage = (slot: Slot, m: ToMain): void => {
    switch (m.t) {
      case 'streams':
        slot.streams = new Map(m.counts)
        return
      case 'health':
        store.writeHealth(m.key, m.record as HealthRecord)
        syncAll()
        return
      case 'aff-set':
        store.setAffinity(m.key, m.affinity, m.ttlSeconds)
        return
      case 'aff-del':
        store.deleteAffinity(m.key, m.legId)
        return
      case 'aff-get':
        store.getAffinity(m.key).then(
          a => post(slot, { t: 'aff', id: m.id, affinity: a }),
          () => post(slot, { t: 'aff', id: m.id, affinity: null })
        )
        return
      case 'store-ask': {
        const done = answer(store, m.ask)
        done.then(
          value => post(slot, { t: 'store-answer', id: m.id, value }),
          (err: unknown) => post(slot, { t: 'store-answer', id: m.id, value: null, error: String(err) })
        )
        return
      }
      case 'dir-add':
        directory.set(m.key, { worker: slot.index, caller: m.caller })
        broadcast({ t: 'dir-add', key: m.key, worker: slot.index, caller: m.caller }, slot.index)
        return
      case 'dir-del':
        if (directory.get(m.key)?.worker === slot.index) directory.delete(m.key)
        broadcast({ t: 'dir-del', key: m.key, worker: slot.index }, slot.index)
        return
      case 'relay': {
        const to = slots[m.to]
        if (to?.up) post(to, { t: 'relay', from: slot.index, link: m.link, m: m.m })
        // The other end is gone: the sender hears it through `worker-gone`.
        return
      }
      case 'metrics':
      case 'reloaded':
        asks.get(m.id)?.(m)
        asks.delete(m.id)
        return
      default:
        return
    }
  }

  let firstStart: ((err: Error | null) => void) | null = null
  const spawn = (slot: Slot): void => {
    const child = fork(opts.workerArgs[0], opts.workerArgs.slice(1), {
      serialization: 'advanced',
      env: {
        ...process.env,
        [WORKER_ENV]: String(slot.index),
        [WORKER_PORT_ENV]: String(port),
        [WORKER_INSTANCE_ENV]: opts.instanceId,
        // One key of the re-attach caller tags for the whole group (auth/hook-auth.ts), so a worker can check another's.
        ASSIST_GATEWAY_TAG_KEY: tagKey
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc']
    })
    slot.child = child
    slot.startedAt = Date.now()
    child.on('message', raw => {
      const m = raw as ToMain
      if (m.t === 'ready') {
        slot.up = true
        slot.pid = m.pid
        slot.adminPort = m.adminPort
        post(slot, { t: 'dir', entries: [...directory].map(([k, e]) => [k, e.worker, e.caller]) })
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
    const wasUp = slot.up
    slot.up = false
    slot.child = null
    slot.streams = new Map()
    for (const [k, e] of directory) if (e.worker === slot.index) directory.delete(k)
    broadcast({ t: 'worker-gone', worker: slot.index })
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
    killAll()
    clearInterval(syncTimer)
    throw err
  }

  const askAll = async (make: (id: number) => ToWorker): Promise<{ worker: number; m: ToMain | null }[]> =>
    await Promise.all(
      everyUp().map(
        async s =>
          await new Promise<{ worker: number; m: ToMain | null }>(resolve => {
            const id = nextAsk++
            const timer = setTimeout(() => {
              asks.delete(id)
              resolve({ worker: s.index, m: null })
            }, 10_000)
            asks.set(id, m => {
              clearTimeout(timer)
              resolve({ worker: s.index, m })
            })
            post(s, make(id))
          })
      )
    )

  const aggregate = async (): Promise<{ contentType: string; text: string }> => {
    const answers = await askAll(id => ({ t: 'metrics', id }))
    const lists: ProcessMetrics[] = []
    metrics.workerLegsActive.reset()
    for (const a of answers) {
      if (a.m?.t !== 'metrics') continue
      const list = a.m.json as { name: string; values?: { value: number }[] }[]
      const active = list.find(x => x.name === `${PREFIX}audio_sessions_active`)
      metrics.workerLegsActive.set(
        { worker: String(a.worker) },
        (active?.values ?? []).reduce((n, v) => n + v.value, 0)
      )
      lists.push({ worker: String(a.worker), json: list })
    }
    lists.push({ worker: 'main', json: await metrics.registry.getMetricsAsJSON() })
    return await aggregateWorkers(lists)
  }

  const reload = async (trigger: string): Promise<{ ok: boolean; reports: { worker: number; report: unknown }[] }> => {
    const answers = await askAll(id => ({ t: 'reload', id, trigger }))
    const reports = answers.map(a => ({ worker: a.worker, report: a.m?.t === 'reloaded' ? a.m.report : null }))
    return { ok: answers.every(a => a.m?.t === 'reloaded' && a.m.ok), reports }
  }

  let admin: { port: number; close: () => void }
  try {
    admin = await startMainAdmin(
      {
        log,
        leaving: () => leaving,
        workerAdmins: () => everyUp().map(s => ({ worker: s.index, adminPort: s.adminPort })),
        metrics: aggregate,
        reload,
        describe: () => ({
          workers: slots.map(s => ({ worker: s.index, up: s.up, pid: s.pid, restarts: s.restarts }))
        }),
        instanceId: opts.instanceId
      },
      config.admin.host,
      config.admin.port
    )
  } catch (err) {
    killAll()
    clearInterval(syncTimer)
    throw err
  }
  log.info(
    { event: 'listening', host: config.listen.host, port, adminPort: admin.port, workers: opts.workers },
    `gateway listening with ${opts.workers} worker processes`
  )

  let drained: Promise<void> | null = null
  return {
    port,
    adminPort: admin.port,
    reload,
    drain: signal => {
      drained ??= (async () => {
        leaving = true
        metrics.draining.set(1)
        stopping = true
        const gone = slots
          .filter(s => s.child !== null)
          .map(s => new Promise<void>(resolve => s.child!.once('exit', () => resolve())))
        for (const s of slots) post(s, { t: 'drain', signal })
        const cut = setTimeout(killAll, (config.shutdown.deadlineSeconds + 5) * 1000)
        await Promise.all(gone)
        clearTimeout(cut)
        clearInterval(syncTimer)
        admin.close()
        await store.close()
      })()
      return drained
    },
    stopNow: why => {
      stopping = true
      for (const s of slots) post(s, { t: 'stop', why })
    }
  }
}

/** The main process's memory store answers a worker's call. */
function answer(store: Store, a: StoreAsk): Promise<unknown> {
  switch (a.op) {
    case 'revoke':
      return store.revokeToken(a.jti, a.untilEpochMs, a.nowMs)
    case 'revoked':
      return store.isTokenRevoked(a.jti, a.nowMs)
    case 'fail':
      return store.countFailure(a.key, a.windowMs, a.nowMs)
    case 'join-claim':
      return store.claimJoin(a.key, a.owner, a.ttlMs, a.replacing)
    case 'join-release':
      store.releaseJoin(a.key, a.instance)
      return Promise.resolve(null)
  }
}
