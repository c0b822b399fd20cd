import { GatewayError } from '../../errors'
import type { Problem } from '../../validate/compile'
import { checkHandshake, type HandshakeCheck } from './handshake'
import type { AcceptedLeg, LegDeps, LegLink } from './leg-contract'
import type { SlotTaken } from '../../auth/admission'
import type { Logger } from '../../telemetry/log'
import type { LegCounters } from '../../telemetry/metrics'
import { legKeyOf, type Place, sessionKeyOf } from '../placement/placement'
import type { OwnerRecord } from '../../store/port'
import { countRelay, RelayLink, relayEvent, type RelayEvents } from '../placement/relay-link'

export type Accepted = Extract<HandshakeCheck, { ok: true }>

/**
 * What the checks of a leg's init message come to (audio/leg/leg.ts acts on it by its state):
 * - `spent`: the address has spent its failure budget (whatever the check found);
 * - `invalid`: not JSON, not the interface's schema, or a relayed leg naming another session than its
 *   relay token (counted as a validation failure or a relay refusal);
 * - `refused`: a credential refused (counted as an auth failure and against the budget);
 * - `accepted`: checked; `key` is its session. `charge` counts one more failed authentication (a leg of
 *   another caller's session, found when it is placed).
 */
export type InitVerdict =
  | { readonly kind: 'spent'; readonly retryAfterSeconds: number }
  | { readonly kind: 'invalid'; readonly error: GatewayError; readonly problems: readonly Problem[] }
  | { readonly kind: 'refused'; readonly error: GatewayError }
  | { readonly kind: 'accepted'; readonly checked: Accepted; readonly key: string; readonly charge: () => void }

/** Sync or async, decided at one site: `then` now when the value is here, else when the Promise settles. */
export function whenReady<T>(v: T | Promise<T>, then: (v: T) => void, failed: (err: unknown) => void): void {
  if (v instanceof Promise) v.then(then, failed)
  else then(v)
}

/**
 * VERIFYING, as a stage chain: the credential and the schema (audio/leg/handshake.ts), then the failure
 * budget's verdict on that check (a refused credential is counted; an address that has spent its budget
 * is refused whatever the check found), then, for a relayed leg, the session its relay token named.
 */
export function verifyInit(
  deps: LegDeps,
  text: string,
  done: (v: InitVerdict) => void,
  bug: (step: string) => (err: unknown) => void
): void {
  const { admission, clientAddress, metrics } = deps
  whenReady(
    checkHandshake(deps.route, text, deps.callerKey),
    checked =>
      whenReady(
        admission.admit(clientAddress, !checked.ok && checked.stage === 'auth'),
        verdict => {
          if (verdict === true) return done(judged(deps, checked))
          metrics.limitRefusals.inc({ limit: 'failure_budget', hook: 'audio' })
          done({ kind: 'spent', retryAfterSeconds: verdict })
        },
        bug('admission')
      ),
    bug('handshake')
  )
}

function judged(deps: LegDeps, checked: HandshakeCheck): InitVerdict {
  const { metrics, relayed, route } = deps
  if (!checked.ok) {
    if (checked.stage === 'auth') {
      metrics.authFailures.inc({ hook: 'audio', reason: checked.reason ?? 'invalid' })
      return { kind: 'refused', error: checked.error }
    }
    metrics.validationFailures.inc({ hook: 'audio' })
    return { kind: 'invalid', error: checked.error, problems: checked.problems }
  }
  const key = sessionKeyOf(route, checked.identity, checked.tenant)
  // A relayed leg is taken only for the session its relay token named.
  if (relayed !== undefined && relayed.key !== key) {
    metrics.authFailures.inc({ hook: 'relay', reason: 'session_mismatch' })
    const error = new GatewayError('RELAY_INVALID', { detail: 'the init message names another session' })
    return { kind: 'invalid', error, problems: [] }
  }
  const { admission, clientAddress } = deps
  // The leg is refused anyway: the budget's answer on this failure changes nothing.
  const charge = (): void => void admission.admit(clientAddress, true)
  return { kind: 'accepted', checked, key, charge }
}

