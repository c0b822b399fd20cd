import { Placement } from '../../gateway/audio/placement/placement'
import { SessionRegistry } from '../../gateway/audio/session/registry'
import { LocalAdmission } from '../../gateway/auth/admission'
import { FailureBudget } from '../../gateway/auth/failure-budget'
import { FleetKey } from '../../gateway/auth/fleet-key'
import { Quotas } from '../../gateway/auth/quotas'
import { LegLimits } from '../../gateway/auth/leg-limits'
import { RelayTokens } from '../../gateway/auth/relay-token'
import type { Clock } from '../../gateway/clock'
import type { AuthSettings, LimitSettings } from '../../gateway/config/types'
import { MemoryStore } from '../../gateway/store/memory'

const NO_BUDGET: AuthSettings = { failureDelayMs: 0, failureBudget: { failures: 0, windowSeconds: 60 } }
const NO_LIMITS: LimitSettings = { headerBytes: 16384, initMessageBytes: 65536, legsPerRoute: 0, legsPerClient: 0 }

/**
 * What a platform leg (audio/leg/leg.ts LegDeps) needs of its gateway, for one lone process on the memory
 * store and the given clock: its registry and placement, the admission (failure budget and leg limits),
 * the fleet key's relay tokens and caller key. Spread into a leg's deps.
 */
export function loneGateway(
  clock: Clock,
  opts: { auth?: AuthSettings; limits?: LimitSettings; address?: string; store?: MemoryStore } = {}
) {
  const auth = opts.auth ?? NO_BUDGET
  const limits = opts.limits ?? NO_LIMITS
  const store = opts.store ?? new MemoryStore('i1')
  const placement = new Placement(store, null, clock)
  const key = FleetKey.random()
  return {
    store,
    placement,
    registry: new SessionRegistry(placement),
    admission: new LocalAdmission(
      new FailureBudget(() => auth, clock),
      new LegLimits(() => limits),
      new Quotas(() => ({ routes: {} }), clock)
    ),
    auth: () => auth,
    clientAddress: opts.address ?? '10.0.0.1',
    relayTokens: new RelayTokens(key),
    callerKey: key.callerKey
  }
}
