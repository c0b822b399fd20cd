import { LocalAdmission, thenOrNow } from '../auth/admission'
import { FailureBudget } from '../auth/failure-budget'
import { LegLimits } from '../auth/leg-limits'
import { Quotas } from '../auth/quotas'
import { systemClock } from '../clock'
import type { Config } from '../config/types'
import type { MemoryStore } from '../store/memory'
import { isQuotaStore, type Store } from '../store/port'
import type { AdmissionMessage, StoreAsk, StoreCall, StoreWrite, StoreWriteCall, ToWorker } from './protocol'

/** What one worker holds of the main process's services: to give back when it exits. */
interface WorkerAccount {
  /** Leg slots taken and not released, by number. */
  slots: Map<number, () => void>
  /** Its live streams per `route/replica` (the others' sum is each worker's `otherStreams`). */
  streams: Map<string, number>
  /** Its id as a owner of sessions (from its owner claims and call records): its records go when it exits. */
  instance: string | null
}

/**
 * What the main process of `serve --workers N` serves its workers: the in-memory store they share
 * (health, stream counts, affinity, revocations, failure counts, session owner records), and the
 * gateway's admission (auth/admission.ts): the failure budget and the leg limits, counted here once for
 * every worker. A worker that exits gives back what it had.
 */
export class MainServices {
  readonly admission: LocalAdmission
  private readonly accounts = new Map<number, WorkerAccount>()
  private nextSlot = 1

  constructor(
    readonly store: MemoryStore,
    config: () => Config,
    /** The fleet's store (Redis), when the config has one: the failure budget's fleet-wide count. */
    fleet: Store | null,
    private readonly post: (worker: number, m: ToWorker) => void,
    /** A health verdict changed: every worker's cache is refreshed. */
    private readonly healthChanged: () => void
  ) {
    const fleetCount = fleet === null ? undefined : fleet.countFailure.bind(fleet)
    this.admission = new LocalAdmission(
      new FailureBudget(() => config().auth, systemClock, fleetCount),
      new LegLimits(() => config().limits),
      new Quotas(config, systemClock, fleet !== null && isQuotaStore(fleet) ? fleet : undefined)
    )
  }

  /** Every worker's streams but `worker`'s, summed per `route/replica`. */
  othersOf(worker: number): [string, number][] {
    const others = new Map<string, number>()
    for (const [w, h] of this.accounts)
      if (w !== worker) for (const [k, n] of h.streams) others.set(k, (others.get(k) ?? 0) + n)
    return [...others]
  }

  storeWrite(worker: number, m: StoreWrite): void {
    switch (m.t) {
      case 'streams':
        this.of(worker).streams = new Map(m.counts)
        return
      case 'health':
        this.store.writeHealth(m.key, m.record)
        return this.healthChanged()
      // Its call records (publishCalls(records, ttlMs)) and owner claims (claimOwner(key, owner, …)) say its id.
      case 'store-write':
        if (m.call.op === 'publishCalls') this.of(worker).instance = m.call.args[0][0].process
        this.call(m.call)
        return
      case 'store-ask':
        if (m.ask.op === 'claimOwner') this.of(worker).instance = m.ask.args[1].instance
        this.call(m.ask).then(
          value => this.post(worker, { t: 'store-answer', id: m.id, value }),
          (err: unknown) => this.post(worker, { t: 'store-answer', id: m.id, value: null, error: String(err) })
        )
        return
    }
  }

  admissionAsk(worker: number, m: AdmissionMessage): void {
    const h = this.of(worker)
    switch (m.t) {
      case 'admit': {
        const answer = (verdict: true | number): void =>
          this.post(worker, { t: 'admitted', id: m.id, address: m.address, verdict })
        return void thenOrNow(this.admission.admit(m.address, m.failed), answer)
      }
      case 'slot-take': {
        return void thenOrNow(this.admission.takeSlot(m.route, m.caller, m.force, m.tenant), taken => {
          if (typeof taken !== 'function')
            return this.post(worker, { t: 'slot-taken', id: m.id, slot: null, limit: taken })
          // The worker exited while the fleet's count answered: nobody will release the slot.
          if (this.accounts.get(worker) !== h) return taken()
          const slot = this.nextSlot++
          h.slots.set(slot, taken)
          this.post(worker, { t: 'slot-taken', id: m.id, slot })
        })
      }
      case 'utterance-take':
        return void thenOrNow(this.admission.takeUtterance(m.route, m.tenant), taken =>
          this.post(worker, { t: 'utterance-taken', id: m.id, taken })
        )
      case 'slot-release': {
        const release = h.slots.get(m.slot)
        h.slots.delete(m.slot)
        return release?.()
      }
    }
  }

  /** A worker exited: its legs' slots are free again, and the owner records of its sessions go. */
  workerGone(worker: number): void {
    const h = this.accounts.get(worker)
    if (h === undefined) return
    this.accounts.delete(worker)
    for (const release of h.slots.values()) release()
    // Its sessions died with it: a leg of one of them is served anew at once, not relayed to a dead port.
    if (h.instance !== null) this.store.releaseOwnersOf(h.instance)
  }

  private of(worker: number): WorkerAccount {
    let h = this.accounts.get(worker)
    if (h === undefined) {
      h = { slots: new Map(), streams: new Map(), instance: null }
      this.accounts.set(worker, h)
    }
    return h
  }

  /** A worker's call on the memory store, made as the worker made it on its own (workers/worker-store.ts). */
  private call(c: StoreWriteCall): void
  private call(c: StoreAsk): Promise<unknown>
  private call(c: StoreCall): unknown {
    const method = this.store[c.op] as (...args: unknown[]) => unknown
    return method.apply(this.store, c.args)
  }
}
