import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { connect } from 'node:net'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { claimPort } from '../../gateway/server/listen'
import { spawnCli } from './cli'
import { AUDIO_TOKEN, opsUrl, TEXT_TOKEN, sleep } from './gateway'

type T = { teardown: (fn: () => unknown) => void }

export interface GatewayProcess {
  pid: number
  /** The config file it was started with (a test may rewrite it and send SIGHUP). */
  file: string
  url: (path: string) => string
  adminUrl: (path: string) => string
  output: () => string
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<number | string>
}

/** A port nothing listens on right now (bound to 0 alone, read, let go: the gateway's own claimPort). */
export async function freePort(): Promise<number> {
  return await claimPort('127.0.0.1', 0)
}

/**
 * `n` distinct ports on 127.0.0.1 that refuse connections for the whole run: low ports (from 2 up) that
 * refuse now. Port 1, like 7, 9 and others, is on fetch's list of bad ports: fetch refuses it itself.
 * A port read free and let go (`freePort`) is not that: another test of the suite may bind it a moment
 * later, and a connection meant to be refused then reaches that test's listener. No test binds a port
 * below 1024: they take ephemeral ones, and redis-server ones from 20000 up.
 */
export async function refusedPorts(n: number): Promise<number[]> {
  const ports: number[] = []
  for (let p = 2; ports.length < n && p < 1024; p++) if (await refuses(p)) ports.push(p)
  if (ports.length < n) throw new Error(`fewer than ${n} ports below 1024 refuse connections on 127.0.0.1`)
  return ports
}

function refuses(port: number): Promise<boolean> {
  return new Promise(resolve => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => {
      socket.destroy()
      resolve(false)
    })
    socket.once('error', err => resolve((err as NodeJS.ErrnoException).code === 'ECONNREFUSED'))
  })
}

/**
 * A gateway in its own process (`serve` through the built CLI, bin/assist-gateway.js), on fixed free
 * ports, ready when /livez answers; killed at teardown. `config.listen` adds keys to the public listener
 * (its host and port stay these); with `listen.tls`, `url` gives wss:// and https:// addresses.
 */
export async function spawnGateway(
  t: T,
  config: Record<string, unknown>,
  env: Record<string, string> = {}
): Promise<GatewayProcess> {
  // A free port is read, let go and bound again by the child: in between, another test of the suite may
  // take it. The gateway holds its ports exclusively (server/listen.ts), so that shows as a start that
  // cannot listen, and a start with fresh ports is all it takes; anything else that ends a start is thrown.
  for (let attempt = 1; ; attempt++) {
    try {
      return await spawnOnce(t, config, env)
    } catch (err) {
      if (attempt === 3 || !(err instanceof PortTaken)) throw err
    }
  }
}

/** A start that ended because a port it was given had been taken since it was found free. */
class PortTaken extends Error {}

async function spawnOnce(t: T, config: Record<string, unknown>, env: Record<string, string>): Promise<GatewayProcess> {
  const [port, metricsPort, adminPort, fleetPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort()
  ]
  const secure = (config.listen as { tls?: unknown } | undefined)?.tls != null
  // One test may start several, and t.testdir() is one folder per test (made anew on each call).
  const dir = mkdtempSync(join(tmpdir(), 'assist-gateway-test-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'gateway.yaml')
  writeFileSync(
    file,
    stringify({
      metrics: { host: '127.0.0.1', port: metricsPort },
      fleet: { host: '127.0.0.1', port: fleetPort },
      log: { level: 'info' },
      // As startGateway's base: refusals at once, no per-address failure budget.
      auth: { failureDelayMs: 0, failureBudget: { failures: 0 } },
      ...config,
      // A test's admin keys (a token) go with this listener's port.
      admin: { host: '127.0.0.1', port: adminPort, ...(config.admin as Record<string, unknown> | undefined) },
      listen: { ...(config.listen as Record<string, unknown> | undefined), host: '127.0.0.1', port },
      // Tests that stop it at teardown do not wait out the production drain delays or the final scrape.
      shutdown: {
        drainDelaySeconds: 0,
        legDrainSeconds: 0,
        metricsLingerSeconds: 0,
        ...(config.shutdown as Record<string, unknown> | undefined)
      }
    })
  )
  const child = spawnCli(['serve', '--config', file], {
    env: {
      ...process.env,
      AUDIO_TOKEN,
      TEXT_TOKEN,
      ...env,
      PORT: '',
      ADMIN_PORT: '',
      METRICS_PORT: '',
      REDIS_URL: '',
      GATEWAY_CONFIG: ''
    }
  })
  let out = ''
  const exited = new Promise<number | string>(resolve => {
    child.once('exit', (code, signal) => resolve(code ?? signal ?? -1))
  })
  child.stdout!.on('data', d => {
    out += String(d)
  })
  child.stderr!.on('data', d => {
    out += String(d)
  })
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const gone = new Promise(resolve => child.once('exit', resolve))
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000)
    await gone
    clearTimeout(timer)
  })
  // Polled: it returns as soon as /livez answers; the limit only names a start that never comes.
  const deadline = Date.now() + 60_000
  for (;;) {
    if (child.exitCode !== null) {
      await exited
      const taken = /cannot listen on 127\.0\.0\.1:\d+ \(in use/.test(out)
      throw new (taken ? PortTaken : Error)(`gateway process exited: ${out}`)
    }
    try {
      if ((await fetch(`http://127.0.0.1:${metricsPort}/livez`)).status === 200) break
    } catch {
      /* not up yet */
    }
    if (Date.now() > deadline) throw new Error(`gateway process did not answer /livez within 60 s: ${out}`)
    await sleep(50)
  }
  return {
    pid: child.pid!,
    file,
    url: path => `${path.startsWith('/audio/') ? 'ws' : 'http'}${secure ? 's' : ''}://127.0.0.1:${port}${path}`,
    adminUrl: opsUrl(metricsPort, adminPort),
    output: () => out,
    exited
  }
}
