import type { StoreAsk } from '../workers/protocol'
import type { Affinity, FailureWindow, HealthRecord, JoinOwner, Store } from './port'

/** What the worker store needs of the IPC channel to the main process (workers/protocol.ts messages). */
export interface MainLink {
  send: (
    m:
      | { t: 'streams'; counts: [string, number][] }
      | { t: 'health'; key: string; record: HealthRecord }
      | { t: 'aff-set'; key: string; affinity: Affinity; ttlSeconds: number }
      | { t: 'aff-del'; key: string; legId: string }
      | { t: 'aff-get'; id: number; key: string }
      | { t: 'store-ask'; id: number; ask: StoreAsk }
  ) => void
}

/**
 * The in-memory store of one worker of `serve --workers N`: the main process holds the memory store and
 * every worker reaches it over IPC. Reads stay synchronous from a cache the main process pushes (`sync`:
 * the health verdicts, the other workers' stream counts, and whether this worker runs the probes);
 * writes are sent and also applied to the cache at once; affinity reads ask the main process.
 */
export class WorkerStore implements Store {
  readonly kind = 'memory' as const
  private health = new Map<string, HealthRecord>()
  private others = new Map<string, number>()
  private leader = false
  private readonly listeners: (() => void)[] = []
  private readonly asks = new Map<number, (a: Affinity | null) => void>()
  private readonly storeAsks = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  private nextAsk = 1

  constructor(
    readonly instanceId: string,
    private readonly link: MainLink
  ) {}

  up(): boolean {
    return true
  }
  reportStreams(counts: ReadonlyMap<string, number>): void {
    this.link.send({ t: 'streams', counts: [...counts] })
  }
  otherStreams(key: string): number {
    return this.others.get(key) ?? 0
  }
  writeHealth(key: string, record: HealthRecord): void {
    this.health.set(key, record)
    this.link.send({ t: 'health', key, record })
    for (const fn of this.listeners) fn()
  }
  sharedHealth(): ReadonlyMap<string, HealthRecord> {
    return this.health
  }
  setAffinity(key: string, affinity: Affinity, ttlSeconds: number): void {
    this.link.send({ t: 'aff-set', key, affinity, ttlSeconds })
  }
  async getAffinity(key: string): Promise<Affinity | null> {
    const id = this.nextAsk++
    this.link.send({ t: 'aff-get', id, key })
    return await new Promise(resolve => this.asks.set(id, resolve))
  }
  deleteAffinity(key: string, legId: string): void {
    this.link.send({ t: 'aff-del', key, legId })
  }
  // Token revocations and failure counts live in the main process's memory store, shared by every worker.
  async revokeToken(jti: string, untilEpochMs: number, nowMs: number): Promise<void> {
    await this.ask({ op: 'revoke', jti, untilEpochMs, nowMs })
  }
  async isTokenRevoked(jti: string, nowMs: number): Promise<boolean> {
    return (await this.ask({ op: 'revoked', jti, nowMs })) === true
  }
  async countFailure(key: string, windowMs: number, nowMs: number): Promise<FailureWindow> {
    return (await this.ask({ op: 'fail', key, windowMs, nowMs })) as FailureWindow
  }
  // Joined calls' owners too, so the TX and RX legs of a call on two workers meet in one of them.
  async claimJoin(key: string, owner: JoinOwner, ttlMs: number, replacing?: string): Promise<JoinOwner> {
    return (await this.ask({ op: 'join-claim', key, owner, ttlMs, replacing })) as JoinOwner
  }
  releaseJoin(key: string, instance: string): void {
    this.ask({ op: 'join-release', key, instance }).catch(() => {})
  }
  private ask(ask: StoreAsk): Promise<unknown> {
    const id = this.nextAsk++
    this.link.send({ t: 'store-ask', id, ask })
    return new Promise((resolve, reject) => this.storeAsks.set(id, { resolve, reject }))
  }
  /** The main process's answer to a revocation, failure-count or join-owner call. */
  storeAnswered(id: number, value: unknown, error?: string): void {
    const a = this.storeAsks.get(id)
    this.storeAsks.delete(id)
    if (error !== undefined) a?.reject(new Error(error))
    else a?.resolve(value)
  }

  isLeader(): boolean {
    return this.leader
  }
  onSync(fn: () => void): void {
    this.listeners.push(fn)
  }
  async start(): Promise<void> {}
  async close(): Promise<void> {
    for (const resolve of this.asks.values()) resolve(null)
    this.asks.clear()
    for (const a of this.storeAsks.values()) a.reject(new Error('the main process is gone'))
    this.storeAsks.clear()
  }

  /** The main process's `sync`: the shared state as of now. */
  synced(health: [string, HealthRecord][], others: [string, number][], leader: boolean): void {
    this.health = new Map(health)
    this.others = new Map(others)
    this.leader = leader
    for (const fn of this.listeners) fn()
  }

  /** The main process's answer to an affinity read. */
  answered(id: number, affinity: Affinity | null): void {
    this.asks.get(id)?.(affinity)
    this.asks.delete(id)
  }
}
