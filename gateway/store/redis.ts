import type { Cluster, ClusterOptions, default as Redis, RedisOptions } from 'ioredis'
import type { RateLimiterRedis } from 'rate-limiter-flexible'
import { LocalAuthState } from './local-auth'
import type { Affinity, CallRecord, FailureWindow, HealthRecord, OwnerRecord, QuotaStore, Store } from './port'
import { RedisCalls } from './redis-calls'
import { firstError, hashTaggedPrefix, REFRESH_BATCH, type RedisStoreOptions, type StoreOp } from './redis-options'
import * as script from './redis-scripts'

export { hashTaggedPrefix, type RedisStoreOptions, type StoreOp } from './redis-options'

/**
 * ioredis and rate-limiter-flexible are loaded when a store is made and used, not when the gateway starts: most
 * gateways run without Redis, and the two cost about 80 ms of CPU to load in each process.
 */
function ioredis(): typeof import('ioredis') {
  return require('ioredis') as typeof import('ioredis')
}

function limiters(): typeof import('rate-limiter-flexible') {
  return require('rate-limiter-flexible') as typeof import('rate-limiter-flexible')
}

/**
 * The fleet store (the only ioredis importer). One sync every `syncIntervalMs`: publish this
 * instance's stream counts under a lease key, read the other live instances' counts and the shared
 * health hash, renew or take the prober lease. Commands fail fast while Redis is away (no offline
 * queue): the gateway then runs on local state, says so once, and resumes when Redis is back.
 * Every key carries the same hash tag (see `hashTaggedPrefix`), so this works on Redis Cluster too.
 *
 * `up()` MUST be false whenever sharing does not work: the connection is not ready, or the last
 * command failed (wrong password, CROSSSLOT, READONLY, OOM...). Each failure is counted through
 * `onError`; a failing store clears on the next successful sync.
 */
export class RedisStore implements Store, QuotaStore {
  readonly kind = 'redis' as const
  readonly shared = true
  private readonly redis: Redis | Cluster
  private readonly prefix: string
  private health = new Map<string, HealthRecord>()
  private others = new Map<string, number>()
  private ownStreams: ReadonlyMap<string, number> = new Map()
  private leader = false
  /** The connection is ready. */
  private connected = false
  /** The connection has not proven itself yet, or the last command failed (cleared by a successful sync). */
  private failing = false
  /** What `up()` last reported (the transitions are logged once each). */
  private reported = false
  private lastError = ''
  private timer: NodeJS.Timeout | null = null
  private readonly listeners: (() => void)[] = []
  private syncing: Promise<void> | null = null
  private closing = false
  /** The failure budget's fleet counts, one limiter per window length (auth.failureBudget.windowSeconds). */
  private readonly failureLimiters = new Map<number, RateLimiterRedis>()
  /** The quotas' per-second windows, one limiter per rate (auth/quotas.ts). */
  private readonly rateLimiters = new Map<number, RateLimiterRedis>()

  constructor(
    readonly instanceId: string,
    private readonly opts: RedisStoreOptions
  ) {
    this.prefix = hashTaggedPrefix(opts.keyPrefix)
    const auth = {
      ...(opts.username !== undefined ? { username: opts.username } : {}),
      ...(opts.password !== undefined ? { password: opts.password } : {}),
      ...(opts.tls !== undefined ? { tls: opts.tls } : {})
    }
    const node: RedisOptions = {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: 2000,
      lazyConnect: true,
      // A demoted master answers writes with READONLY until its clients move: reconnect then.
      reconnectOnError: err => err.message.startsWith('READONLY'),
      ...auth
    }
    if (opts.clusterNodes !== undefined && opts.clusterNodes.length > 0) {
      const { enableOfflineQueue: _q, ...redisOptions } = node
      const cluster: ClusterOptions = {
        enableOfflineQueue: false,
        lazyConnect: true,
        clusterRetryStrategy: () => 1000,
        slotsRefreshTimeout: 2000,
        redisOptions
      }
      // With TLS the certificates name the hosts, so connect to the names Cluster reports, unresolved.
      if (opts.tls !== undefined) cluster.dnsLookup = (address, callback) => callback(null, address)
      this.redis = new (ioredis().Cluster)([...opts.clusterNodes], cluster)
    } else if (opts.sentinels !== undefined && opts.sentinels.length > 0) {
      this.redis = new (ioredis().default)({
        ...node,
        retryStrategy: () => 1000,
        sentinels: [...opts.sentinels],
        name: opts.sentinelName ?? 'mymaster',
        enableTLSForSentinelMode: opts.tls !== undefined,
        // Told by the Sentinels as soon as a failover switches the master, not at the next error.
        failoverDetector: true,
        ...(opts.sentinelUsername !== undefined ? { sentinelUsername: opts.sentinelUsername } : {}),
        ...(opts.sentinelPassword !== undefined ? { sentinelPassword: opts.sentinelPassword } : {}),
        ...(opts.sentinelTls !== undefined ? { sentinelTLS: opts.sentinelTls } : {})
      })
    } else {
      this.redis = new (ioredis().default)(opts.url ?? 'redis://127.0.0.1:6379', { ...node, retryStrategy: () => 1000 })
    }
    this.calls = new RedisCalls(
      this.redis,
      s => this.k(s),
      (op, err) => this.failed(op, err)
    )
    this.redis.on('ready', () => this.setConnected(true))
    this.redis.on('end', () => this.setConnected(false))
    this.redis.on('close', () => this.setConnected(false))
    // Every connection error is counted; the outage itself is logged once, with the last reason.
    this.redis.on('error', (err: Error) => {
      if (this.closing) return
      this.lastError = err.message
      this.opts.onError?.('connect')
    })
  }

