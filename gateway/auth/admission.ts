import type { FailureBudget } from './failure-budget'
import type { LegLimit, LegLimits } from './leg-limits'

/** A leg's place under the leg limits: its release (call it once, when the leg ends), or the limit that refuses it. */
export type PlaceTaken = (() => void) | LegLimit

/**
 * What the hooks ask of one gateway before they check a credential and before a leg takes its place:
 * the failure budget (auth/failure-budget.ts) and the leg limits (auth/leg-limits.ts), counted once per
 * gateway. In one process the answers are synchronous; a worker of `serve --workers N` asks its main
 * process (workers/admission-client.ts) and gets Promises. Callers decide "is this a promise" at one site.
 */
export interface Admission {
  /** Before a credential check from `address`: true (then `settle` it once it ran), or seconds until it may. */
  begin: (address: string) => true | number | Promise<true | number>
  /** The check begun for `address` ran; `failed`: a refused credential (counted against the budget). */
  settle: (address: string, failed: boolean) => void
  /** A live leg's place. `force`: a leg taking over its own session is never refused. */
  takePlace: (route: string, caller: string, force: boolean) => PlaceTaken | Promise<PlaceTaken>
}

/** The admission of one process, or the main process's for its workers. */
export class LocalAdmission implements Admission {
  constructor(
    readonly budget: FailureBudget,
    readonly limits: LegLimits
  ) {}

  begin(address: string): true | number {
    return this.budget.begin(address)
  }

  settle(address: string, failed: boolean): void {
    this.budget.settle(address, failed)
  }

  takePlace(route: string, caller: string, force: boolean): PlaceTaken {
    return this.limits.acquire(route, caller, force)
  }
}

/**
 * A credential check of `address` under the failure budget: `{ retryAfterSeconds }` when the address has
 * spent it (the check does not run), else the check's result, settled as failed when `failed(result)`.
 * For the hooks whose whole answer waits anyway (the token endpoint, the handshake dry-run, a text
 * request's credential step); an audio leg settles from its states (audio/leg.ts).
 */
export async function checkUnderBudget<T>(
  admission: Admission,
  address: string,
  check: () => T | Promise<T>,
  failed: (result: T) => boolean
): Promise<{ ok: true; result: T } | { ok: false; retryAfterSeconds: number }> {
  const begun = await admission.begin(address)
  if (begun !== true) return { ok: false, retryAfterSeconds: begun }
  let result: T
  try {
    result = await check()
  } catch (err) {
    admission.settle(address, false)
    throw err
  }
  admission.settle(address, failed(result))
  return { ok: true, result }
}
