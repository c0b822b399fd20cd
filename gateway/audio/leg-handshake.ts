import { GatewayError } from '../errors'
import type { Problem } from '../validate/compile'
import { checkHandshake, type HandshakeCheck } from './handshake'
import type { LegDeps } from './leg-contract'
import type { PlaceTaken } from '../auth/admission'
import type { Logger } from '../telemetry/log'
import { legKeyOf, type Place, sessionKeyOf } from './placement'
import { countRelay, relayEvent } from './relay-link'

export type Accepted = Extract<HandshakeCheck, { ok: true }>

/**
 * What the checks of a leg's init message come to (audio/leg.ts acts on it by its state):
 * - `spent`: the address has spent its failure budget (nothing was checked);
 * - `invalid`: not JSON, not the interface's schema, or a relayed leg naming another session than its
 *   relay token (counted as a validation failure or a relay refusal);
 * - `refused`: a credential refused (counted as an auth failure and against the budget);
 * - `accepted`: checked; `key` is its session. The budget's attempt stays open until `placeLeg` settles it.
 */
export type InitVerdict =
  | { readonly kind: 'spent'; readonly retryAfterSeconds: number }
  | { readonly kind: 'invalid'; readonly error: GatewayError; readonly problems: readonly Problem[] }
  | { readonly kind: 'refused'; readonly error: GatewayError }
  | { readonly kind: 'accepted'; readonly checked: Accepted; readonly key: string; readonly settle: Settle }

/** Settles the leg's budget attempt, once (`failed`: it counts against the address). */
export type Settle = (failed: boolean) => void

/** Sync or async, decided at one site: `then` now when the value is here, else when the Promise settles. */
export function whenReady<T>(v: T | Promise<T>, then: (v: T) => void, failed: (err: unknown) => void): void {
  if (v instanceof Promise) v.then(then, failed)
  else then(v)
}

/**
 * VERIFYING, as a stage chain: the failure budget (a check is begun before it runs), then the credential
 * and the schema (audio/handshake.ts), then, for a relayed leg, the session its relay token named.
 */
export function verifyInit(
  deps: LegDeps,
  text: string,
  done: (v: InitVerdict) => void,
  bug: (step: string) => (err: unknown) => void
): void {
  const { admission, clientAddress, metrics } = deps
  whenReady(
    admission.begin(clientAddress),
    begun => {
      if (begun !== true) {
        metrics.limitRefusals.inc({ limit: 'failure_budget', hook: 'audio' })
        return done({ kind: 'spent', retryAfterSeconds: begun })
      }
      let settled = false
      const settle: Settle = failed => {
        if (settled) return
        settled = true
        admission.settle(clientAddress, failed)
      }
      whenReady(
        checkHandshake(deps.route, text, deps.callerKey),
        checked => done(judged(deps, checked, settle)),
        err => {
          settle(false)
          bug('handshake')(err)
        }
      )
    },
    bug('admission')
  )
}

function judged(deps: LegDeps, checked: HandshakeCheck, settle: Settle): InitVerdict {
  const { metrics, relayed, route } = deps
  if (!checked.ok) {
    settle(checked.stage === 'auth')
    if (checked.stage === 'auth') {
      metrics.authFailures.inc({ hook: 'audio', reason: checked.reason ?? 'invalid' })
      return { kind: 'refused', error: checked.error }
    }
    metrics.validationFailures.inc({ hook: 'audio' })
    return { kind: 'invalid', error: checked.error, problems: checked.problems }
  }
  const key = sessionKeyOf(route, checked.identity)
  // A relayed leg is taken only for the session its relay token named.
  if (relayed !== undefined && relayed.key !== key) {
    settle(false)
    metrics.authFailures.inc({ hook: 'relay', reason: 'session_mismatch' })
    const error = new GatewayError('RELAY_INVALID', { detail: 'the init message names another session' })
    return { kind: 'invalid', error, problems: [] }
  }
  // The credential is good: its budget check is over now, so a burst of valid legs from one address (a
  // balancer, a platform reconnecting after a drain) never waits out its placement inside the budget. A leg
  // of another caller's session, found when placed, is then charged as one more failed authentication.
  settle(false)
  const { admission, clientAddress } = deps
  const charge: Settle = failed => {
    if (failed)
      whenReady(
        admission.begin(clientAddress),
        b => b === true && admission.settle(clientAddress, true),
        () => {}
      )
  }
  return { kind: 'accepted', checked, key, settle: charge }
}

/**
 * PLACING: where an accepted leg is served (audio/placement.ts). Settles its budget attempt: a leg of
 * another caller's session counts as a failed authentication.
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
      accepted.settle(place.kind === 'refused')
      done(place)
    },
    err => {
      accepted.settle(false)
      bug('placement')(err)
    }
  )
}

/**
 * PLACING, served here: its place under the leg limits (a leg taking over its own session is never
 * refused); a leg whose session's holder was out of reach is counted and logged first (a split).
 */
export function takePlaceHere(
  deps: LegDeps,
  checked: Accepted,
  unreachable: string | undefined,
  log: Logger,
  done: (taken: PlaceTaken) => void,
  bug: (step: string) => (err: unknown) => void
): void {
  if (unreachable !== undefined) {
    countRelay(deps, 'relay_failed')
    log.warn(
      { event: relayEvent(deps.route, 'split'), why: unreachable },
      "the leg's session is held by another process this leg cannot reach: served here"
    )
  }
  const force = deps.registry.live(legKeyOf(deps.route.name, checked.identity))
  whenReady(deps.admission.takePlace(deps.route.name, checked.caller, force), done, bug('leg limits'))
}
