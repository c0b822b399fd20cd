import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { selfSignedPair } from '../helpers/openssl'
import { LoadRun, openConns, spawnCli, topFunctions, waitOk } from './text-load'
import { BODY, runTextVsNginx, TEXT_NGINX_BOOLEANS, TEXT_NGINX_FLAGS } from './text-nginx'
import {
  exited,
  fmt,
  fmtInt,
  fmtMiB,
  freePort,
  installExitHandlers,
  killAllChildren,
  numberFlag,
  onExit,
  PACKAGE_ROOT,
  parseFlags,
  procCpu,
  progress,
  Report,
  round,
  rssBytes,
  sleep,
  stopChild,
  UsageError
} from './lib'

export const TEXT_FLAGS = ['connections', 'seconds', 'warmup', 'mode', 'mapping']
export const TEXT_BOOLEANS = ['profile']

function cpuUs(pid: number): number {
  return procCpu(pid).total
}

interface ModeFigures {
  [k: string]: unknown
}

async function runMode(
  mode: 'plain' | 'tls',
  o: {
    connections: number
    seconds: number
    warmup: number
    mapping: string
    vendorPort: number
    vendorPid: number
    dir: string
    profile: boolean
  }
): Promise<ModeFigures> {
  const [port, metricsPort] = [await freePort(), await freePort()]
  const token = `bench-${randomBytes(12).toString('hex')}`
  let ca: string | null = null
  let tls: Record<string, string> | null = null
  if (mode === 'tls') {
    const { cert, key } = selfSignedPair(o.dir)
    ca = readFileSync(cert, 'utf8')
    tls = { cert, key }
  }
  const config = {
    listen: { host: '127.0.0.1', port, ...(tls !== null ? { tls } : {}) },
    metrics: { host: '127.0.0.1', port: metricsPort },
    admin: { host: '127.0.0.1', port: 0 },
    log: { level: 'warn' },
    health: { active: { kind: 'http', path: '/healthz' } },
    routes: {
      bench: {
        mapping: join(PACKAGE_ROOT, 'mappings', `${o.mapping}.yaml`),
        auth: { text: ['${BENCH_TEXT_TOKEN}'] },
        upstreams: [{ name: 'emulator', text: `http://127.0.0.1:${o.vendorPort}` }]
      }
    }
  }
  const file = join(o.dir, `gateway-${mode}.yaml`)
  writeFileSync(file, stringify(config))
  const profileDir = join(o.dir, `profile-${mode}`)
  const gw = spawnCli(
    ['serve', '--config', file],
    { BENCH_TEXT_TOKEN: token },
    o.profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []
  )
  await waitOk(gw, `http://127.0.0.1:${metricsPort}/livez`, 'the gateway')

  const body = BODY
  const request = Buffer.from(
    `POST /text/bench HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  )
  const run = new LoadRun()
  progress(
    `text/${mode}: gateway pid ${gw.pid} on ${port}; ${o.connections} connections, warm-up ${o.warmup} s, then ${o.seconds} s measured`
  )
  const conns = await openConns(o.connections, port, mode === 'tls', request, run, ca)
  for (const c of conns) c.start()
  await sleep(o.warmup * 1000)
  run.reset()
  const t0 = performance.now()
  const gwCpu0 = cpuUs(gw.pid)
  const vCpu0 = cpuUs(o.vendorPid)
  const selfCpu0 = cpuUs(process.pid)
  await sleep(o.seconds * 1000)
  const windowMs = performance.now() - t0
  const gwCpu = cpuUs(gw.pid) - gwCpu0
  const vCpu = cpuUs(o.vendorPid) - vCpu0
  const selfCpu = cpuUs(process.pid) - selfCpu0
  const done = run.done
  const statuses = Object.fromEntries(run.statuses)
  const lat = run.hist.summary()
  const rss = rssBytes(gw.pid)
  for (const c of conns) c.stop()
  const alive = !exited(gw.child)
  await stopChild(gw.child, 3000)

  const rps = done / (windowMs / 1000)
  const ok = run.statuses.get(200) ?? 0
  const r = new Report(
    `text/${mode}: POST /text/bench (${o.mapping} mapping, text auth on) → local ${o.mapping} emulator, ${o.connections} keep-alive connections`
  )
  r.row(
    'requests/s',
    `${fmtInt(rps)}  (${fmtInt(done)} in ${fmt(windowMs / 1000, 2)} s; 200: ${fmtInt(ok)}${Object.keys(statuses).length > 1 ? `; all: ${JSON.stringify(statuses)}` : ''})`
  )
  r.row(
    'latency (200s, ms)',
    `p50 ${fmt(lat.p50, 3)}  p90 ${fmt(lat.p90, 3)}  p99 ${fmt(lat.p99, 3)}  max ${fmt(lat.max, 3)}`
  )
  r.row(
    'gateway CPU',
    `${fmt((100 * gwCpu) / (windowMs * 1000), 1)} % of one core, ${fmt(gwCpu / Math.max(1, done), 1)} µs per request; RSS ${fmtMiB(rss)}`
  )
  r.row('vendor emulator CPU', `${fmt((100 * vCpu) / (windowMs * 1000), 1)} % of one core`)
  r.row('load generator CPU', `${fmt((100 * selfCpu) / (windowMs * 1000), 1)} % of one core`)
  if (run.errors.size > 0 || run.closed > 0)
    r.row(
      'client errors',
      `${JSON.stringify(Object.fromEntries(run.errors))}; ${run.closed} connections closed by the server`
    )
  if (!alive) r.row('WARNING', `the gateway exited during the run:\n${gw.tail.toString()}`)
  if (o.profile) topFunctions(profileDir, r)
  r.print()
  return {
    requestsPerSecond: round(rps, 1),
    requests: done,
    statuses,
    latencyMs: { p50: round(lat.p50), p90: round(lat.p90), p99: round(lat.p99), max: round(lat.max) },
    gatewayCpuPercent: round((100 * gwCpu) / (windowMs * 1000), 1),
    gatewayCpuUsPerRequest: round(gwCpu / Math.max(1, done), 1),
    vendorCpuPercent: round((100 * vCpu) / (windowMs * 1000), 1),
    generatorCpuPercent: round((100 * selfCpu) / (windowMs * 1000), 1),
    gatewayRssBytes: rss
  }
}

/** The text benchmark's figures (for run.ts's BENCH_JSON). */
export async function runText(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const connections = numberFlag(flags, 'connections', 64, { integer: true, min: 1, max: 10000 })
  const seconds = numberFlag(flags, 'seconds', 10, { min: 1, max: 3600 })
  const warmup = numberFlag(flags, 'warmup', 3, { min: 0, max: 600 })
  const mode = flags.get('mode') ?? 'both'
  if (!['plain', 'tls', 'both'].includes(mode)) throw new UsageError('--mode must be plain, tls or both')
  const mapping = flags.get('mapping') ?? 'json-events'
  const profile = flags.has('profile')
  if (!['json-events', 'passthrough'].includes(mapping))
    throw new UsageError('--mapping must be json-events or passthrough')
  const dir = mkdtempSync(join(tmpdir(), 'assist-gateway-text-bench-'))
  onExit(() => rmSync(dir, { recursive: true, force: true }))
  const vendorPort = await freePort()
  const vendor = spawnCli(['vendor', '--kind', mapping, '--port', String(vendorPort)])
  try {
    await waitOk(vendor, `http://127.0.0.1:${vendorPort}/healthz`, 'the vendor emulator')
    const out: Record<string, unknown> = { connections, seconds, warmup, mapping }
    for (const m of mode === 'both' ? (['plain', 'tls'] as const) : [mode as 'plain' | 'tls']) {
      out[m] = await runMode(m, {
        connections,
        seconds,
        warmup,
        mapping,
        vendorPort,
        vendorPid: vendor.pid,
        dir,
        profile
      })
      console.log('')
    }
    return out
  } finally {
    await stopChild(vendor.child, 2000)
  }
}

/** Entry point for run.ts: parse the flags, run, print the report and one `BENCH_TEXT_JSON {...}` line. */
export async function benchText(args: string[]): Promise<void> {
  installExitHandlers()
  const flags = parseFlags(args, [...TEXT_FLAGS, ...TEXT_NGINX_FLAGS], [...TEXT_BOOLEANS, ...TEXT_NGINX_BOOLEANS])
  // Plain HTTP (the default): side by side with nginx when it is installed. TLS: the gateway alone.
  const mode = flags.get('mode') ?? 'plain'
  const out = mode === 'plain' ? await runTextVsNginx(flags) : await runText(flags)
  console.log(`BENCH_TEXT_JSON ${JSON.stringify(out)}`)
}

// Also runnable on its own: node dist/tests/bench/text.js [flags]
if (require.main === module) {
  benchText(process.argv.slice(2)).then(
    () => {
      killAllChildren()
      process.exit(0)
    },
    (err: unknown) => {
      killAllChildren()
      console.error(err instanceof UsageError ? `bench text: ${err.message}` : err)
      process.exit(err instanceof UsageError ? 2 : 1)
    }
  )
}
