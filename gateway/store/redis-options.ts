import type { ConnectionOptions } from 'node:tls'
import type { Logger } from '../telemetry/log'
import type { HealthRecord } from './port'

// The Redis store's options, its failure labels and the helpers its parts share (store/redis.ts, store/redis-calls.ts).

/** What a failed store command was doing: the `op` label of `store_errors_total` (a closed set). */
/** Every shared-store operation that can fail: the `op` label of store_errors_total. */
export const STORE_OPS = [
  'connect',
  'sync',
  'write_health',
  'set_affinity',
  'get_affinity',
  'delete_affinity',
  'revoke_token',
  'read_revocation',
  'count_failure',
  'claim_owner',
  'refresh_owners',
  'release_owner',
  'publish_calls',
  'remove_call',
  'find_calls',
  'quota',
  'shared',
  'close'
] as const
export type StoreOp = (typeof STORE_OPS)[number]

export interface RedisStoreOptions {
  url: string | null
  keyPrefix: string
  syncIntervalMs: number
  leaseMs: number
  sentinels?: readonly { host: string; port: number }[]
  sentinelName?: string
  clusterNodes?: readonly { host: string; port: number }[]
  /** ACL user and password of the data nodes (URL: used when the URL carries none). */
  username?: string
  password?: string
  /** TLS to the data nodes (URL, Sentinel's master, Cluster nodes); `rediss://` also turns it on. */
  tls?: ConnectionOptions
  /** Credentials and TLS of the Sentinel nodes themselves. */
  sentinelUsername?: string
  sentinelPassword?: string
  sentinelTls?: ConnectionOptions
  log: Logger
  /**
   * Takes part in the prober lease (default true). False for a process that never probes (the main process
   * of `serve --workers N`, whose workers probe): holding the lease, it would leave the fleet unprobed.
   */
  prober?: boolean
  onUp: (up: boolean) => void
  /** One call per failed command or connection attempt. */
  onError?: (op: StoreOp) => void
}

/** Owner records refreshed by one script call (each is a GET and a PEXPIRE inside Redis). */
export const REFRESH_BATCH = 500

/**
 * The key prefix with a Redis Cluster hash tag. Cluster hashes only the text between the first `{`
 * and the next `}` when that text is not empty, so with a tagged prefix every key of the gateway
 * lives in one slot, and one MULTI or pipeline may touch any of them. A prefix without a usable tag
 * is wrapped whole: `fleet-a:` gives `{fleet-a:}health`.
 */
export function hashTaggedPrefix(prefix: string): string {
  const open = prefix.indexOf('{')
  if (open >= 0 && prefix.indexOf('}', open + 1) > open + 1) return prefix
  return `{${prefix}}`
}

/** The first error of a MULTI's or pipeline's replies, if any. */
export function firstError(res: [Error | null, unknown][] | null): Error | null {
  if (res === null) return new Error('transaction aborted')
  for (const [err] of res) if (err !== null) return err
  return null
}

/** The shared health hash as a sync read it; a foreign value under a field is left out. */
export function healthFrom(raw: Record<string, string>): Map<string, HealthRecord> {
  const health = new Map<string, HealthRecord>()
  for (const [k, v] of Object.entries(raw)) {
    try {
      health.set(k, JSON.parse(v) as HealthRecord)
    } catch {
      /* a foreign value: ignore */
    }
  }
  return health
}

/** The other instances' stream counts (one HGETALL reply each), summed per key. */
export function streamTotals(replies: [Error | null, unknown][] | null): Map<string, number> {
  const others = new Map<string, number>()
  for (const [, value] of replies ?? []) {
    for (const [k, v] of Object.entries(value as Record<string, string>))
      others.set(k, (others.get(k) ?? 0) + Number(v))
  }
  return others
}
