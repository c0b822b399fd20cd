import type { CallRecord } from './port'

/** Most records one process keeps (a bound against a runaway publisher): past it, expired ones go, then the oldest. */
const MAX_ENTRIES = 200_000

/** A record as answered at `nowMs`: its last-frame age grown by the record's own age. */
export function aged(r: CallRecord, nowMs: number): CallRecord {
  return { ...r, lastFrameAgeMs: r.lastFrameAgeMs === null ? null : r.lastFrameAgeMs + Math.max(0, nowMs - r.at) }
}

/**
 * The call records of one memory store (audio/leg/call-book.ts publishes them): a lone process's own, or
 * every worker's in the main process of `serve --workers N`. By contact, then by leg; each with its
 * expiry. Times are the caller's (`nowMs`).
 */
export class LocalCalls {
  private readonly byContact = new Map<string, Map<string, { record: CallRecord; until: number }>>()
  private size = 0

  publish(records: readonly CallRecord[], ttlMs: number, nowMs: number): void {
    for (const r of records) {
      let legs = this.byContact.get(r.contactId)
      if (legs === undefined) {
        legs = new Map()
        this.byContact.set(r.contactId, legs)
      }
      if (!legs.has(r.legId)) {
        if (this.size >= MAX_ENTRIES) this.sweep(nowMs)
        this.size++
      }
      legs.set(r.legId, { record: { ...r, at: nowMs }, until: nowMs + ttlMs })
    }
  }

  remove(contactId: string, legId: string): void {
    const legs = this.byContact.get(contactId)
    if (legs?.delete(legId) === true) this.size--
    if (legs?.size === 0) this.byContact.delete(contactId)
  }

  /** Every record of `process` goes (a worker that exited: its legs died with it). */
  removeAllOf(process: string): void {
    for (const [contact, legs] of this.byContact)
      for (const [leg, e] of legs) if (e.record.process === process) this.remove(contact, leg)
  }

  find(contactId: string, nowMs: number): CallRecord[] {
    const legs = this.byContact.get(contactId)
    if (legs === undefined) return []
    const out: CallRecord[] = []
    for (const [leg, e] of legs) {
      if (e.until <= nowMs) this.remove(contactId, leg)
      else out.push(aged(e.record, nowMs))
    }
    return out
  }

  /** The records of the first `contacts` contacts that have any (in the order they were first published). */
  list(contacts: number, nowMs: number): { calls: CallRecord[]; more: boolean } {
    const calls: CallRecord[] = []
    let seen = 0
    for (const contact of [...this.byContact.keys()]) {
      const found = this.find(contact, nowMs)
      if (found.length === 0) continue
      if (seen++ === contacts) return { calls, more: true }
      calls.push(...found)
    }
    return { calls, more: false }
  }

  private sweep(nowMs: number): void {
    for (const [contact, legs] of this.byContact)
      for (const [leg, e] of legs) if (e.until <= nowMs || this.size >= MAX_ENTRIES) this.remove(contact, leg)
  }
}