/**
 * PLACING: where an accepted leg is served (audio/placement/placement.ts). A leg of another caller's session counts
 * as a failed authentication.
 */
export function placeLeg(
  deps: LegDeps,
  accepted: Extract<InitVerdict, { kind: 'accepted' }>,
  done: (place: Place) => void,
  bug: (step: string) => (err: unknown) => void
): void {
  whenReady(
    deps.placement.place(accepted.key, accepted.checked.caller, deps.relayed?.hop ?? null),
    place => {
      if (place.kind === 'refused') accepted.charge()
      done(place)
    },
    bug('placement')
  )
}

/** An init message over `limits.initMessageBytes`: counted as an `init_size` refusal. */
export function initTooLarge(deps: LegDeps, data: ArrayBuffer): boolean {
  if (data.byteLength <= (deps.initMessageBytes ?? Number.POSITIVE_INFINITY)) return false
  deps.metrics.limitRefusals.inc({ limit: 'init_size', hook: 'audio' })
  return true
}

/** RELAYING: a link to the owner of the leg's session (audio/placement/relay-link.ts), with what this process asserts. */
export function openRelay(
  deps: LegDeps,
  place: Extract<Place, { kind: 'relay' }>,
  initText: string,
  counters: LegCounters,
  key: string,
  log: Logger,
  leg: RelayEvents
): LegLink {
  const claims = { key, address: deps.clientAddress, from: deps.placement.me?.instance ?? '' }
  const make = deps.relayLink ?? ((...a) => new RelayLink(...a))
  return make(place, initText, counters, claims, { ...deps, log }, leg)
}

/** The owner of a relayed leg's session never answered: this process takes the session over, then `here`. */
export function takeOverFrom(
  deps: LegDeps,
  owner: OwnerRecord,
  accepted: AcceptedLeg,
  log: Logger,
  why: string,
  here: () => void
): void {
  log.warn(
    { event: relayEvent(deps.route, 'owner_unreachable'), owner: owner.instance, why },
    "the session's owner could not be reached: taking the session over"
  )
  deps.placement.takeOver(accepted.key, accepted.checked.caller, owner, deps.relayed?.hop ?? null).then(here, here)
}

/**
 * A place refused under a leg limit or a tenant quota: the owner record the placement claimed goes, the
 * refusal is counted; the leg fails with the error and the extra fields returned.
 */
export function refusedSlot(
  deps: LegDeps,
  checked: Accepted,
  key: string,
  taken: Exclude<SlotTaken, () => void>
): { error: GatewayError; extra: Record<string, unknown> } {
  deps.placement.abandon(key)
  const limit = typeof taken === 'string' ? taken : taken.limit
  deps.metrics.limitRefusals.inc({ limit, hook: 'audio' })
  deps.metrics.tenantRefusals.inc({ tenant: checked.tenant, limit })
  if (typeof taken === 'string') return { error: new GatewayError('LEG_LIMIT', { detail: taken }), extra: { limit } }
  const { retryAfterSeconds } = taken
  return { error: new GatewayError('QUOTA_EXCEEDED', { detail: limit }), extra: { limit, retryAfterSeconds } }
}

/**
 * PLACING, served here: its slot under the leg limits (a leg taking over its own session is never
 * refused); a leg whose session's owner was out of reach is counted and logged first (a split).
 */
export function takeSlotHere(
  deps: LegDeps,
  checked: Accepted,
  unreachable: string | undefined,
  log: Logger,
  done: (taken: SlotTaken) => void,
  bug: (step: string) => (err: unknown) => void
): void {
  if (unreachable !== undefined) {
    countRelay(deps, 'relay_failed')
    log.warn(
      { event: relayEvent(deps.route, 'split'), why: unreachable },
      "the leg's session is owned by another process this leg cannot reach: served here"
    )
  }
  const force = deps.registry.live(legKeyOf(deps.route.name, checked.identity, checked.tenant))
  whenReady(deps.admission.takeSlot(deps.route.name, checked.caller, force, checked.tenant), done, bug('leg limits'))
}
