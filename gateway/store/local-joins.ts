import type { JoinOwner } from './port'

/** Most joined calls one process keeps: past it, expired records are swept, then the oldest go. */
const MAX_ENTRIES = 100_000

/**
 * The joined-call owners one process keeps (the memory store's whole answer; the Redis store's while
 * Redis is away, where it answers with the caller itself). Times are the caller's (`nowMs`).
 */
export class LocalJoins {
  private readonly owners = new Map<string, { owner: JoinOwner; until: number }>()

  claim(key: string, owner: JoinOwner, ttlMs: number, nowMs: number, replacing?: string): JoinOwner {
    const held = this.owners.get(key)
    if (
      held !== undefined &&
      held.until > nowMs &&
      held.owner.instance !== owner.instance &&
      held.owner.instance !== replacing
    )
      return held.owner
    if (held === undefined && this.owners.size >= MAX_ENTRIES) this.sweep(nowMs)
    this.owners.set(key, { owner, until: nowMs + ttlMs })
    return owner
  }

  release(key: string, instance: string): void {
    if (this.owners.get(key)?.owner.instance === instance) this.owners.delete(key)
  }

  private sweep(nowMs: number): void {
    for (const [k, v] of this.owners) if (v.until <= nowMs) this.owners.delete(k)
    for (const k of this.owners.keys()) {
      if (this.owners.size < MAX_ENTRIES) break
      this.owners.delete(k)
    }
  }
}
