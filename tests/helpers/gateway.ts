import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { stringify } from 'yaml'
import WebSocket from 'ws'
import { serve, type Running } from '../../gateway/cli-serve'
import { validateAll } from '../../gateway/check'
import { loadConfig } from '../../gateway/config/load'
import { createLogger } from '../../gateway/telemetry/log'
import { startVendorEmulator, type EmulatorOptions, type VendorEmulator } from '../../gateway/tools/vendor-emulator'
import { AUDIO_TOKEN, type GatewayProcess, LogCapture, opsUrl, sleep, spawnServe, TEXT_TOKEN } from './serve'

type T = { teardown: (fn: () => unknown) => void; testdir: (fixture?: Record<string, string>) => string }

export { AUDIO_TOKEN, LogCapture, opsUrl, sleep, TEXT_TOKEN } from './serve'
/** What every caller of the admin API sends with a write (server/admin.ts: a tokenless admin refuses it otherwise). */
export const ADMIN_WRITE = { 'content-type': 'application/json', 'x-requested-with': 'assist-gateway' }

/** A gateway as it ships: `serve` in its own process, with the worker count it picks for the machine. */
export type TestGateway = GatewayProcess

/** What the suite's gateways share unless a test says otherwise. */
const BASE = {
  listen: { host: '127.0.0.1', port: 0 },
  metrics: { host: '127.0.0.1', port: 0 },
  admin: { host: '127.0.0.1', port: 0 },
  fleet: { host: '127.0.0.1', port: 0 },
  log: { level: 'debug' },
  // Tests that count vendor sessions or expect an immediate goodbye turn probes and re-attach on themselves.
  health: { active: { kind: 'none' } },
  audio: { reattachGraceSeconds: 0 },
  // Refusals at once and no per-address budget, so suites that refuse credentials stay fast and
  // independent; the abuse tests (auth-abuse.test.ts) set their own.
  auth: { failureDelayMs: 0, failureBudget: { failures: 0 } },
  // Tests that stop it at teardown do not wait out the production drain delays or the final scrape.
  shutdown: { drainDelaySeconds: 0, legDrainSeconds: 0, metricsLingerSeconds: 0 }
}

/**
 * Start a real gateway as it ships: `serve` (the built CLI) in its own process with the worker count it
 * picks for the machine, from `config` over the suite's base, written as YAML. Secrets are passed through
 * ${VAR} references, as the contract asks (AUDIO_TOKEN and TEXT_TOKEN are set, `env` adds more).
 */
export async function startGateway(
  t: T,
  config: Record<string, unknown>,
  env: Record<string, string> = {},
  /** Files written beside the config (a mapping of the test's own: name it `./<file>` in the config). */
  files: Record<string, string> = {}
): Promise<TestGateway> {
  return await spawnServe(t, merge(BASE, config), env, files)
}

/** A gateway in the test's own process (one process, no workers), with what only that exposes. */
export interface InProcessGateway extends Running {
  logs: LogCapture
  url: (path: string) => string
  adminUrl: (path: string) => string
  configFile: string
}

/**
 * A gateway inside the test's process: one process, which no deployment runs with more than one core.
 * Only for a test that must reach inside it (its clock, `nowMs`; its state); such a test says why at the
 * call. Everything else starts `startGateway`.
 */
export async function startGatewayInProcess(
  t: T,
  config: Record<string, unknown>,
  env: Record<string, string> = {},
  opts: { nowMs?: () => number; reloadable?: boolean } = {}
): Promise<InProcessGateway> {
  const dir = t.testdir()
  const configFile = join(dir, 'gateway.yaml')
  writeFileSync(configFile, stringify(merge(BASE, config)))
  const cfg = loadConfig(configFile, { AUDIO_TOKEN, TEXT_TOKEN, ...env })
  const logs = new LogCapture()
  const log = createLogger({ level: 'debug', secrets: cfg.secrets, destination: logs.stream })
  // reloadable: reload re-reads the config file as `serve` does (without it a reload is refused).
  const revalidate = opts.reloadable
    ? async () => await validateAll(configFile, { AUDIO_TOKEN, TEXT_TOKEN, ...env })
    : undefined
  const running = await serve(cfg, { log, nowMs: opts.nowMs, revalidate })
  t.teardown(async () => await running.close())
  const scheme = cfg.listen.tls !== null ? 'https' : 'http'
  const wsScheme = cfg.listen.tls !== null ? 'wss' : 'ws'
  return {
    ...running,
    logs,
    configFile,
    url: (path: string) =>
      `${path.startsWith('/audio/') ? wsScheme : scheme}://127.0.0.1:${running.server.port}${path}`,
    adminUrl: opsUrl(running.server.metricsPort, running.server.adminPort)
  }
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a }
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k]
    out[k] =
      prev !== null &&
      typeof prev === 'object' &&
      !Array.isArray(prev) &&
      v !== null &&
      typeof v === 'object' &&
      !Array.isArray(v) &&
      k !== 'routes'
        ? merge(prev as Record<string, unknown>, v as Record<string, unknown>)
        : v
  }
  return out
}

export async function startVendor(t: T, opts: EmulatorOptions): Promise<VendorEmulator> {
  const v = await startVendorEmulator(opts)
  t.teardown(async () => await v.close())
  return v
}

/** Two emulators of the same options (a route's replicas a and b), started one after the other. */
export async function twoVendors(t: T, opts: EmulatorOptions): Promise<[VendorEmulator, VendorEmulator]> {
  return [await startVendor(t, opts), await startVendor(t, opts)]
}