  /** A new connection is not up until a sync over it succeeds (it may refuse every command). */
  private setConnected(connected: boolean): void {
    if (connected === this.connected) return
    this.connected = connected
    if (connected) {
      this.failing = true
      void this.sync()
    } else if (!this.closing) this.report() // our own quit at shutdown is not an outage
  }

  /** Count a failed command and mark the store not up until a sync succeeds. */
  private failed(op: StoreOp, err: unknown): void {
    this.lastError = err instanceof Error ? err.message : String(err)
    this.opts.onError?.(op)
    if (this.closing) return
    this.failing = true
    this.report(op)
  }

  private report(op?: StoreOp): void {
    const up = this.up()
    if (up === this.reported) return
    this.reported = up
    if (!up) this.leader = false
    if (up) this.opts.log.info({ event: 'store_up' }, 'Redis reachable: sharing state with the fleet')
    else
      this.opts.log.error(
        { event: 'store_down', ...(op !== undefined ? { op } : {}), reason: this.lastError || 'connection lost' },
        this.connected
          ? 'Redis commands failing: serving on local state until they succeed'
          : 'Redis unreachable: serving on local state until it returns'
      )
    this.opts.onUp(up)
  }

  private failureWindows(windowMs: number): RateLimiterRedis {
    let limiter = this.failureLimiters.get(windowMs)
    if (limiter === undefined) {
      // `points` is not read: a failure is counted with penalty(), which never refuses; the budget judges.
      const duration = Math.max(1, Math.round(windowMs / 1000))
      limiter = new (limiters().RateLimiterRedis)({
        storeClient: this.redis,
        keyPrefix: this.k('authfail'),
        points: 1,
        duration
      })
      this.failureLimiters.set(windowMs, limiter)
    }
    return limiter
  }

  private k(s: string): string {
    return this.prefix + s
  }

  up(): boolean {
    return this.connected && !this.failing
  }
  reportStreams(counts: ReadonlyMap<string, number>): void {
    this.ownStreams = counts
  }
  otherStreams(key: string): number {
    return this.up() ? (this.others.get(key) ?? 0) : 0
  }

  writeHealth(key: string, record: HealthRecord): void {
    this.health.set(key, record)
    if (this.connected)
      this.redis.hset(this.k('health'), key, JSON.stringify(record)).catch(err => this.failed('write_health', err))
  }

  sharedHealth(): ReadonlyMap<string, HealthRecord> {
    return this.health
  }

  setAffinity(key: string, a: Affinity, ttlSeconds: number): void {
    if (!this.connected) return
    this.redis
      .set(this.k(`aff:${key}`), JSON.stringify(a), 'PX', Math.max(1, Math.round(ttlSeconds * 1000)))
      .catch(err => this.failed('set_affinity', err))
  }

  async getAffinity(key: string): Promise<Affinity | null> {
    if (!this.connected) return null
    let v: string | null
    try {
      v = await this.redis.get(this.k(`aff:${key}`))
    } catch (err) {
      this.failed('get_affinity', err)
      return null
    }
    try {
      return v === null ? null : (JSON.parse(v) as Affinity)
    } catch {
      return null // a foreign value under our key: no affinity
    }
  }

  deleteAffinity(key: string, legId: string): void {
    if (!this.connected) return
    // Only the leg that owns the record removes it (a re-attached leg may have replaced it).
    this.redis
      .eval(script.DELETE_AFFINITY, 1, this.k(`aff:${key}`), legId)
      .catch(err => this.failed('delete_affinity', err))
  }

  /** What this instance knows by itself: its own revocations and failures (all it has while Redis is away). */
  private readonly auth = new LocalAuthState()

