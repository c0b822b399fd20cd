import type { Cluster, ClusterOptions, default as Redis, RedisOptions } from 'ioredis'
import type { RateLimiterRedis } from 'rate-limiter-flexible'
import { systemClock, Timer } from '../clock'
import { LocalAuthState } from './local-auth'
import type { Affinity, CallRecord, FailureWindow, HealthRecord, OwnerRecord, QuotaStore, Store } from './port'
import { RedisCalls } from './redis-calls'
import { CONNECTED, RedisLink } from './redis-link'
import {
  firstError,
  hashTaggedPrefix,
  healthFrom,
  streamTotals,
  type RedisStoreOptions,
  type StoreOp
} from './redis-options'
import { RedisOwners } from './redis-owners'
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
 * `onError`; a failing store clears on the next successful sync. The connection's states and what each
 * event does in each are store/redis-link.ts.
 */
export class RedisStore implements Store, QuotaStore {
  readonly kind = 'redis' as const
  readonly shared = true
  private readonly redis: Redis | Cluster
  private readonly prefix: string
  private health = new Map<string, HealthRecord>()
  private others = new Map<string, number>()
  private ownStreams: ReadonlyMap<string, number> = new Map()
  /** The connection's state (store/redis-link.ts): whether commands go out, whether sharing works, the lease. */
  private readonly link: RedisLink
  /** Count a failed command: the store is not up until a sync succeeds. */
  private readonly failed = (op: StoreOp, err: unknown): void => this.link.failed(op, err)
  private readonly timer = new Timer(systemClock)
  private readonly listeners: (() => void)[] = []
  private syncing: Promise<void> | null = null
  /**
   * rate-limiter-flexible's fixed windows, made on first use: the failure budget's fleet counts (`authfail`, one
   * per window length: auth.failureBudget.windowSeconds) and the quotas' per-second windows (`qrate`, one per rate).
   */
  private readonly limiters = new Map<string, RateLimiterRedis>()

  constructor(
    readonly instanceId: string,
    private readonly opts: RedisStoreOptions
  ) {
    this.prefix = hashTaggedPrefix(opts.keyPrefix)
    this.link = new RedisLink(opts)
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
    this.calls = new RedisCalls(this.redis, s => this.k(s), this.failed)
    this.owners = new RedisOwners(
      this.redis,
      s => this.k(s),
      this.failed,
      () => this.link.connected()
    )
    this.redis.on('ready', () => {
      if (this.link.ready()) void this.sync()
    })
    this.redis.on('end', () => this.link.lost())
    this.redis.on('close', () => this.link.lost())
    this.redis.on('error', (err: Error) => this.link.connectError(err))
  }

  /** `authfail`: `points` is not read (a failure is counted with penalty(), which never refuses; the budget judges). */
  private windows(kind: 'authfail' | 'qrate', n: number): RateLimiterRedis {
    let limiter = this.limiters.get(`${kind}:${n}`)
    if (limiter === undefined) {
      limiter = new (limiters().RateLimiterRedis)({
        storeClient: this.redis,
        keyPrefix: this.k(kind),
        ...(kind === 'authfail'
          ? { points: 1, duration: Math.max(1, Math.round(n / 1000)) }
          : { points: n, duration: 1 })
      })
      this.limiters.set(`${kind}:${n}`, limiter)
    }
    return limiter
  }

  private k(s: string): string {
    return this.prefix + s
  }

  up(): boolean {
    return this.link.up()
  }
  reportStreams(counts: ReadonlyMap<string, number>): void {
    this.ownStreams = counts
  }
  otherStreams(key: string): number {
    return this.up() ? (this.others.get(key) ?? 0) : 0
  }

  writeHealth(key: string, record: HealthRecord): void {
    this.health.set(key, record)
    if (this.link.connected())
      this.redis.hset(this.k('health'), key, JSON.stringify(record)).catch(err => this.failed('write_health', err))
  }

  sharedHealth(): ReadonlyMap<string, HealthRecord> {
    return this.health
  }

  /** Owner and affinity records (store/redis-owners.ts). */
  private readonly owners: RedisOwners
  setAffinity(key: string, a: Affinity, ttlSeconds: number): void {
    if (this.link.connected()) this.owners.setAffinity(key, a, ttlSeconds)
  }
  async getAffinity(key: string): Promise<Affinity | null> {
    return this.link.connected() ? await this.owners.getAffinity(key) : null
  }
  deleteAffinity(key: string, legId: string): void {
    if (this.link.connected()) this.owners.deleteAffinity(key, legId)
  }

  /** What this instance knows by itself: its own revocations and failures (all it has while Redis is away). */
  private readonly auth = new LocalAuthState()

  async revokeToken(jti: string, untilEpochMs: number, nowMs: number): Promise<void> {
    this.auth.revoke(jti, untilEpochMs, nowMs)
    const ms = Math.ceil(untilEpochMs - nowMs)
    if (ms <= 0) return
    if (!this.link.connected()) throw new Error('Redis is not reachable: the revocation holds on this instance only')
    try {
      await this.redis.eval(script.REVOKE, 1, this.k(`revoked:${jti}`), String(ms))
    } catch (err) {
      this.failed('revoke_token', err)
      throw new Error('Redis did not take the revocation: it holds on this instance only')
    }
  }