/** A route config pointing at emulators, with the audio token required. */
export function routeTo(
  vendors: VendorEmulator[],
  mapping: string,
  extra: Record<string, unknown> = {}
): Record<string, unknown> {
  return {
    mapping,
    auth: { audio: ['${AUDIO_TOKEN}'], text: ['${TEXT_TOKEN}'] },
    upstreams: vendors.map((v, i) => ({ name: `r${i}`, audio: v.url, text: v.httpUrl })),
    ...extra
  }
}

export interface PlatformLegClient {
  ws: WebSocket
  answer: Promise<Record<string, unknown>>
  messages: Record<string, unknown>[]
  closed: Promise<{ code: number; reason: string }>
  send: (data: Buffer | string) => void
}

/**
 * Open an audio hook leg as the platform: connect (from `localAddress` when given), send the init message
 * (text) at once. Over wss://, the server's certificate is checked against `ca` when given (else not checked).
 */
export function platformLeg(
  t: T,
  url: string,
  init: unknown,
  opts: { raw?: boolean; localAddress?: string; headers?: Record<string, string>; ca?: string } = {}
): PlatformLegClient {
  const ws = new WebSocket(url, {
    perMessageDeflate: false,
    ...(opts.ca !== undefined ? { ca: opts.ca, rejectUnauthorized: true } : { rejectUnauthorized: false }),
    ...(opts.localAddress !== undefined ? { localAddress: opts.localAddress } : {}),
    ...(opts.headers !== undefined ? { headers: opts.headers } : {})
  })
  const messages: Record<string, unknown>[] = []
  let resolveAnswer!: (v: Record<string, unknown>) => void
  let rejectAnswer!: (err: Error) => void
  const answer = new Promise<Record<string, unknown>>((resolve, reject) => {
    resolveAnswer = resolve
    rejectAnswer = reject
  })
  // A test that never reads the answer is not failed by its absence; one that awaits it gets the error.
  answer.catch(() => {})
  let failure = ''
  const closed = new Promise<{ code: number; reason: string }>(resolve => {
    ws.on('close', (code, reason) => {
      // A leg that ends without a text message never gets an answer: say so rather than wait forever.
      rejectAnswer(new Error(`the leg to ${url} closed (${code} ${reason.toString()}) before any answer${failure}`))
      resolve({ code, reason: reason.toString() })
    })
  })
  ws.on('error', err => {
    failure = `: ${err.message}`
  })
  let first = true
  ws.on('message', (data, isBinary) => {
    if (isBinary) return
    const parsed = JSON.parse(data.toString()) as Record<string, unknown>
    if (first) {
      first = false
      resolveAnswer(parsed)
    } else messages.push(parsed)
  })
  ws.on('open', () => {
    ws.send(opts.raw === true ? String(init) : JSON.stringify(init))
  })
  t.teardown(() => {
    if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.terminate()
  })
  return {
    ws,
    answer,
    messages,
    closed,
    send: data => {
      if (ws.readyState === WebSocket.OPEN) ws.send(data)
    }
  }
}

/** The close of `ws` (code and reason), however it comes. */
export function closeOf(ws: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise(resolve => {
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }))
  })
}

export function untilOpen(ws: WebSocket): Promise<void> {
  return ws.readyState === WebSocket.OPEN
    ? Promise.resolve()
    : new Promise((resolve, reject) => {
        ws.once('open', () => resolve())
        ws.once('error', reject)
      })
}

export interface Upstreams {
  routes: {
    replicas: {
      name: string
      state: string
      activeStreams: number
      fleetStreams: number
      /** With workers: each worker's view of the replica. */
      workers: { worker: number; state: string; activeStreams: number; fleetStreams: number }[]
    }[]
  }[]
  store: { up: boolean }
}

/** GET /admin/upstreams of a gateway, given its admin base URL. */
export async function upstreams(adminBase: string): Promise<Upstreams> {
  return (await (await fetch(`${adminBase}/admin/upstreams`)).json()) as Upstreams
}

/**
 * Poll until `fn` holds (it may be async) or `ms` pass; returns the last value of fn. It returns as soon
 * as the condition holds, so the limit is generous on purpose: a busy machine is slow, not wrong, and only
 * a broken test ever waits it out.
 */
export async function until(fn: () => boolean | Promise<boolean>, ms = 30_000, step = 20): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await fn()) return true
    await sleep(step)
  }
  const last = await fn()
  if (!last) process.stderr.write(`UNTIL_TIMEOUT ${ms} ${new Error().stack?.split('\n')[2]}\n`)
  return last
}

/** Whether the gateway has logged a line with this event (and these fields). */
export function logged(gw: { logs: LogCapture }, event: string, fields: Record<string, unknown> = {}): boolean {
  return gw.logs.lines.some(l => l.event === event && Object.entries(fields).every(([k, v]) => l[k] === v))
}

/**
 * A ping answered by a pong: everything the peer sent before its pong has arrived by the time this
 * resolves (one socket delivers in order). A barrier, not a timer. Resolves at once on a socket not open.
 */
export function roundTrip(ws: WebSocket): Promise<void> {
  if (ws.readyState !== WebSocket.OPEN) return Promise.resolve()
  return new Promise(resolve => {
    const done = (): void => {
      ws.off('pong', done)
      ws.off('close', done)
      resolve()
    }
    ws.on('pong', done)
    ws.on('close', done)
    ws.ping()
  })
}

/**
 * The HTTP status an upgrade request to `url` gets (101 when it opens; a refused one never becomes a socket;
 * 0 when the connection fails), from 127.0.0.7: an address of its own, so a failure budget it spends is its own.
 */
export function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise(resolve => {
    const ws = new WebSocket(url, { headers, localAddress: '127.0.0.7' })
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0)
      ws.terminate()
    })
    ws.on('open', () => {
      resolve(101)
      ws.terminate()
    })
    ws.on('error', () => resolve(0))
  })
}
