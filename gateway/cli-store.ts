// The store a `serve` process runs on (loaded by cli-serve.ts): in memory, or Redis by URL, Sentinel or Cluster.
import { readFileSync } from 'node:fs'
import { randomUUID } from 'node:crypto'
import { hostname } from 'node:os'
import { dirname, resolve } from 'node:path'
import type { Config, StoreTls } from './config/types'
import { MemoryStore } from './store/memory'
import type { Store } from './store/port'
import { RedisStore } from './store/redis'
import type { Logger } from './telemetry/log'
import type { Metrics } from './telemetry/metrics'

/** A process's id in the fleet: its host, its pid and a random part (a restart is a new instance). */
export function newInstanceId(): string {
  return `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`
}

/** The config names a shared store: Redis by URL, Sentinel or Cluster (else each gateway is alone). */
export function hasRedis(config: Config): boolean {
  return config.redis !== null || config.store.sentinels !== undefined || config.store.clusterNodes !== undefined
}

/** In-memory without `redis`, else the Redis store (URL, Sentinel or Cluster from config). */
export function createStore(
  config: Config,
  log: Logger,
  metrics: Metrics,
  id?: string,
  /** It may take the prober lease (false: a process that never probes). */
  prober = true
): Store {
  const instanceId = id ?? newInstanceId()
  const s = config.store
  if (!hasRedis(config)) return new MemoryStore(instanceId)
  // TLS settings become node:tls options here; the CA file is read once, relative to the config file.
  const tls = (
    t: StoreTls | undefined,
    key: string
  ): { ca?: Buffer; servername?: string; rejectUnauthorized?: boolean } | undefined => {
    if (t === undefined || t === false) return undefined
    if (t === true) return {}
    let ca: Buffer | undefined
    if (t.ca !== undefined) {
      const file = resolve(dirname(config.file), t.ca)
      try {
        ca = readFileSync(file)
      } catch (err) {
        throw new Error(`store.${key}.ca: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
      }
    }
    return {
      ...(ca !== undefined ? { ca } : {}),
      ...(t.servername !== undefined ? { servername: t.servername } : {}),
      ...(t.rejectUnauthorized !== undefined ? { rejectUnauthorized: t.rejectUnauthorized } : {})
    }
  }
  return new RedisStore(instanceId, {
    url: config.redis,
    keyPrefix: s.keyPrefix,
    syncIntervalMs: s.syncIntervalSeconds * 1000,
    leaseMs: s.leaseSeconds * 1000,
    sentinels: s.sentinels,
    sentinelName: s.sentinelName,
    clusterNodes: s.clusterNodes,
    username: s.username,
    password: s.password,
    tls: tls(s.tls, 'tls'),
    sentinelUsername: s.sentinelUsername,
    sentinelPassword: s.sentinelPassword,
    sentinelTls: tls(s.sentinelTls, 'sentinelTls'),
    log,
    prober,
    onUp: up => metrics.storeUp.set(up ? 1 : 0),
    onError: op => metrics.storeErrors.inc({ op })
  })
}
