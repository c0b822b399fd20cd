import type { Admission, SlotTaken, UtteranceTaken } from '../auth/admission'
import type { QuotaRefusal } from '../auth/quotas'
import type { BudgetVerdict } from '../auth/failure-budget'
import type { LegLimit } from '../auth/leg-limits'
import type { AdmissionMessage } from './protocol'

/** Most addresses a worker remembers as out of their budget: past it, the ended ones go, then the oldest. */
const MAX_OUT = 10_000

/**
 * A worker's admission (auth/admission.ts): the main process counts the failure budget and the leg limits
 * for every worker of the gateway, so `limits.legsPerClient: 4` admits 4 legs whatever the worker count,
 * and an address hears "wrong credential" at most the budget's times whichever worker its checks reach.
 * Each verdict and each slot is one IPC round trip; releasing is sent without an answer. An address the
 * main process found out of its budget is refused here until its window ends, without asking again (a
 * flood from it costs no IPC). The main process gives back a worker's slots when that worker exits.
 */
export class AdmissionClient implements Admission {
  /** Asks waiting for the main process, with what each becomes if it never answers. */
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; gone: unknown }>()
  /** Addresses out of their budget: until when (`Date.now()` ms). */
  private readonly out = new Map<string, number>()
  private nextId = 1

  constructor(
    private readonly send: (m: AdmissionMessage) => void,
    private readonly nowMs: () => number = Date.now
  ) {}

  admit(address: string, failed: boolean): BudgetVerdict | Promise<BudgetVerdict> {
    const until = this.out.get(address)
    if (until !== undefined) {
      const left = until - this.nowMs()
      if (left > 0) return Math.max(1, Math.ceil(left / 1000))
      this.out.delete(address)
    }
    const id = this.nextId++
    this.send({ t: 'admit', id, address, failed })
    // Gone without an answer (the main process died): refused for a second; the worker stops anyway.
    return new Promise(resolve => this.waiting.set(id, { resolve: resolve as (v: unknown) => void, gone: 1 }))
  }

  takeSlot(route: string, caller: string, force: boolean, tenant: string): Promise<SlotTaken> {
    const id = this.nextId++
    this.send({ t: 'slot-take', id, route, caller, force, tenant })
    return new Promise(resolve =>
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, gone: 'legs_per_route' })
    )
  }

  takeUtterance(route: string, tenant: string): Promise<UtteranceTaken> {
    const id = this.nextId++
    this.send({ t: 'utterance-take', id, route, tenant })
    // Gone without an answer (the main process died): refused for a second; the worker stops anyway.
    const gone: QuotaRefusal = { limit: 'route_utterances_per_second', retryAfterSeconds: 1 }
    return new Promise(resolve => this.waiting.set(id, { resolve: resolve as (v: unknown) => void, gone }))
  }

  /** The main process answered `takeUtterance`. */
  utteranceTaken(id: number, taken: UtteranceTaken): void {
    this.answer(id, taken)
  }

  /** The main process judged a check of `address`. */
  admitted(id: number, address: string, verdict: BudgetVerdict): void {
    if (verdict !== true) this.remember(address, verdict)
    this.answer(id, verdict)
  }

  /** The main process answered `takeSlot`: a slot number (released through it), or the limit. */
  taken(id: number, slot: number | null, limit?: LegLimit | QuotaRefusal): void {
    const taken: SlotTaken =
      slot === null ? (limit ?? 'legs_per_route') : onceOnly(() => this.send({ t: 'slot-release', slot }))
    this.answer(id, taken)
  }

  /** The main process is gone: every ask still waiting is refused (the worker stops at once anyway). */
  close(): void {
    for (const w of this.waiting.values()) w.resolve(w.gone)
    this.waiting.clear()
  }

  private remember(address: string, seconds: number): void {
    const now = this.nowMs()
    if (this.out.size >= MAX_OUT) {
      for (const [a, until] of this.out) if (until <= now) this.out.delete(a)
      for (const a of this.out.keys()) {
        if (this.out.size < MAX_OUT) break
        this.out.delete(a)
      }
    }
    this.out.set(address, now + seconds * 1000)
  }

  private answer(id: number, v: unknown): void {
    const w = this.waiting.get(id)
    this.waiting.delete(id)
    w?.resolve(v)
  }
}

function onceOnly(fn: () => void): () => void {
  let done = false
  return () => {
    if (done) return
    done = true
    fn()
  }
}