  async isTokenRevoked(jti: string, nowMs: number): Promise<boolean> {
    if (this.auth.isRevoked(jti, nowMs)) return true
    if (!this.link.connected()) return false
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
    if (!this.link.connected()) return local
    try {
      const res = await this.windows('authfail', windowMs).penalty(key, 1)
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
      await this.windows('qrate', perSecond).consume(key, 1)
      return 0
    } catch (err) {
      if (err instanceof limiters().RateLimiterRes) return Math.max(1, err.msBeforeNext)
      this.failed('quota', err)
      return null
    }
  }

  refundRate(key: string, perSecond: number): void {
    if (!this.up()) return
    this.windows('qrate', perSecond)
      .reward(key, 1)
      .catch(err => this.failed('quota', err))
  }

  async claimOwner(key: string, owner: OwnerRecord, ttlMs: number, replacing = ''): Promise<OwnerRecord> {
    return this.link.connected() ? await this.owners.claimOwner(key, owner, ttlMs, replacing) : owner
  }
  refreshOwners(keys: readonly string[], instance: string, ttlMs: number): void {
    if (this.link.connected() && keys.length > 0) this.owners.refreshOwners(keys, instance, ttlMs)
  }
  releaseOwner(key: string, instance: string): void {
    if (this.link.connected()) this.owners.releaseOwner(key, instance)
  }

  // A contact's shared values and groups (store/redis-owners.ts; this process's own while Redis is away).
  readonly swapShared: Store['swapShared'] = (...a) => this.owners.swapShared(...a)
  readonly dropShared: Store['dropShared'] = key => this.owners.dropShared(key)
  readonly countMembers: Store['countMembers'] = (...a) => this.owners.countMembers(...a)

  /** Call records (store/redis-calls.ts): one hash per contact. */
  private readonly calls: RedisCalls
  publishCalls(records: readonly CallRecord[], ttlMs: number): void {
    if (this.link.connected()) this.calls.publish(records, ttlMs)
  }
  removeCall(contactId: string, legId: string): void {
    if (this.link.connected()) this.calls.remove(contactId, legId)
  }
  async findCalls(contactId: string): Promise<CallRecord[]> {
    if (!this.link.connected()) throw new Error('Redis is not reachable: the fleet’s calls cannot be listed')
    return await this.calls.find(contactId)
  }
  async listCalls(contacts: number): Promise<{ calls: CallRecord[]; more: boolean }> {
    if (!this.link.connected()) throw new Error('Redis is not reachable: the fleet’s calls cannot be listed')
    return await this.calls.list(contacts)
  }

  /**
   * Leader while holding the lease; with Redis away or failing, every instance probes for itself. A store
   * that never probes (`prober: false`) never leads.
   */
  isLeader(): boolean {
    if (this.opts.prober === false) return false
    return this.up() ? this.link.leader() : true
  }

  onSync(fn: () => void): void {
    this.listeners.push(fn)
  }

  async start(): Promise<void> {
    try {
      await this.redis.connect()
    } catch (err) {
      // Not reachable now (counted by the 'error' listener); ioredis keeps retrying.
      this.link.startError(err)
    }
    if (this.link.connected()) await this.sync()
    this.link.sayNotUpAtStart()
    this.timer.every(this.opts.syncIntervalMs, () => void this.sync())
  }

  async close(): Promise<void> {
    this.timer.clear()
    // Our own quit at shutdown is not an outage: nothing is said of it (store/redis-link.ts).
    const was = this.link.close()
    try {
      if (CONNECTED[was]) {
        const res = await this.redis
          .multi()
          .del(this.k(`streams:${this.instanceId}`))
          .zrem(this.k('instances'), this.instanceId)
          .exec()
        const err = firstError(res)
        if (err !== null) throw err
        if (this.link.leader()) await this.redis.eval(script.RELEASE_LEAD, 1, this.k('leader'), this.instanceId)
      }
    } catch (err) {
      // Shutting down anyway: counted, and the keys expire with their lease.
      this.failed('close', err)
    }
    this.redis.disconnect()
  }

  /** One round trip's worth of sharing. Never rejects (failures are counted); overlapping calls share one. */
  sync(): Promise<void> {
    if (!this.link.syncs()) return Promise.resolve()
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
      let counts: [Error | null, unknown][] | null = []
      if (instances.length > 0) {
        const p = this.redis.pipeline()
        for (const i of instances) p.hgetall(this.k(`streams:${i}`))
        counts = await p.exec()
        const pErr = firstError(counts)
        if (pErr !== null) throw pErr
      }
      this.health = healthFrom(healthRaw)
      this.others = streamTotals(counts)
      this.link.synced(leader)
      for (const fn of this.listeners) fn()
    } catch (err) {
      // The last cache stays for local use, but up() is false until a sync succeeds.
      this.failed('sync', err)
    }
  }
}
