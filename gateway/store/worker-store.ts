import type { Affinity, HealthRecord, Store } from './port'

/** What the worker store needs of the IPC channel to the main process (workers/protocol.ts messages). */
export interface MainLink {
  send: (
    m:
      | { t: 'streams'; counts: [string, number][] }
      | { t: 'health'; key: string; record: HealthRecord }
      | { t: 'aff-set'; key: string; affinity: Affinity; ttlSeconds: number }
      | { t: 'aff-del'; key: string; legId: string }
      | { t: 'aff-get'; id: number; key: string }
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
