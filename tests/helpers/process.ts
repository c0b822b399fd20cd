import { connect } from 'node:net'
import { claimPort } from '../../gateway/server/listen'
import { type GatewayProcess, spawnServe } from './serve'

export type { GatewayProcess } from './serve'

type T = { teardown: (fn: () => unknown) => void }

/** A port nothing listens on right now (bound to 0 alone, read, let go: the gateway's own claimPort). */
export async function freePort(): Promise<number> {
  return await claimPort('127.0.0.1', 0)
}

const handedOut = new Set<number>()

/**
 * A port free now, below the kernel's ephemeral range (32768 up) and the test redis-servers' (20000-49999),
 * for a test that holds a port number long before it binds it (the docs' examples): a port read free from
 * the ephemeral range (`freePort`) can be given to any other test's listener or outgoing connection
 * meanwhile, and a server started on it later finds it taken. From 10000-19999, never one twice in a process.
 */
export async function quietPort(): Promise<number> {
  for (;;) {
    const port = 10_000 + Math.floor(Math.random() * 10_000)
    if (handedOut.has(port) || port === 10080) continue // 10080: on fetch's list of bad ports
    handedOut.add(port)
    const free = await claimPort('127.0.0.1', port).then(
      () => true,
      () => false
    )
    if (free) return port
  }
}

/**
 * `n` distinct ports on 127.0.0.1 that refuse connections for the whole run: low ports (from 2 up) that
 * refuse now. Port 1, like 7, 9 and others, is on fetch's list of bad ports: fetch refuses it itself.
 * A port read free and let go (`freePort`) is not that: another test of the suite may bind it a moment
 * later, and a connection meant to be refused then reaches that test's listener. No test binds a port
 * below 1024: they take ephemeral ones, redis-server ones from 20000 up, and the docs' examples 10000-19999.
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
 * A gateway in its own process as `startGateway` (helpers/gateway.ts) starts it, over a plainer base: the
 * config's own health probes and re-attach grace, info logs. For the tests of processes, signals and
 * fleets, which set those themselves.
 */
export async function spawnGateway(
  t: T,
  config: Record<string, unknown>,
  env: Record<string, string> = {}
): Promise<GatewayProcess> {
  return await spawnServe(
    t,
    {
      metrics: { host: '127.0.0.1', port: 0 },
      fleet: { host: '127.0.0.1', port: 0 },
      log: { level: 'info' },
      // As startGateway's base: refusals at once, no per-address failure budget.
      auth: { failureDelayMs: 0, failureBudget: { failures: 0 } },
      ...config,
      // A test's admin keys (a token) go with this listener.
      admin: { host: '127.0.0.1', port: 0, ...(config.admin as Record<string, unknown> | undefined) },
      listen: { port: 0, ...(config.listen as Record<string, unknown> | undefined), host: '127.0.0.1' },
      // Tests that stop it at teardown do not wait out the production drain delays or the final scrape.
      shutdown: {
        drainDelaySeconds: 0,
        legDrainSeconds: 0,
        metricsLingerSeconds: 0,
        ...(config.shutdown as Record<string, unknown> | undefined)
      }
    },
    env
  )
}
