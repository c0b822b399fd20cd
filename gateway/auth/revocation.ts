import type { Store } from '../store/port'

/**
 * Revoked token ids (`jti`); an entry is needed only until the token it names expires. `isRevoked`
 * may answer at once (memory) or after asking the fleet's store (Redis: the next request on every
 * instance sees a revocation).
 */
export interface RevocationStore {
  /** Revokes `jti` until `untilEpochMs` (the token's `exp`, in ms); a later call may only extend it. */
  revoke(jti: string, untilEpochMs: number): Promise<void>
  /** True while `jti` is revoked. */
  isRevoked(jti: string): boolean | Promise<boolean>
}

/** The revocation list kept in the gateway's store (gateway/store: memory, or Redis shared by the fleet). */
export class StoreRevocations implements RevocationStore {
  /** `nowMs`: epoch milliseconds (wall clock; tests pass their own). */
  constructor(
    private readonly store: Pick<Store, 'revokeToken' | 'isTokenRevoked'>,
    private readonly nowMs: () => number = Date.now
  ) {}

  revoke(jti: string, untilEpochMs: number): Promise<void> {
    return this.store.revokeToken(jti, untilEpochMs, this.nowMs())
  }

  isRevoked(jti: string): Promise<boolean> {
    return this.store.isTokenRevoked(jti, this.nowMs())
  }
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
