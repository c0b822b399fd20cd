import type { Admission, PlaceTaken } from '../auth/admission'
import type { AdmissionMessage } from './protocol'

/**
 * A worker's admission (auth/admission.ts): the main process counts the failure budget and the leg limits
 * for every worker of the gateway, so `limits.legsPerClient: 4` admits 4 legs whatever the worker count.
 * Each ask is one IPC round trip; settling and releasing are sent without an answer. The main process
 * gives back a worker's attempts and places when that worker exits.
 */
export class AdmissionClient implements Admission {
  /** Asks waiting for the main process, with what each becomes if it never answers. */
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; gone: unknown }>()
  private nextId = 1

  constructor(private readonly send: (m: AdmissionMessage) => void) {}

  begin(address: string): Promise<true | number> {
    const id = this.nextId++
    this.send({ t: 'admit-begin', id, address })
    return new Promise(resolve => this.waiting.set(id, { resolve: resolve as (v: unknown) => void, gone: 1 }))
  }

  settle(address: string, failed: boolean): void {
    this.send({ t: 'admit-settle', address, failed })
  }

  takePlace(route: string, caller: string, force: boolean): Promise<PlaceTaken> {
    const id = this.nextId++
    this.send({ t: 'place-take', id, route, caller, force })
    return new Promise(resolve =>
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, gone: 'legs_per_route' })
    )
  }

  /** The main process answered `begin`. */
  begun(id: number, result: true | number): void {
    this.answer(id, result)
  }

  /** The main process answered `takePlace`: a place number (released through it), or the limit. */
  taken(id: number, place: number | null, limit?: 'legs_per_route' | 'legs_per_client'): void {
    const taken: PlaceTaken =
      place === null ? (limit ?? 'legs_per_route') : onceOnly(() => this.send({ t: 'place-release', place }))
    this.answer(id, taken)
  }

  /** The main process is gone: every ask still waiting is refused (the worker stops at once anyway). */
  close(): void {
    for (const w of this.waiting.values()) w.resolve(w.gone)
    this.waiting.clear()
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
