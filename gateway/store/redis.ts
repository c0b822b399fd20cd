import Redis, { Cluster, type RedisOptions } from 'ioredis'
import type { Logger } from '../telemetry/log'
import type { Affinity, HealthRecord, Store } from './port'

export interface RedisStoreOptions {
  url: string | null
  keyPrefix: string
  syncIntervalMs: number
  leaseMs: number
  sentinels?: readonly { host: string; port: number }[]
  sentinelName?: string
  clusterNodes?: readonly { host: string; port: number }[]
  log: Logger
  onUp: (up: boolean) => void
}

/** Renew the lease only if we still hold it; take it if free. Returns 1 when held. */
const LEAD = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
return 0`

/**
 * The fleet store (the only ioredis importer). One sync every `syncIntervalMs`: publish this
 * instance's stream counts under a lease key, read the other live instances' counts and the shared
 * health hash, renew or take the prober lease. Commands fail fast while Redis is away (no offline
 * queue): the gateway then runs on local state, says so once, and resumes when Redis is back.
 */
export class RedisStore implements Store {
  readonly kind = 'redis' as const
  private readonly redis: Redis | Cluster
  private health = new Map<string, HealthRecord>()
  private others = new Map<string, number>()
  private ownStreams: ReadonlyMap<string, number> = new Map()
  private leader = false
  private isUp = false
  private timer: NodeJS.Timeout | null = null
  private readonly listeners: (() => void)[] = []
  private syncing = false

  constructor(
    readonly instanceId: string,
    private readonly opts: RedisStoreOptions
  ) {
    const common: RedisOptions = {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 2000,
      lazyConnect: true,
      retryStrategy: () => 1000
    }
    if (opts.clusterNodes !== undefined && opts.clusterNodes.length > 0) {
      this.redis = new Cluster([...opts.clusterNodes], {
        enableOfflineQueue: false,
        redisOptions: common,
        clusterRetryStrategy: () => 1000,
        lazyConnect: true
      })
    } else if (opts.sentinels !== undefined && opts.sentinels.length > 0) {
      this.redis = new Redis({ ...common, sentinels: [...opts.sentinels], name: opts.sentinelName ?? 'mymaster' })
    } else {
      this.redis = new Redis(opts.url ?? 'redis://127.0.0.1:6379', common)
    }
    this.redis.on('ready', () => this.setUp(true))
    this.redis.on('end', () => this.setUp(false))
    this.redis.on('close', () => this.setUp(false))
    // Connection errors are reported once through setUp; ioredis would otherwise print each retry.
    this.redis.on('error', () => {})
  }

  private setUp(up: boolean): void {
    if (up === this.isUp) return
    this.isUp = up
    if (!up) this.leader = false
    if (up) this.opts.log.info({ event: 'store_up' }, 'Redis reachable: sharing state with the fleet')
    else this.opts.log.error({ event: 'store_down' }, 'Redis unreachable: serving on local state until it returns')
    this.opts.onUp(up)
    if (up) void this.sync()
  }

  private k(s: string): string {
    return this.opts.keyPrefix + s
  }

  up(): boolean {
    return this.isUp
  }
  reportStreams(counts: ReadonlyMap<string, number>): void {
    this.ownStreams = counts
  }
  otherStreams(key: string): number {
    return this.isUp ? (this.others.get(key) ?? 0) : 0
  }

  writeHealth(key: string, record: HealthRecord): void {
    this.health.set(key, record)
    if (this.isUp) this.redis.hset(this.k('health'), key, JSON.stringify(record)).catch(() => {})
  }

  sharedHealth(): ReadonlyMap<string, HealthRecord> {
    return this.health
  }

  setAffinity(key: string, a: Affinity, ttlSeconds: number): void {
    if (!this.isUp) return
    this.redis
      .set(this.k(`aff:${key}`), JSON.stringify(a), 'PX', Math.max(1, Math.round(ttlSeconds * 1000)))
      .catch(() => {})
  }

  async getAffinity(key: string): Promise<Affinity | null> {
    if (!this.isUp) return null
    try {
      const v = await this.redis.get(this.k(`aff:${key}`))
      return v === null ? null : (JSON.parse(v) as Affinity)
    } catch {
      return null
    }
  }

  deleteAffinity(key: string, legId: string): void {
    if (!this.isUp) return
    // Only the leg that owns the record removes it (a re-attached leg may have replaced it).
    this.redis
      .eval(
        "local v = redis.call('GET', KEYS[1]) " +
          "if v and cjson.decode(v).legId == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
        1,
        this.k(`aff:${key}`),
        legId
      )
      .catch(() => {})
  }

  /** Leader while holding the lease; with Redis away, every instance probes for itself. */
  isLeader(): boolean {
    return this.isUp ? this.leader : true
  }

  onSync(fn: () => void): void {
    this.listeners.push(fn)
  }

  async start(): Promise<void> {
    try {
      await this.redis.connect()
    } catch {
      // Not reachable now: setUp(false) was reported; ioredis keeps retrying.
      if (!this.isUp)
        this.opts.log.error(
          { event: 'store_down' },
          'Redis unreachable at start: serving on local state until it returns'
        )
    }
    if (this.isUp) await this.sync()
    this.timer = setInterval(() => {
      void this.sync()
    }, this.opts.syncIntervalMs)
    this.timer.unref()
  }

  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer)
    try {
      if (this.isUp) {
        await this.redis
          .multi()
          .del(this.k(`streams:${this.instanceId}`))
          .zrem(this.k('instances'), this.instanceId)
          .exec()
        if (this.leader)
          await this.redis.eval(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
            1,
            this.k('leader'),
            this.instanceId
          )
      }
    } catch {
      /* shutting down anyway */
    }
    this.redis.disconnect()
  }

  /** One round trip's worth of sharing. Never throws; overlapping calls are skipped. */
  async sync(): Promise<void> {
    if (!this.isUp || this.syncing) return
    this.syncing = true
    try {
      const now = Date.now()
      const leaseMs = this.opts.leaseMs
      const own = this.k(`streams:${this.instanceId}`)
      const tx = this.redis.multi()
      tx.del(own)
      if (this.ownStreams.size > 0) tx.hset(own, Object.fromEntries(this.ownStreams))
      tx.pexpire(own, leaseMs)
      tx.zadd(this.k('instances'), now + leaseMs, this.instanceId)
      tx.zremrangebyscore(this.k('instances'), 0, now)
      tx.zrange(this.k('instances'), 0, -1)
      tx.hgetall(this.k('health'))
      tx.eval(LEAD, 1, this.k('leader'), this.instanceId, String(leaseMs))
      const res = await tx.exec()
      if (res === null) return
      const instances = (res[5][1] as string[]).filter(i => i !== this.instanceId)
      const healthRaw = res[6][1] as Record<string, string>
      this.leader = res[7][1] === 1
      const health = new Map<string, HealthRecord>()
      for (const [k, v] of Object.entries(healthRaw)) {
        try {
          health.set(k, JSON.parse(v) as HealthRecord)
        } catch {
          /* a foreign value: ignore */
        }
      }
      this.health = health
      const others = new Map<string, number>()
      if (instances.length > 0) {
        const p = this.redis.pipeline()
        for (const i of instances) p.hgetall(this.k(`streams:${i}`))
        const counts = await p.exec()
        for (const [err, value] of counts ?? []) {
          if (err !== null) continue
          for (const [k, v] of Object.entries(value as Record<string, string>))
            others.set(k, (others.get(k) ?? 0) + Number(v))
        }
      }
      this.others = others
      for (const fn of this.listeners) fn()
    } catch {
      // A failed sync leaves the last cache in place; 'close' / 'end' events report the outage.
    } finally {
      this.syncing = false
    }
  }
}
