import type { Affinity, CallRecord, FailureWindow, HealthRecord, OwnerRecord, Store } from '../store/port'
import type { StoreAsk, StoreWrite, StoreWriteCall } from './protocol'

/**
 * The in-memory store of one worker of `serve --workers N`: the main process holds the memory store and
 * every worker reaches it over IPC. Reads stay synchronous from a cache the main process pushes (`sync`:
 * the health verdicts, the other workers' stream counts, and whether this worker runs the probes);
 * writes are sent and also applied to the cache at once; the rest asks the main process.
 */
export class WorkerStore implements Store {
  readonly kind = 'memory' as const
  readonly shared = true
  private health = new Map<string, HealthRecord>()
  private others = new Map<string, number>()
  private leader = false
  private readonly listeners: (() => void)[] = []
  private readonly asks = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  private nextAsk = 1

  constructor(
    readonly instanceId: string,
    private readonly send: (m: StoreWrite) => void
  ) {}

  up(): boolean {
    return true
  }
  reportStreams(counts: ReadonlyMap<string, number>): void {
    this.send({ t: 'streams', counts: [...counts] })
  }
  otherStreams(key: string): number {
    return this.others.get(key) ?? 0
  }
  writeHealth(key: string, record: HealthRecord): void {
    this.health.set(key, record)
    this.send({ t: 'health', key, record })
    for (const fn of this.listeners) fn()
  }
  sharedHealth(): ReadonlyMap<string, HealthRecord> {
    return this.health
  }
  setAffinity(key: string, affinity: Affinity, ttlSeconds: number): void {
    this.write({ op: 'setAffinity', args: [key, affinity, ttlSeconds] })
  }
  async getAffinity(key: string): Promise<Affinity | null> {
    return (await this.ask({ op: 'getAffinity', args: [key] })) as Affinity | null
  }
  deleteAffinity(key: string, legId: string): void {
    this.write({ op: 'deleteAffinity', args: [key, legId] })
  }
  // Token revocations and failure counts live in the main process's memory store, shared by every worker.
  async revokeToken(jti: string, untilEpochMs: number, nowMs: number): Promise<void> {
    await this.ask({ op: 'revokeToken', args: [jti, untilEpochMs, nowMs] })
  }
  async isTokenRevoked(jti: string, nowMs: number): Promise<boolean> {
    return (await this.ask({ op: 'isTokenRevoked', args: [jti, nowMs] })) === true
  }
  async countFailure(key: string, windowMs: number, nowMs: number): Promise<FailureWindow> {
    return (await this.ask({ op: 'countFailure', args: [key, windowMs, nowMs] })) as FailureWindow
  }
  // Session owner records too, so a leg on one worker finds the worker that owns its session.
  async claimOwner(key: string, owner: OwnerRecord, ttlMs: number, replacing?: string): Promise<OwnerRecord> {
    return (await this.ask({ op: 'claimOwner', args: [key, owner, ttlMs, replacing] })) as OwnerRecord
  }
  refreshOwners(keys: readonly string[], instance: string, ttlMs: number): void {
    this.write({ op: 'refreshOwners', args: [keys, instance, ttlMs] })
  }
  releaseOwner(key: string, instance: string): void {
    this.write({ op: 'releaseOwner', args: [key, instance] })
  }
  // Call records too: the main process's /admin/calls answers for every worker.
  publishCalls(records: readonly CallRecord[], ttlMs: number): void {
    if (records.length > 0) this.write({ op: 'publishCalls', args: [records, ttlMs] })
  }
  removeCall(contactId: string, legId: string): void {
    this.write({ op: 'removeCall', args: [contactId, legId] })
  }
  async findCalls(contactId: string): Promise<CallRecord[]> {
    return (await this.ask({ op: 'findCalls', args: [contactId] })) as CallRecord[]
  }
  /** Not asked of a worker: the main process answers `GET /admin/calls` for every worker from its own store. */
  async listCalls(): Promise<{ calls: CallRecord[]; more: boolean }> {
    throw new Error('the main process lists the calls of every worker')
  }
  // A contact's shared values and groups too: every worker's legs and utterances of a contact see one.
  readonly swapShared: Store['swapShared'] = (...args) => this.ask({ op: 'swapShared', args }) as Promise<string | null>
  readonly dropShared: Store['dropShared'] = async (...args) => {
    await this.ask({ op: 'dropShared', args })
  }
  readonly countMembers: Store['countMembers'] = (...args) =>
    this.ask({ op: 'countMembers', args }) as Promise<number | null>
  /** A write the main process makes on its memory store (no answer). */
  private write(call: StoreWriteCall): void {
    this.send({ t: 'store-write', call })
  }
  private ask(ask: StoreAsk): Promise<unknown> {
    const id = this.nextAsk++
    this.send({ t: 'store-ask', id, ask })
    return new Promise((resolve, reject) => this.asks.set(id, { resolve, reject }))
  }
  /** The main process's answer to a call. */
  answered(id: number, value: unknown, error?: string): void {
    const a = this.asks.get(id)
    this.asks.delete(id)
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
    for (const a of this.asks.values()) a.reject(new Error('the main process is gone'))
    this.asks.clear()
  }

  /** The main process's `sync`: the shared state as of now. */
  synced(health: [string, HealthRecord][], others: [string, number][], leader: boolean): void {
    this.health = new Map(health)
    this.others = new Map(others)
    this.leader = leader
    for (const fn of this.listeners) fn()
  }
}
