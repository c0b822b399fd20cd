/**
 * `npm run bench -- text [--vs-nginx|--no-nginx] [--floor] [--base DIR] [--connections 64] [--seconds 10] [--warmup 3] [--rounds 2]
 *                        [--threads 1] [--mapping passthrough|json-events] [--profile] [--no-pin]`
 *
 * The gateway next to nginx, in one run, on one upstream, under one load generator (plain HTTP):
 * - upstream: nginx `return 200` with a fixed JSON answer (one worker), or, without nginx, the vendor
 *   emulator (`assist-gateway vendor`);
 * - A: the gateway (text auth on: a static credential checked on every request; schema validation; the
 *   route's mapping, passthrough by default) in front of it;
 * - B: nginx (one worker, keep-alive upstream pool) proxying to the same upstream;
 * - load: wrk (N keep-alive connections, `--latency`), or without wrk the bench's own closed-loop client;
 * - A B A B (`--rounds`): every round measures both, so a noisy neighbour hits both alike.
 * CPU from /proc/<pid>/stat (utime+stime) of the gateway and of nginx's master and worker. With 2+
 * cores the gateway and the nginx proxy sit on the last core, the load generator and the upstream on
 * the others (`--no-pin`: off). Without nginx it says so and prints the gateway's absolute figures.
 * `--base <checkout>`: one more target, the same config served by another checkout's build (its
 * bin/assist-gateway.js), for a before/after in one run. `--floor`: five more targets on the gateway's core, uWS + undici with nothing between (text-floor.ts:
 * undici's `request`, `dispatch` with a raw handler, `dispatch` pipelined), so the gateway's own work per
 * request shows as its CPU per request over theirs; uWS with the cheapest client Node can run (`raw`:
 * what a hand-written client could at best save); and uWS alone answering at once (`listener`).
 */
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { cpus, tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import {
  benchConfigHead,
  exited,
  fmt,
  fmtInt,
  fmtMiB,
  freePort,
  machineLine,
  noisy,
  noisyMark,
  numberFlag,
  onExit,
  PACKAGE_ROOT,
  pin,
  procCpu,
  progress,
  Report,
  round,
  rssBytes,
  runqueueWaitMicros,
  sleep,
  stopChild,
  UsageError,
  type MeasuredTarget
} from './lib'
import { findNginx, nginxPids, nginxVersion, startNginx, type Nginx } from './nginx'
import { LoadRun, openConns, spawnCli, topFunctions, waitOk, type Child } from './text-load'
import { findWrk, runWrk, wrkScript, type WrkResult } from './wrk'
import { FLOOR_MODES, startFloor, type Floor } from './text-floor'

export const TEXT_NGINX_FLAGS = ['rounds', 'threads', 'base']
export const TEXT_NGINX_BOOLEANS = ['vs-nginx', 'no-nginx', 'no-pin', 'floor']

/** What the upstream answers (the vendor emulator's passthrough answer, the same bytes from nginx). */
const ANSWER = JSON.stringify({
  command: 'MESSAGE',
  messageType: 'SUGGESTION',
  message: 'Offer a refund for the duplicate charge.',
  parameters: {}
})

export const BODY = JSON.stringify({
  contactId: 584930211,
  busNo: 4594,
  tenantId: 'tenant-eu-1',
  participantId: 'patron',
  messageBody: 'Hi, I was charged twice for my last order.',
  messageData: { channel: 'chat' },
  agentAssistAppConfig: { language: 'en-US' }
})

export interface Target extends MeasuredTarget {
  /** gateway, nginx, or floor-<mode> (text-floor.ts: uWS + undici with nothing between). */
  name: string
  rounds: TextRound[]
}

/** One measured load run on a target. */
export interface TextRound {
  rps: number
  cpuUsPerReq: number
  cpuPct: number
  waitMsPerS: number
  w: WrkResult
}

/** A target served by one child process (the gateway, the --base gateway). */
export function childTarget(name: string, c: Child, url: string): Target {
  return {
    name,
    url,
    cpuUs: () => procCpu(c.pid).total,
    rss: () => rssBytes(c.pid),
    alive: () => !exited(c.child),
    pids: () => [c.pid],
    rounds: []
  }
}

function waitUs(t: Target): number {
  return t.pids().reduce((a, p) => a + (runqueueWaitMicros(p) || 0), 0)
}

/** Run `load` on `t` for `seconds`: its requests/s, CPU per request and share of a core, run-queue wait (kept in t.rounds). */
export async function measureRound(
  t: Target,
  load: (t: Target, seconds: number) => Promise<WrkResult>,
  seconds: number
): Promise<TextRound> {
  const c0 = t.cpuUs()
  const q0 = waitUs(t)
  const w = await load(t, seconds)
  const cpu = t.cpuUs() - c0
  const round: TextRound = {
    waitMsPerS: (waitUs(t) - q0) / 1000 / w.seconds,
    rps: w.requestsPerSecond,
    cpuUsPerReq: cpu / Math.max(1, w.requests),
    cpuPct: (100 * cpu) / (w.seconds * 1e6),
    w
  }
  t.rounds.push(round)
  return round
}

/** The text bench's upstream: nginx `return 200` with ANSWER (passthrough, nginx installed), else the vendor emulator. */
export interface TextUpstream {
  url: string
  pids: number[]
  what: string
  stop: () => Promise<void>
}

export async function startTextUpstream(nginxBin: string | null, mapping: string): Promise<TextUpstream> {
  if (nginxBin !== null && mapping === 'passthrough') {
    const n = await startNginx(
      nginxBin,
      'upstream',
      () => `    location / { default_type application/json; return 200 '${ANSWER}'; }`
    )
    return {
      url: `http://127.0.0.1:${n.port}`,
      pids: nginxPids(n),
      what: 'nginx `return 200` (1 worker), fixed JSON answer',
      stop: n.stop
    }
  }
  const vendorPort = await freePort()
  const emulator = spawnCli(['vendor', '--kind', mapping, '--port', String(vendorPort)])
  await waitOk(emulator, `http://127.0.0.1:${vendorPort}/healthz`, 'the vendor emulator')
  return {
    url: `http://127.0.0.1:${vendorPort}`,
    pids: [emulator.pid],
    what: `vendor emulator (${mapping})`,
    stop: async () => await stopChild(emulator.child, 2000)
  }
}

/**
 * A text bench gateway on free ports: text auth on (the static credential BENCH_TEXT_TOKEN = `token`,
 * checked on every request), schema validation, the route's `mapping`, one upstream. `bin`: another
 * checkout's CLI (--base). Its config is written to `dir`/`name`.yaml.
 */
export async function startTextGateway(
  dir: string,
  name: string,
  o: { mapping: string; upstreamUrl: string; token: string; nodeArgs?: string[]; bin?: string }
): Promise<{ child: Child; port: number }> {
  const [port, metricsPort] = [await freePort(), await freePort()]
  const config = {
    ...benchConfigHead(port, metricsPort),
    shutdown: { drainDelaySeconds: 0, metricsLingerSeconds: 0 },
    health: { active: { kind: 'http', path: '/healthz' } },
    routes: {
      bench: {
        mapping: join(PACKAGE_ROOT, 'mappings', `${o.mapping}.yaml`),
        auth: { text: ['${BENCH_TEXT_TOKEN}'] },
        upstreams: [{ name: 'upstream', text: o.upstreamUrl }]
      }
    }
  }
  const file = join(dir, `${name}.yaml`)
  writeFileSync(file, stringify(config))
  const child = spawnCli(['serve', '--config', file], { BENCH_TEXT_TOKEN: o.token }, o.nodeArgs ?? [], o.bin)
  await waitOk(child, `http://127.0.0.1:${metricsPort}/livez`, `the ${name}`)
  return { child, port }
}

/** The bench's own closed-loop client when wrk is missing, with wrk's figures. */
async function builtinLoad(
  port: number,
  path: string,
  headers: Record<string, string>,
  connections: number,
  seconds: number
): Promise<WrkResult> {
  const head = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')
  const request = Buffer.from(
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${head}Content-Length: ${Buffer.byteLength(BODY)}\r\n\r\n${BODY}`
  )
  const run = new LoadRun()
  const conns = await openConns(connections, port, false, request, run, null)
  const t0 = performance.now()
  for (const c of conns) c.start()
  await sleep(seconds * 1000)
  const s = (performance.now() - t0) / 1000
  const done = run.done
  const ok = run.statuses.get(200) ?? 0
  const lat = run.hist.summary()
  for (const c of conns) c.stop()
  return {
    requests: done,
    seconds: s,
    requestsPerSecond: done / s,
    p50: lat.p50,
    p90: lat.p90,
    p99: lat.p99,
    max: lat.max,
    non2xx: done - ok,
    socketErrors: [...run.errors.values()].reduce((a, b) => a + b, 0) + run.closed,
    raw: ''
  }
}

export async function runTextVsNginx(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const connections = numberFlag(flags, 'connections', 64, { integer: true, min: 1, max: 10000 })
  const seconds = numberFlag(flags, 'seconds', 10, { min: 1, max: 3600 })
  const warmup = numberFlag(flags, 'warmup', 3, { min: 0, max: 600 })
  const rounds = numberFlag(flags, 'rounds', 2, { integer: true, min: 1, max: 20 })
  const threads = numberFlag(flags, 'threads', 1, { integer: true, min: 1, max: 64 })
  const mapping = flags.get('mapping') ?? 'passthrough'
  if (!['json-events', 'passthrough'].includes(mapping))
    throw new UsageError('--mapping must be json-events or passthrough')
  const profile = flags.has('profile')
  const nginxBin = flags.has('no-nginx') ? null : findNginx()
  const wrkBin = findWrk()
  const cores = cpus().length
  const dir = mkdtempSync(join(tmpdir(), 'assist-gateway-text-bench-'))
  onExit(() => rmSync(dir, { recursive: true, force: true }))
  if (nginxBin === null)
    progress(
      flags.has('no-nginx')
        ? 'text: --no-nginx: the gateway alone'
        : 'text: nginx is not installed: absolute figures only'
    )
  if (wrkBin === null) progress("text: wrk is not installed: the bench's own closed-loop client drives the load")

  // ---- the upstream ----
  const upstream = await startTextUpstream(nginxBin, mapping)
  const upstreamUrl = upstream.url
  const upstreamPids = upstream.pids

  // ---- the gateway ----
  const token = `bench-${randomBytes(12).toString('hex')}`
  // Kept after the run (printed): the profile is for reading afterwards.
  const profileDir = join(tmpdir(), `assist-gateway-text-profile-${process.pid}`)
  const { child: gw, port } = await startTextGateway(dir, 'gateway', {
    mapping,
    upstreamUrl,
    token,
    nodeArgs: profile ? ['--cpu-prof', '--cpu-prof-dir', profileDir] : []
  })

  // ---- --base <checkout>: the same gateway config served by another build (before/after in one run) ----
  let base: { child: Child; port: number } | null = null
  const baseRoot = flags.get('base')
  if (baseRoot !== undefined) {
    const bin = join(baseRoot, 'bin', 'assist-gateway.js')
    if (!existsSync(bin)) throw new UsageError(`--base: ${bin} does not exist`)
    base = await startTextGateway(dir, 'gateway-base', { mapping, upstreamUrl, token, bin })
  }

  // ---- nginx as the proxy ----
  let proxy: Nginx | null = null
  if (nginxBin !== null) {
    proxy = await startNginx(
      nginxBin,
      'proxy',
      () => `    location / {
      proxy_pass http://vendor;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering on;
    }`,
      `upstream vendor { server ${upstreamUrl.replace('http://', '')}; keepalive 128; }`
    )
  }

  // ---- the floor: uWS + undici with nothing between (--floor) ----
  const floors: Floor[] = []
  if (flags.has('floor'))
    for (const m of FLOOR_MODES) floors.push(await startFloor(m, upstreamUrl, connections, ANSWER))

  let pinning = 'off (--no-pin)'
  if (!flags.has('no-pin')) {
    const last = String(cores - 1)
    const rest = cores > 2 ? `0-${cores - 2}` : '0'
    const ok =
      cores >= 2 &&
      pin(gw.pid, last) &&
      (proxy === null || nginxPids(proxy).every(p => pin(p, last))) &&
      floors.every(f => pin(f.pid, last)) &&
      (base === null || pin(base.child.pid, last)) &&
      upstreamPids.every(p => pin(p, rest)) &&
      pin(process.pid, rest)
    pinning = ok
      ? `gateway${proxy !== null ? ' and nginx proxy' : ''} on core ${last}; load generator and upstream on ${rest}`
      : 'not possible (one core, or taskset unavailable)'
  }
  const wrkPrefix = pinning.startsWith('gateway') ? ['taskset', '-c', cores > 2 ? `0-${cores - 2}` : '0'] : []

  const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` }
  const script = wrkBin === null ? '' : wrkScript(dir, 'text', headers, BODY)
  const targets: Target[] = [childTarget('gateway', gw, `http://127.0.0.1:${port}/text/bench`)]
  if (proxy !== null) {
    const p = proxy
    targets.push({
      name: 'nginx',
      url: `http://127.0.0.1:${p.port}/text/bench`,
      cpuUs: p.cpuUs,
      rss: p.rss,
      alive: () => !exited(p.child),
      pids: () => nginxPids(p),
      rounds: []
    })
  }
  if (base !== null) targets.push(childTarget('gateway-base', base.child, `http://127.0.0.1:${base.port}/text/bench`))
  for (const f of floors)
    targets.push({
      name: `floor-${f.mode}`,
      url: `http://127.0.0.1:${f.port}/text/bench`,
      cpuUs: f.cpuUs,
      rss: f.rss,
      alive: f.alive,
      pids: () => [f.pid],
      rounds: []
    })
  const load = async (t: Target, s: number): Promise<WrkResult> => {
    if (wrkBin !== null)
      return await runWrk(wrkBin, t.url, script, { connections, threads, seconds: s, prefix: wrkPrefix })
    const u = new URL(t.url)
    return await builtinLoad(Number(u.port), u.pathname, headers, connections, s)
  }
  progress(`text: pinning: ${pinning}`)
  for (const t of targets) {
    if (warmup > 0) {
      progress(`text: warm-up ${t.name} ${warmup} s`)
      await load(t, warmup)
    }
  }
  for (let r = 0; r < rounds; r++) {
    for (const t of targets) {
      progress(`text: round ${r + 1}/${rounds}: ${t.name}, ${connections} connections, ${seconds} s`)
      await measureRound(t, load, seconds)
    }
  }
  const rss = targets.map(t => t.rss())
  const alive = targets.map(t => t.alive())
  await stopChild(gw.child, 10_000)
  if (proxy !== null) await proxy.stop()
  for (const f of floors) await f.stop()
  if (base !== null) await stopChild(base.child.child, 10_000)
  await upstream.stop()

  // ---- figures ----
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length
  const fig = targets.map((t, i) => ({
    name: t.name,
    rps: mean(t.rounds.map(x => x.rps)),
    rpsEach: t.rounds.map(x => x.rps),
    cpuUsPerReq: mean(t.rounds.map(x => x.cpuUsPerReq)),
    cpuPct: mean(t.rounds.map(x => x.cpuPct)),
    waitMsPerS: mean(t.rounds.map(x => x.waitMsPerS)),
    p50: mean(t.rounds.map(x => x.w.p50)),
    p99: mean(t.rounds.map(x => x.w.p99)),
    max: Math.max(...t.rounds.map(x => x.w.max)),
    non2xx: t.rounds.reduce((s, x) => s + x.w.non2xx, 0),
    errors: t.rounds.reduce((s, x) => s + x.w.socketErrors, 0),
    requests: t.rounds.reduce((s, x) => s + x.w.requests, 0),
    rss: rss[i],
    alive: alive[i]
  }))
  const g = fig[0]
  const n = fig.find(f => f.name === 'nginx') ?? null
  const floorFigs = fig.filter(f => f.name.startsWith('floor-'))
  const gen = wrkBin !== null ? `wrk -t${threads} -c${connections}` : `built-in closed loop, ${connections} connections`
  const rep = new Report(
    `text: POST /text/bench (${mapping} mapping, credential checked, schema validated) vs nginx proxy_pass, same upstream; ${gen}`
  )
  rep.row('upstream', upstream.what)
  rep.row(
    'nginx',
    nginxBin !== null
      ? `${nginxVersion(nginxBin)}, 1 worker, keepalive 128 to the upstream`
      : 'not installed (or --no-nginx): no comparison'
  )
  rep.row('rounds', `${rounds} × (${targets.map(t => t.name).join(', ')}), ${seconds} s each after ${warmup} s warm-up`)
  rep.row('CPU pinning', pinning)
  for (const f of fig) {
    rep.section(f.name)
    rep.row('requests/s', `${fmtInt(f.rps)}  (rounds: ${f.rpsEach.map(x => fmtInt(x)).join(', ')})`)
    rep.row('latency (ms)', `p50 ${fmt(f.p50, 3)}  p99 ${fmt(f.p99, 3)}  max ${fmt(f.max, 3)}`)
    rep.row('CPU', `${fmt(f.cpuUsPerReq, 1)} µs per request; ${fmt(f.cpuPct, 1)} % of one core (utime+stime)`)
    rep.row(
      'waiting for a CPU',
      `${fmt(f.waitMsPerS, 1)} ms/s in the run queue (/proc/<pid>/schedstat)${noisyMark(f.waitMsPerS)}`
    )
    rep.row('errors', `${fmtInt(f.non2xx)} non-2xx of ${fmtInt(f.requests)}; ${fmtInt(f.errors)} socket errors`)
    rep.row('RSS', fmtMiB(f.rss))
    if (!f.alive) rep.row('WARNING', `${f.name} exited during the run`)
  }
  if (profile) {
    rep.section(`gateway CPU profile: ${profileDir} (whole run, warm-up included)`)
    topFunctions(profileDir, rep)
  }
  rep.print()
  console.log('')
  const summary = new Report(`SUMMARY text (${machineLine()})`)
  summary.row(
    'gateway',
    `${fmtInt(g.rps)} req/s, ${fmt(g.cpuUsPerReq, 1)} µs CPU/req, p50 ${fmt(g.p50, 2)} ms, p99 ${fmt(g.p99, 2)} ms, ${fmtInt(g.non2xx + g.errors)} errors${noisy(g.waitMsPerS)}`
  )
  if (n !== null) {
    summary.row(
      'nginx',
      `${fmtInt(n.rps)} req/s, ${fmt(n.cpuUsPerReq, 1)} µs CPU/req, p50 ${fmt(n.p50, 2)} ms, p99 ${fmt(n.p99, 2)} ms, ${fmtInt(n.non2xx + n.errors)} errors${noisy(n.waitMsPerS)}`
    )
    summary.row(
      'ratio gateway / nginx',
      `req/s ${fmt(g.rps / n.rps, 2)}×; CPU per request ${fmt(g.cpuUsPerReq / n.cpuUsPerReq, 2)}× (target: req/s ≥ 0.5×)`
    )
    // What one busy core would carry at the CPU per request measured: not limited by the load generator
    // or by neighbours, which the req/s above are when the proxy's core is not saturated.
    summary.row(
      'per core (1 s / CPU per request)',
      `gateway ${fmtInt(1e6 / g.cpuUsPerReq)} req/s, nginx ${fmtInt(1e6 / n.cpuUsPerReq)} req/s: ${fmt(n.cpuUsPerReq / g.cpuUsPerReq, 2)}×`
    )
  } else {
    summary.row('nginx', 'not installed: no ratio')
  }
  const b = fig.find(f => f.name === 'gateway-base')
  if (b !== undefined)
    summary.row(
      `gateway-base (${flags.get('base')})`,
      `${fmtInt(b.rps)} req/s, ${fmt(b.cpuUsPerReq, 1)} µs CPU/req${n !== null ? ` (${fmt(b.rps / n.rps, 2)}× nginx req/s)` : ''}; gateway / base: CPU per request ${fmt(g.cpuUsPerReq / b.cpuUsPerReq, 2)}×, req/s ${fmt(g.rps / b.rps, 2)}×${noisy(b.waitMsPerS)}`
    )
  // The floor: uWS + undici with nothing between; the gateway's own work is its CPU per request over it.
  for (const f of floorFigs)
    summary.row(
      f.name,
      `${fmtInt(f.rps)} req/s, ${fmt(f.cpuUsPerReq, 1)} µs CPU/req${n !== null ? ` (${fmt(f.rps / n.rps, 2)}× nginx req/s)` : ''}; gateway − floor ${fmt(g.cpuUsPerReq - f.cpuUsPerReq, 1)} µs/req, ${fmtInt(f.non2xx + f.errors)} errors${noisy(f.waitMsPerS)}`
    )
  summary.print()
  const js = (f: (typeof fig)[number]): Record<string, unknown> => ({
    requestsPerSecond: round(f.rps, 1),
    roundsRequestsPerSecond: f.rpsEach.map(x => round(x, 1)),
    cpuUsPerRequest: round(f.cpuUsPerReq, 1),
    cpuPercent: round(f.cpuPct, 1),
    latencyMs: { p50: round(f.p50), p99: round(f.p99), max: round(f.max) },
    non2xx: f.non2xx,
    socketErrors: f.errors,
    rssBytes: f.rss,
    runqueueWaitMsPerS: round(f.waitMsPerS, 1)
  })
  return {
    machine: machineLine(),
    mapping,
    connections,
    seconds,
    rounds,
    loadGenerator: gen,
    pinning,
    gateway: js(g),
    ...(b !== undefined ? { base: { checkout: flags.get('base'), ...js(b) } } : {}),
    ...(floorFigs.length > 0 ? { floor: Object.fromEntries(floorFigs.map(f => [f.name.slice(6), js(f)])) } : {}),
    ...(n !== null
      ? {
          nginx: js(n),
          ratio: { requestsPerSecond: round(g.rps / n.rps), cpuPerRequest: round(g.cpuUsPerReq / n.cpuUsPerReq) }
        }
      : { nginx: null })
  }
}
