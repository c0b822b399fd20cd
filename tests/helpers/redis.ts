import { randomUUID } from 'node:crypto'
import Redis from 'ioredis'
import type { Affinity, HealthRecord } from '../../gateway/store/port'
import { hashTaggedPrefix, RedisStore } from '../../gateway/store/redis'
import { createLogger } from '../../gateway/telemetry/log'
import { startGateway, type TestGateway } from './gateway'
import { freePort } from './process'

/** The Redis the fleet tests share (each test uses its own key prefix): REDIS_URL, or the local default. */
export const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379'

let probe: Promise<string | null> | null = null

/** Connect once and PING; the problem as text, or null when Redis answers. */
async function ping(): Promise<string | null> {
  const redis = new Redis(REDIS_URL, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    // Generous: it only bounds an address that swallows packets; a refused connection fails at once.
    connectTimeout: 20_000
  })
  // ioredis rejects with "Connection is closed."; the cause (ECONNREFUSED, ENOTFOUND…) comes as an event.
  let cause = ''
  redis.on('error', (err: Error) => {
    cause ||= err.message
  })
  try {
    await redis.connect()
    const pong = await redis.ping()
    return pong === 'PONG' ? null : `PING answered ${JSON.stringify(pong)}`
  } catch (err) {
    return cause || (err as Error).message
  } finally {
    redis.disconnect()
  }
}

/**
 * The Redis URL for a test that needs a shared Redis, once Redis answers there (checked once per test
 * file). When it does not, this throws one clear error naming REDIS_URL, so such a test fails at once
 * instead of in a cascade of timeouts.
 */
export async function needRedis(): Promise<string> {
  probe ??= ping()
  const problem = await probe
  if (problem !== null)
    throw new Error(
      `this test needs Redis, and none answers at REDIS_URL=${REDIS_URL}` +
        `${process.env.REDIS_URL ? '' : ' (REDIS_URL is unset: the default)'} (${problem}); ` +
        'start one there (e.g. `redis-server`) or point REDIS_URL at one'
    )
  return REDIS_URL
}

/** Two Redis stores ('a' and 'b') on one fresh key prefix, started, closed at teardown: two instances' view. */
export async function redisStorePair(t: { teardown: (fn: () => unknown) => void }): Promise<[RedisStore, RedisStore]> {
  const url = await needRedis()
  const keyPrefix = `test:${randomUUID()}:`
  const log = createLogger({ level: 'silent', secrets: [] })
  const make = (id: string): RedisStore =>
    new RedisStore(id, { url, keyPrefix, syncIntervalMs: 60_000, leaseMs: 120_000, log, onUp: () => {} })
  const stores: [RedisStore, RedisStore] = [make('a'), make('b')]
  for (const s of stores) {
    await s.start()
    t.teardown(() => s.close())
  }
  return stores
}

/**
 * What a fleet on `url` under `keyPrefix` shares, read straight from Redis in the layout store/redis.ts
 * writes, by a client that takes no part in it (it never registers, leads or probes): the prober lease's
 * owner (a process's instance id: `<instance>/w<n>.<pid>` for a worker), a replica's shared health
 * verdict, a leg's affinity record.
 */
export async function fleetObserver(
  t: { teardown: (fn: () => unknown) => void },
  url: string,
  keyPrefix: string
): Promise<{
  prober: () => Promise<string | null>
  health: (replicaKey: string) => Promise<HealthRecord | null>
  affinity: (legKey: string) => Promise<Affinity | null>
}> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await redis.connect()
  t.teardown(() => redis.disconnect())
  const k = (s: string): string => `${hashTaggedPrefix(keyPrefix)}${s}`
  const json = <V>(v: string | null | undefined): V | null => (v == null ? null : (JSON.parse(v) as V))
  return {
    prober: async () => await redis.get(k('leader')),
    health: async replicaKey => json<HealthRecord>(await redis.hget(k('health'), replicaKey)),
    affinity: async legKey => json<Affinity>(await redis.get(k(`aff:${legKey}`)))
  }
}

/**
 * A fleet member's config, `extra` over it: Redis at `redis` under a key prefix of its own (each test's, so
 * tests and CI runs never see each other's state), a lease a busy machine renews in time (no test waits for
 * one to expire), syncs every 0.2 s (polled for). Members given the same config share the store.
 */
export const fleetMember = (redis: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  redis,
  store: { keyPrefix: `test:${randomUUID()}:`, syncIntervalSeconds: 0.2, leaseSeconds: 10 },
  ...extra
})

/** An HTTP probe of /healthz every 0.3 s, one answer to change a verdict; its timeout generous: a probe of a healthy replica must not time out on a busy machine. */
export const QUICK_PROBE = {
  active: {
    kind: 'http',
    path: '/healthz',
    intervalSeconds: 0.3,
    timeoutSeconds: 10,
    unhealthyThreshold: 1,
    healthyThreshold: 1
  }
}

/**
 * Instances of one fleet on Redis (one key prefix of this test's), each on a fleet port of its own advertised
 * at 127.0.0.1: each call starts one (startGateway) from `config` with `env`.
 */
export async function fleetInstances(
  t: Parameters<typeof startGateway>[0],
  config: Record<string, unknown>,
  env: Record<string, string>
): Promise<() => Promise<TestGateway>> {
  const redis = await needRedis()
  const prefix = `test:${randomUUID()}:`
  return async () =>
    await startGateway(
      t,
      {
        ...config,
        redis,
        store: { keyPrefix: prefix, syncIntervalSeconds: 0.2, leaseSeconds: 10 },
        fleet: { port: await freePort(), advertiseUrl: 'ws://127.0.0.1' }
      },
      env
    )
}
