/** Most contacts one process keeps values or groups of: past it, expired ones are swept, then the oldest go. */
const MAX_ENTRIES = 100_000

/**
 * A contact's shared values and member groups (store/port.ts `swapShared`, `dropShared`, `countMembers`) in
 * one process: the memory store's whole answer, and the Redis store's values while Redis is away (not its
 * groups: a count made here would miss the other instances' legs). Times are the caller's (`nowMs`).
 */
export class LocalShared {
  private readonly values = new Map<string, { fields: Map<string, string>; until: number }>()
  private readonly groups = new Map<string, { members: Set<string>; until: number }>()

  swap(
    key: string,
    field: string,
    expect: string | null,
    value: string | null,
    ttlMs: number,
    nowMs: number
  ): string | null {
    let held = this.values.get(key)
    if (held !== undefined && held.until <= nowMs) held = undefined
    const current = held?.fields.get(field) ?? null
    if (current !== expect) return current
    if (held === undefined) {
      if (value === null) return null
      sweep(this.values, nowMs)
      held = { fields: new Map(), until: 0 }
      this.values.set(key, held)
    }
    if (value === null) held.fields.delete(field)
    else held.fields.set(field, value)
    held.until = nowMs + ttlMs
    return value
  }

  drop(key: string): void {
    this.values.delete(key)
  }

  count(key: string, member: string, present: boolean, ttlMs: number, nowMs: number): number {
    let g = this.groups.get(key)
    if (g !== undefined && g.until <= nowMs) g = undefined
    if (g === undefined) {
      if (!present) return 0
      sweep(this.groups, nowMs)
      g = { members: new Set(), until: 0 }
      this.groups.set(key, g)
    }
    if (present) g.members.add(member)
    else g.members.delete(member)
    g.until = nowMs + ttlMs
    if (g.members.size === 0) this.groups.delete(key)
    return g.members.size
  }
}

function sweep(map: Map<string, { until: number }>, nowMs: number): void {
  if (map.size < MAX_ENTRIES) return
  for (const [k, v] of map) if (v.until <= nowMs) map.delete(k)
  for (const k of map.keys()) {
    if (map.size < MAX_ENTRIES) break
    map.delete(k)
  }
}