  async revokeToken(jti: string, untilEpochMs: number, nowMs: number): Promise<void> {
    this.auth.revoke(jti, untilEpochMs, nowMs)
    const ms = Math.ceil(untilEpochMs - nowMs)
    if (ms <= 0) return
    if (!this.connected) throw new Error('Redis is not reachable: the revocation holds on this instance only')
    try {
      await this.redis.eval(script.REVOKE, 1, this.k(`revoked:${jti}`), String(ms))
    } catch (err) {
      this.failed('revoke_token', err)
      throw new Error('Redis did not take the revocation: it holds on this instance only')
    }
  }

  async isTokenRevoked(jti: string, nowMs: number): Promise<boolean> {
    if (this.auth.isRevoked(jti, nowMs)) return true
    if (!this.connected) return false
    try {
      return (await this.redis.exists(this.k(`revoked:${jti}`))) === 1
    } catch (err) {
      this.failed('read_revocation', err)
      return false
    }
  }

  /**
   * The fleet's count: rate-limiter-flexible's fixed window in Redis (one atomic script per failure, the
   * first opening the window), one limiter per window length. This instance's own count stands in while
   * Redis is away, and the larger of the two is the answer.
   */
  async countFailure(key: string, windowMs: number, nowMs: number): Promise<FailureWindow> {
    const local = this.auth.countFailure(key, windowMs, nowMs)
    if (!this.connected) return local
    try {
      const res = await this.failureWindows(windowMs).penalty(key, 1)
      return { count: Math.max(res.consumedPoints, local.count), resetInMs: Math.max(0, res.msBeforeNext) }
    } catch (err) {
      this.failed('count_failure', err)
      return local
    }
  }

  async takeLease(key: string, limit: number, id: string, ttlMs: number): Promise<boolean | null> {
    if (!this.up()) return null
    try {
      const took = await this.redis.eval(script.TAKE_LEASE, 1, this.k(`quota:${key}`), String(limit), id, String(ttlMs))
      return took === 1
    } catch (err) {
      this.failed('quota', err)
      return null
    }
  }

  refreshLeases(leases: readonly { key: string; id: string }[], ttlMs: number): void {
    if (!this.up()) return
    const byKey = new Map<string, string[]>()
    for (const l of leases) byKey.set(l.key, [...(byKey.get(l.key) ?? []), l.id])
    for (const [key, ids] of byKey)
      this.redis
        .eval(script.REFRESH_LEASES, 1, this.k(`quota:${key}`), String(ttlMs), ...ids)
        .catch(err => this.failed('quota', err))
  }

  releaseLease(key: string, id: string): void {
    if (!this.up()) return
    this.redis.zrem(this.k(`quota:${key}`), id).catch(err => this.failed('quota', err))
  }

  /** One unit of a per-second window: rate-limiter-flexible's fixed window in Redis (one atomic script). */
  async consumeRate(key: string, perSecond: number): Promise<number | null> {
    if (!this.up()) return null
    try {
      await this.rateWindows(perSecond).consume(key, 1)
      return 0
    } catch (err) {
      if (err instanceof limiters().RateLimiterRes) return Math.max(1, err.msBeforeNext)
      this.failed('quota', err)
      return null
    }
  }

  refundRate(key: string, perSecond: number): void {
    if (!this.up()) return
    this.rateWindows(perSecond)
      .reward(key, 1)
      .catch(err => this.failed('quota', err))
  }

  private rateWindows(perSecond: number): RateLimiterRedis {
    let limiter = this.rateLimiters.get(perSecond)
    if (limiter === undefined) {
      limiter = new (limiters().RateLimiterRedis)({
        storeClient: this.redis,
        keyPrefix: this.k('qrate'),
        points: perSecond,
        duration: 1
      })
      this.rateLimiters.set(perSecond, limiter)
    }
    return limiter
  }

  async claimOwner(key: string, owner: OwnerRecord, ttlMs: number, replacing = ''): Promise<OwnerRecord> {
    if (!this.connected) return owner
    try {
      const v = (await this.redis.eval(
        script.CLAIM_OWNER,
        1,
        this.k(`owner:${key}`),
        JSON.stringify(owner),
        owner.instance,
        String(Math.max(1, Math.round(ttlMs))),
        replacing
      )) as string
      return JSON.parse(v) as OwnerRecord
    } catch (err) {
      // Redis failing, or a foreign value under our key: the session is served here.
      this.failed('claim_owner', err)
      return owner
    }
  }

  /** One script per batch of keys (every key of the gateway is in one slot: see `hashTaggedPrefix`). */
  refreshOwners(keys: readonly string[], instance: string, ttlMs: number): void {
    if (!this.connected || keys.length === 0) return
    const ttl = String(Math.max(1, Math.round(ttlMs)))
    for (let i = 0; i < keys.length; i += REFRESH_BATCH) {
      const batch = keys.slice(i, i + REFRESH_BATCH).map(k => this.k(`owner:${k}`))
      this.redis
        .eval(script.REFRESH_OWNERS, batch.length, ...batch, instance, ttl)
        .catch(err => this.failed('refresh_owners', err))
    }
  }

