import { LocalShared } from './local-shared'
import type { Affinity, OwnerRecord } from './port'
import { REFRESH_BATCH, type StoreOp } from './redis-options'
import * as script from './redis-scripts'

/** What of the Redis client the owner and affinity records use (store/redis.ts owns the client: the only ioredis importer). */
export interface RecordClient {
  eval: (script: string, numKeys: number, ...args: (string | number)[]) => Promise<unknown>
  get: (key: string) => Promise<string | null>
  set: (key: string, value: string, px: 'PX', ms: number) => Promise<unknown>
  del: (key: string) => Promise<unknown>
}

/**
 * Who owns a session (`owner:<key>`) and where a leg's vendor session lives (`aff:<key>`), in Redis. The
 * store calls these only over a ready connection; every failed command is counted, and the caller falls
 * back to serving here.
 */
export class RedisOwners {
  constructor(
    private readonly redis: RecordClient,
    private readonly k: (s: string) => string,
    private readonly failed: (op: StoreOp, err: unknown) => void,
    private readonly connected: () => boolean = () => true
  ) {}

  /** A contact's shared values and groups while Redis is away. */
  private readonly local = new LocalShared()

  setAffinity(key: string, a: Affinity, ttlSeconds: number): void {
    this.redis
      .set(this.k(`aff:${key}`), JSON.stringify(a), 'PX', Math.max(1, Math.round(ttlSeconds * 1000)))
      .catch(err => this.failed('set_affinity', err))
  }

  async getAffinity(key: string): Promise<Affinity | null> {
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
    // Only the leg that owns the record removes it (a re-attached leg may have replaced it).
    this.redis
      .eval(script.DELETE_AFFINITY, 1, this.k(`aff:${key}`), legId)
      .catch(err => this.failed('delete_affinity', err))
  }

  async claimOwner(key: string, owner: OwnerRecord, ttlMs: number, replacing: string): Promise<OwnerRecord> {
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
    const ttl = String(Math.max(1, Math.round(ttlMs)))
    for (let i = 0; i < keys.length; i += REFRESH_BATCH) {
      const batch = keys.slice(i, i + REFRESH_BATCH).map(k => this.k(`owner:${k}`))
      this.redis
        .eval(script.REFRESH_OWNERS, batch.length, ...batch, instance, ttl)
        .catch(err => this.failed('refresh_owners', err))
    }
  }

  releaseOwner(key: string, instance: string): void {
    this.redis
      .eval(script.RELEASE_OWNER, 1, this.k(`owner:${key}`), instance)
      .catch(err => this.failed('release_owner', err))
  }

  /** A contact's shared values (a hash, `shared:<key>`), compare-and-set; a shared value is never '' (that is none). */
  async swapShared(
    key: string,
    field: string,
    expect: string | null,
    value: string | null,
    ttlMs: number
  ): Promise<string | null> {
    if (!this.connected()) return this.local.swap(key, field, expect, value, ttlMs, Date.now())
    const ttl = String(Math.max(1, Math.round(ttlMs)))
    const args = [field, expect ?? '', value ?? '', ttl]
    const v = (await this.redis
      .eval(script.SWAP_SHARED, 1, this.k(`shared:${key}`), ...args)
      .catch(err => this.sharedFailed(err))) as string
    return v === '' ? null : v
  }

  async dropShared(key: string): Promise<void> {
    if (!this.connected()) return this.local.drop(key)
    await this.redis.del(this.k(`shared:${key}`)).catch(err => this.sharedFailed(err))
  }

  /**
   * A contact's group (`members:<key>`), a set whose TTL each change renews. Redis away: unknown (null), as no
   * table here saw the legs of the other instances (nor this one's, from before); a teardown then leaves the
   * contact's `last` steps and shared values alone rather than end a call whose legs live elsewhere.
   */
  async countMembers(key: string, member: string, present: boolean, ttlMs: number): Promise<number | null> {
    if (!this.connected()) return null
    const ttl = String(Math.max(1, Math.round(ttlMs)))
    const k = this.k(`members:${key}`)
    const n = this.redis.eval(script.COUNT_MEMBERS, 1, k, member, present ? '1' : '0', ttl)
    return Number(await n.catch(err => this.sharedFailed(err)))
  }

  /** Counted, then the caller's: a shared step that cannot reach its value fails its leg or utterance. */
  private sharedFailed(err: unknown): never {
    this.failed('shared', err)
    throw err
  }
}
