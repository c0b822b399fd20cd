import type { BudgetVerdict, FailureBudget } from './failure-budget'
import type { LegLimit, LegLimits } from './leg-limits'
import type { QuotaLimit, QuotaRefusal, Quotas } from './quotas'

/**
 * Every limit the admission can refuse a leg or an utterance with (the `limit` label of
 * `limit_refusals_total`): the failure budget, the leg limits of one instance, and the quotas of tenants and
 * routes. A new limit is one name here (or in config/types.ts `QUOTA_NAMES` for a quota), its counting, its
 * schema and its docs.
 */
export type AdmissionLimit = 'failure_budget' | LegLimit | QuotaLimit

/**
 * A leg's slot under the leg limits and quotas: its release (call it once, when the leg ends), or the limit
 * that refuses it (a leg limit, or a quota with its Retry-After).
 */
export type SlotTaken = (() => void) | LegLimit | QuotaRefusal

/** An utterance under its quotas: true, or the quota that refuses it (429 with Retry-After). */
export type UtteranceTaken = true | QuotaRefusal

/**
 * What the hooks ask of one gateway about a caller: the failure budget's verdict on a credential check
 * that ran (auth/failure-budget.ts) and a leg's slot under the leg limits (auth/leg-limits.ts), counted
 * once per gateway. In one process the answers are synchronous (but for a failure counted in the fleet's
 * store); a worker of `serve --workers N` asks its main process (workers/admission-client.ts) and gets
 * Promises. Callers decide "is this a promise" at one site (`thenOrNow`).
 */
export interface Admission {
  /**
   * A credential check from `address` ran (`failed`: the credential was refused): true, answer as checked;
   * a number, the address has spent its failure budget (TOO_MANY_FAILURES, retry after that many seconds).
   */
  admit: (address: string, failed: boolean) => BudgetVerdict | Promise<BudgetVerdict>
  /**
   * A live leg's slot: credentials → tenant (`tenant`) → quotas → placement, the one seam for every leg.
   * `force`: a leg taking over its own session is never refused.
   */
  takeSlot: (route: string, caller: string, force: boolean, tenant: string) => SlotTaken | Promise<SlotTaken>
  /** An utterance's room under its tenant's and route's quotas: the text hook's side of the same seam. */
  takeUtterance: (route: string, tenant: string) => UtteranceTaken | Promise<UtteranceTaken>
}

/** The admission of one process, or the main process's for its workers. */
export class LocalAdmission implements Admission {
  constructor(
    readonly budget: FailureBudget,
    readonly limits: LegLimits,
    readonly quotas: Quotas
  ) {}

  admit(address: string, failed: boolean): BudgetVerdict | Promise<BudgetVerdict> {
    return this.budget.admit(address, failed)
  }

  takeSlot(route: string, caller: string, force: boolean, tenant: string): SlotTaken | Promise<SlotTaken> {
    const slot = this.limits.acquire(route, caller, force)
    if (typeof slot !== 'function') return slot
    return thenOrNow(this.quotas.takeLeg(route, tenant, force), (quota): SlotTaken => {
      if (typeof quota !== 'function') {
        slot()
        return quota
      }
      return () => {
        slot()
        quota()
      }
    })
  }

  takeUtterance(route: string, tenant: string): UtteranceTaken | Promise<UtteranceTaken> {
    return this.quotas.takeUtterance(route, tenant)
  }
}

/** `then(v)` now when `v` is here, else once the Promise settles: sync and async answers at one site. */
export function thenOrNow<T, U>(v: T | Promise<T>, then: (v: T) => U | Promise<U>): U | Promise<U> {
  return v instanceof Promise ? v.then(then) : then(v)
}

/**
 * A credential check of `address` judged by the failure budget: `{ retryAfterSeconds }` when the address
 * has spent it, else the check's result (a refused credential, `failed(result)`, is counted). For the
 * hooks whose whole answer waits anyway (the token endpoint, the handshake dry-run); the audio leg and the
 * text hook judge their checks themselves, synchronously when they can.
 */
export async function checkUnderBudget<T>(
  admission: Admission,
  address: string,
  check: () => T | Promise<T>,
  failed: (result: T) => boolean
): Promise<{ ok: true; result: T } | { ok: false; retryAfterSeconds: number }> {
  const result = await check()
  const verdict = await admission.admit(address, failed(result))
  return verdict === true ? { ok: true, result } : { ok: false, retryAfterSeconds: verdict }
}
