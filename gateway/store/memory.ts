import { systemClock, Timer } from '../clock'
import { LocalAuthState } from './local-auth'
import { LocalCalls } from './local-calls'
import { LocalOwners } from './local-owners'
import { LocalShared } from './local-shared'
import type { Affinity, CallRecord, FailureWindow, HealthRecord, OwnerRecord, Store } from './port'

/** Single-instance store: the process's own maps. */
export class MemoryStore implements Store {
  readonly kind = 'memory' as const
  readonly shared = false
  private readonly health = new Map<string, HealthRecord>()
  private readonly affinity = new Map<string, { a: Affinity; until: number }>()
  private readonly listeners: (() => void)[] = []
  constructor(readonly instanceId: string) {}
  up(): boolean {
    return true
  }
  reportStreams(): void {}
  otherStreams(): number {
    return 0
  }
  writeHealth(key: string, record: HealthRecord): void {
    this.health.set(key, record)
    for (const fn of this.listeners) fn()
  }

  sharedHealth(): ReadonlyMap<string, HealthRecord> {
    return this.health
  }
  setAffinity(key: string, a: Affinity, ttlSeconds: number): void {
    this.affinity.set(key, { a, until: Date.now() + ttlSeconds * 1000 })
  }

  async getAffinity(key: string): Promise<Affinity | null> {
    const hit = this.affinity.get(key)
    if (hit === undefined) return null
    if (hit.until < Date.now()) {
      this.affinity.delete(key)
      return null
    }
    return hit.a
  }

  deleteAffinity(key: string, legId: string): void {
    if (this.affinity.get(key)?.a.legId === legId) this.affinity.delete(key)
  }

  private readonly auth = new LocalAuthState()
  async revokeToken(jti: string, untilEpochMs: number, nowMs: number): Promise<void> {
    this.auth.revoke(jti, untilEpochMs, nowMs)
  }

  async isTokenRevoked(jti: string, nowMs: number): Promise<boolean> {
    return this.auth.isRevoked(jti, nowMs)
  }

  async countFailure(key: string, windowMs: number, nowMs: number): Promise<FailureWindow> {
    return this.auth.countFailure(key, windowMs, nowMs)
  }

  private readonly owners = new LocalOwners()
  async claimOwner(key: string, owner: OwnerRecord, ttlMs: number, replacing?: string): Promise<OwnerRecord> {
    return this.owners.claim(key, owner, ttlMs, Date.now(), replacing)
  }
  refreshOwners(keys: readonly string[], instance: string, ttlMs: number): void {
    this.owners.refresh(keys, instance, ttlMs, Date.now())
  }
  releaseOwner(key: string, instance: string): void {
    this.owners.release(key, instance)
  }
  /** The process `instance` is gone (a worker that exited): the owner records it had go at once, its call records too. */
  releaseOwnersOf(instance: string): void {
    this.owners.releaseAll(instance)
    this.calls.removeAllOf(instance)
  }

  private readonly calls = new LocalCalls()
  publishCalls(records: readonly CallRecord[], ttlMs: number): void {
    this.calls.publish(records, ttlMs, Date.now())
  }
  removeCall(contactId: string, legId: string): void {
    this.calls.remove(contactId, legId)
  }
  async findCalls(contactId: string): Promise<CallRecord[]> {
    return this.calls.find(contactId, Date.now())
  }
  async listCalls(contacts: number): Promise<{ calls: CallRecord[]; more: boolean }> {
    return this.calls.list(contacts, Date.now())
  }

  // A contact's shared values and groups (store/local-shared.ts), at this process's time.
  private readonly sharedValues = new LocalShared()
  readonly swapShared: Store['swapShared'] = async (...a) => this.sharedValues.swap(...a, Date.now())
  readonly dropShared: Store['dropShared'] = async key => this.sharedValues.drop(key)
  readonly countMembers: Store['countMembers'] = async (...a) => this.sharedValues.count(...a, Date.now())

  isLeader(): boolean {
    return true
  }
  onSync(fn: () => void): void {
    this.listeners.push(fn)
  }
  private readonly sweeper = new Timer(systemClock)
  async start(): Promise<void> {
    // Expired affinities nobody asked for again are swept, so a long-running instance does not grow.
    this.sweeper.every(60_000, () => {
      const now = Date.now()
      for (const [k, v] of this.affinity) if (v.until < now) this.affinity.delete(k)
    })
  }

  async close(): Promise<void> {
    this.sweeper.clear()
  }
}