  releaseOwner(key: string, instance: string): void {
    if (!this.connected) return
    this.redis
      .eval(script.RELEASE_OWNER, 1, this.k(`owner:${key}`), instance)
      .catch(err => this.failed('release_owner', err))
  }

  /** Call records (store/redis-calls.ts): one hash per contact. */
  private readonly calls: RedisCalls
  publishCalls(records: readonly CallRecord[], ttlMs: number): void {
    if (this.connected) this.calls.publish(records, ttlMs)
  }
  removeCall(contactId: string, legId: string): void {
    if (this.connected) this.calls.remove(contactId, legId)
  }
  async findCalls(contactId: string): Promise<CallRecord[]> {
    if (!this.connected) throw new Error('Redis is not reachable: the fleet’s calls cannot be listed')
    return await this.calls.find(contactId)
  }
  async listCalls(contacts: number): Promise<{ calls: CallRecord[]; more: boolean }> {
    if (!this.connected) throw new Error('Redis is not reachable: the fleet’s calls cannot be listed')
    return await this.calls.list(contacts)
  }

  /**
   * Leader while holding the lease; with Redis away or failing, every instance probes for itself. A store
   * that never probes (`prober: false`) never leads.
   */
  isLeader(): boolean {
    if (this.opts.prober === false) return false
    return this.up() ? this.leader : true
  }

  onSync(fn: () => void): void {
    this.listeners.push(fn)
  }

  async start(): Promise<void> {
    try {
      await this.redis.connect()
    } catch (err) {
      // Not reachable now (counted by the 'error' listener); ioredis keeps retrying.
      if (this.lastError === '') this.lastError = err instanceof Error ? err.message : String(err)
    }
    if (this.connected) await this.sync()
    if (!this.up())
      this.opts.log.error(
        { event: 'store_down', reason: this.lastError || 'not ready' },
        this.connected
          ? 'Redis commands failing at start: serving on local state until they succeed'
          : 'Redis unreachable at start: serving on local state until it returns'
      )
    this.timer = setInterval(() => {
      void this.sync()
    }, this.opts.syncIntervalMs)
    this.timer.unref()
  }

  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer)
    this.closing = true
    try {
      if (this.connected) {
        const res = await this.redis
          .multi()
          .del(this.k(`streams:${this.instanceId}`))
          .zrem(this.k('instances'), this.instanceId)
          .exec()
        const err = firstError(res)
        if (err !== null) throw err
        if (this.leader) await this.redis.eval(script.RELEASE_LEAD, 1, this.k('leader'), this.instanceId)
      }
    } catch (err) {
      // Shutting down anyway: counted, and the keys expire with their lease.
      this.failed('close', err)
    }
    this.redis.disconnect()
  }

  /** One round trip's worth of sharing. Never rejects (failures are counted); overlapping calls share one. */
  sync(): Promise<void> {
    if (!this.connected || this.closing) return Promise.resolve()
    this.syncing ??= this.syncOnce().finally(() => {
      this.syncing = null
    })
    return this.syncing
  }

  private async syncOnce(): Promise<void> {
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
      const prober = this.opts.prober !== false
      if (prober) tx.eval(script.LEAD, 1, this.k('leader'), this.instanceId, String(leaseMs))
      const res = await tx.exec()
      const txErr = firstError(res)
      if (txErr !== null || res === null) throw txErr
      const n = res.length - (prober ? 1 : 0)
      const instances = (res[n - 2][1] as string[]).filter(i => i !== this.instanceId)
      const healthRaw = res[n - 1][1] as Record<string, string>
      const leader = prober && res[n][1] === 1
      const health = new Map<string, HealthRecord>()
      for (const [k, v] of Object.entries(healthRaw)) {
        try {
          health.set(k, JSON.parse(v) as HealthRecord)
        } catch {
          /* a foreign value: ignore */
        }
      }
      const others = new Map<string, number>()
      if (instances.length > 0) {
        const p = this.redis.pipeline()
        for (const i of instances) p.hgetall(this.k(`streams:${i}`))
        const counts = await p.exec()
        const pErr = firstError(counts)
        if (pErr !== null) throw pErr
        for (const [, value] of counts ?? []) {
          for (const [k, v] of Object.entries(value as Record<string, string>))
            others.set(k, (others.get(k) ?? 0) + Number(v))
        }
      }
      this.leader = leader
      this.health = health
      this.others = others
      if (this.failing) {
        this.failing = false
        this.report()
      }
      this.lastError = ''
      for (const fn of this.listeners) fn()
    } catch (err) {
      // The last cache stays for local use, but up() is false until a sync succeeds.
      this.failed('sync', err)
    }
  }
}
