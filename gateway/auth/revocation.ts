/**
 * Revoked token ids (`jti`). `isRevoked` is synchronous: it reads a local cache, so verification
 * never waits on the store. A shared implementation (Redis) keeps that cache filled from the store and
 * writes through on `revoke`; an entry is needed only until the token it names expires.
 */
export interface RevocationStore {
  /** Revokes `jti` until `untilEpochMs` (the token's `exp`, in ms); a later call may only extend it. */
  revoke(jti: string, untilEpochMs: number): Promise<void>
  /** True while `jti` is revoked, as far as this instance's cache knows. */
  isRevoked(jti: string): boolean
}

/** The single-instance store: a map of jti → until, pruned as entries pass their time. */
export class MemoryRevocationStore implements RevocationStore {
  private readonly until = new Map<string, number>()
  private nextPrune = 0

  /** `nowMs`: epoch milliseconds (wall clock; tests pass their own). */
  constructor(private readonly nowMs: () => number = Date.now) {}

  async revoke(jti: string, untilEpochMs: number): Promise<void> {
    const now = this.nowMs()
    this.prune(now)
    if (untilEpochMs <= now) return
    this.until.set(jti, Math.max(untilEpochMs, this.until.get(jti) ?? 0))
  }

  isRevoked(jti: string): boolean {
    const until = this.until.get(jti)
    if (until === undefined) return false
    if (until > this.nowMs()) return true
    this.until.delete(jti)
    return false
  }

  /** Entries still held (expired ones may linger until the next prune). */
  get size(): number {
    return this.until.size
  }

  private prune(now: number): void {
    if (now < this.nextPrune) return
    this.nextPrune = now + 60_000
    for (const [jti, until] of this.until) if (until <= now) this.until.delete(jti)
  }
}
