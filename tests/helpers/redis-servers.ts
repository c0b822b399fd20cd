import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { stringify } from 'yaml'
import { createStore } from '../../gateway/cli-serve'
import { loadConfig } from '../../gateway/config/load'
import type { Config } from '../../gateway/config/types'
import type { Store } from '../../gateway/store/port'
import { createLogger } from '../../gateway/telemetry/log'
import { Metrics } from '../../gateway/telemetry/metrics'
import { LogCapture, sleep } from './gateway'
import { freeRedisPort, redisCli, redisServerArgs } from './redis-process'

type T = { teardown: (fn: () => unknown) => void }

/**
 * Private redis-server processes for one test: own free ports, own temp dir, SIGKILLed and removed at
 * teardown. Nothing here talks to any Redis it did not start.
 */
export { haveRedisServer, redisCli, freeRedisPort } from './redis-process'

export interface RedisNode {
  port: number
  /** Run redis-cli against this node (authenticated when the node has a password); resolves stdout, trimmed. */
  cli: (...args: string[]) => Promise<string>
  /** SIGKILL the process and wait for it to exit. */
  kill: () => Promise<void>
}

/** Poll an async condition until it holds or `ms` passes (generous limits: the machine may be busy). */
export async function eventually(fn: () => Promise<boolean> | boolean, ms = 20_000, step = 100): Promise<boolean> {
  const end = Date.now() + ms
  while (Date.now() < end) {
    if (await fn()) return true
    await sleep(step)
  }
  return await fn()
}

class Processes {
  readonly dir = mkdtempSync(join(tmpdir(), 'assist-gateway-redis-'))
  private readonly children = new Set<ChildProcess>()

  constructor(t: T) {
    t.teardown(async () => {
      await Promise.all([...this.children].map(async c => await kill(c)))
      rmSync(this.dir, { recursive: true, force: true })
    })
  }

  /** Start a redis-server (data or Sentinel) with these arguments; ready when PING answers PONG. */
  async start(port: number, args: string[], password: string | undefined): Promise<RedisNode> {
    const child = spawn('redis-server', args, { stdio: 'ignore', cwd: this.dir })
    this.children.add(child)
    const cli = (...a: string[]): Promise<string> => redisCli(port, password, a)
    const ok = await eventually(async () => child.exitCode === null && (await cli('ping')) === 'PONG', 15_000, 50)
    if (!ok) throw new Error(`redis-server on port ${port} did not start (${args.join(' ')})`)
    return {
      port,
      cli,
      kill: async () => {
        await kill(child)
        this.children.delete(child)
      }
    }
  }

  file(name: string, text: string): string {
    const f = join(this.dir, name)
    writeFileSync(f, text)
    return f
  }
}

async function kill(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return
  const gone = new Promise(resolve => c.once('exit', resolve))
  c.kill('SIGKILL')
  await gone
}

const auth = (password: string | undefined): string[] =>
  password === undefined ? [] : ['--requirepass', password, '--masterauth', password]

/** One standalone redis-server; `extra` adds arguments (TLS ports and files, for instance). */
export async function startRedis(t: T, opts: { password?: string; extra?: string[] } = {}): Promise<RedisNode> {
  const p = new Processes(t)
  const port = await freeRedisPort()
  return await p.start(
    port,
    [...redisServerArgs(port, p.dir), ...auth(opts.password), ...(opts.extra ?? [])],
    opts.password
  )
}

export interface RedisClusterSet {
  nodes: RedisNode[]
  seeds: { host: string; port: number }[]
}

/** A 3-master Redis Cluster (no replicas), every slot assigned and `cluster_state:ok` on each node. */
export async function startRedisCluster(t: T, opts: { password?: string } = {}): Promise<RedisClusterSet> {
  const p = new Processes(t)
  const nodes: RedisNode[] = []
  for (let i = 0; i < 3; i++) {
    const port = await freeRedisPort()
    const args = [
      ...redisServerArgs(port, p.dir),
      ...auth(opts.password),
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      `nodes-${port}.conf`,
      '--cluster-node-timeout',
      '5000'
    ]
    nodes.push(await p.start(port, args, opts.password))
  }
  const created = await nodes[0].cli(
    '--cluster',
    'create',
    ...nodes.map(n => `127.0.0.1:${n.port}`),
    '--cluster-replicas',
    '0',
    '--cluster-yes'
  )
  if (created.startsWith('ERR')) throw new Error(`redis-cli --cluster create failed: ${created}`)
  for (const n of nodes) {
    const ok = await eventually(async () => (await n.cli('cluster', 'info')).includes('cluster_state:ok'))
    if (!ok) throw new Error(`cluster node ${n.port} never reached cluster_state:ok`)
  }
  return { nodes, seeds: nodes.map(n => ({ host: '127.0.0.1', port: n.port })) }
}

