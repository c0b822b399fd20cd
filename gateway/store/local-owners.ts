import type { OwnerRecord } from './port'

/** Most records one process keeps: past it, expired records are swept, then the oldest go. */
const MAX_ENTRIES = 200_000

/**
 * The session owner records one process keeps (audio/placement/placement.ts): the memory store's whole answer,
 * and the Redis store's while Redis is away (where it answers with the caller itself). Times are the
 * caller's (`nowMs`).
 */
export class LocalOwners {
  private readonly records = new Map<string, { owner: OwnerRecord; until: number }>()

  claim(key: string, owner: OwnerRecord, ttlMs: number, nowMs: number, replacing?: string): OwnerRecord {
    const held = this.records.get(key)
    if (
      held !== undefined &&
      held.until > nowMs &&
      held.owner.instance !== owner.instance &&
      held.owner.instance !== replacing
    )
      return held.owner
    if (held === undefined && this.records.size >= MAX_ENTRIES) this.sweep(nowMs)
    this.records.set(key, { owner, until: nowMs + ttlMs })
    return owner
  }

  refresh(keys: readonly string[], instance: string, ttlMs: number, nowMs: number): void {
    for (const key of keys) {
      const held = this.records.get(key)
      if (held !== undefined && held.owner.instance === instance) held.until = nowMs + ttlMs
    }
  }

  release(key: string, instance: string): void {
    if (this.records.get(key)?.owner.instance === instance) this.records.delete(key)
  }

  /** Every record `instance` holds goes (its process is gone, and its sessions with it). */
  releaseAll(instance: string): void {
    for (const [k, v] of this.records) if (v.owner.instance === instance) this.records.delete(k)
  }

  private sweep(nowMs: number): void {
    for (const [k, v] of this.records) if (v.until <= nowMs) this.records.delete(k)
    for (const k of this.records.keys()) {
      if (this.records.size < MAX_ENTRIES) break
      this.records.delete(k)
    }
  }
}