export interface SentinelSet {
  master: RedisNode
  replica: RedisNode
  sentinels: RedisNode[]
  /** Sentinel addresses, for the store's `sentinels`. */
  addresses: { host: string; port: number }[]
  name: string
  /** The port the Sentinels name as master now (asks the first Sentinel that answers). */
  masterPort: () => Promise<number | null>
}

/**
 * A master, one replica and three Sentinels (quorum 2) monitoring them as `mymaster`. With
 * `password`, the data nodes require it; with `sentinelPassword`, the Sentinels require theirs.
 * Ready when every Sentinel knows the replica and the replica's link to the master is up.
 */
export async function startSentinelSet(
  t: T,
  opts: { password?: string; sentinelPassword?: string } = {}
): Promise<SentinelSet> {
  const p = new Processes(t)
  const name = 'mymaster'
  const mport = await freeRedisPort()
  const master = await p.start(mport, [...redisServerArgs(mport, p.dir), ...auth(opts.password)], opts.password)
  const rport = await freeRedisPort()
  const replica = await p.start(
    rport,
    [...redisServerArgs(rport, p.dir), ...auth(opts.password), '--replicaof', '127.0.0.1', String(mport)],
    opts.password
  )
  const linked = await eventually(async () =>
    (await replica.cli('info', 'replication')).includes('master_link_status:up')
  )
  if (!linked) throw new Error('the replica never linked to the master')
  const sentinels: RedisNode[] = []
  for (let i = 0; i < 3; i++) {
    const port = await freeRedisPort()
    const conf = p.file(
      `sentinel-${port}.conf`,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${p.dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${mport} 2`,
        `sentinel down-after-milliseconds ${name} 5000`,
        `sentinel failover-timeout ${name} 10000`,
        `sentinel parallel-syncs ${name} 1`,
        ...(opts.password === undefined ? [] : [`sentinel auth-pass ${name} ${opts.password}`]),
        ...(opts.sentinelPassword === undefined ? [] : [`requirepass ${opts.sentinelPassword}`]),
        ''
      ].join('\n')
    )
    sentinels.push(await p.start(port, [conf, '--sentinel'], opts.sentinelPassword))
  }
  for (const s of sentinels) {
    const ok = await eventually(async () => {
      const out = await s.cli('sentinel', 'replicas', name)
      return out.includes(String(rport)) && !out.includes('disconnected')
    })
    if (!ok) throw new Error(`Sentinel ${s.port} never saw the replica`)
  }
  return {
    master,
    replica,
    sentinels,
    addresses: sentinels.map(s => ({ host: '127.0.0.1', port: s.port })),
    name,
    masterPort: async () => {
      for (const s of sentinels) {
        const out = (await s.cli('sentinel', 'get-master-addr-by-name', name)).split('\n')
        if (out.length === 2 && /^\d+$/.test(out[1])) return Number(out[1])
      }
      return null
    }
  }
}

export interface StoreUnderTest {
  store: Store
  metrics: Metrics
  logs: LogCapture
  config: Config
  /** The metric text of this store's registry. */
  scrape: () => Promise<string>
}

/**
 * A store built as `serve` builds it: a config file (one demo route, the given `redis` and `store`
 * sections, secrets as ${VAR} from `env`, `files` beside it), loadConfig, createStore, start. Closed at teardown.
 */
export async function storeFromConfig(
  t: T & { testdir: (fixture?: Record<string, string>) => string },
  sections: { redis?: string; store: Record<string, unknown> },
  env: Record<string, string> = {},
  files: Record<string, string> = {}
): Promise<StoreUnderTest> {
  const dir = t.testdir(files)
  const file = join(dir, 'gateway.yaml')
  writeFileSync(
    file,
    stringify({
      ...sections,
      routes: {
        demo: {
          mapping: 'mappings/json-events.yaml',
          auth: { audio: ['${TOK}'] },
          upstreams: [{ name: 'a', audio: 'ws://127.0.0.1:9/x' }]
        }
      }
    })
  )
  const config = loadConfig(file, { TOK: 'audio-token-for-store-tests', ...env })
  const logs = new LogCapture()
  const log = createLogger({ level: 'info', secrets: config.secrets, destination: logs.stream })
  const metrics = new Metrics()
  const store = createStore(config, log, metrics)
  metrics.storeIsUp = () => store.up()
  t.teardown(async () => await store.close())
  await store.start()
  return { store, metrics, logs, config, scrape: async () => await metrics.registry.metrics() }
}

/** The value of `assist_gateway_store_errors_total{op}` in a scrape (0 when absent). */
export function storeErrors(scrape: string, op: string): number {
  const m = scrape.match(new RegExp(`assist_gateway_store_errors_total\\{op="${op}"\\} (\\d+)`))
  return m === null ? 0 : Number(m[1])
}
