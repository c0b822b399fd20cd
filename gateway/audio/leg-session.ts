import type { Clock } from '../clock'
import type { GatewayError } from '../errors'
import type { AudioSettings } from '../config/types'
import type { MappingInput } from '../mapping/run'
import { demandsCredential, type RouteRuntime } from '../route'
import type { Store } from '../store/port'
import type { Logger } from '../telemetry/log'
import type { Metrics } from '../telemetry/metrics'
import type { ConnectionFactory } from './connection-contract'
import type { HandshakeCheck } from './handshake'
import { startOnAffinity } from './affinity'
import { openJoined } from './join'
import type { Placement } from './placement'
import type { SessionRegistry } from './registry'
import { VendorSession } from './session'
import type { Session, SessionOwner } from './session-contract'

type Accepted = Extract<HandshakeCheck, { ok: true }>

/** What opening a leg's session needs of the leg's dependencies (audio/leg-contract.ts LegDeps). */
export interface LegSessionDeps {
  route: RouteRuntime
  settings: AudioSettings
  metrics: Metrics
  store: Store
  registry: SessionRegistry
  /** The sessions this process holds, and their owner records when other processes share the store. */
  placement: Placement
  clock: Clock
  legId: string
  /** W3C `traceparent` the vendor upgrades carry (absent: none). */
  traceparent?: string
  /** How vendor connections are made (default: real ones); unit tests pass fakes. */
  connect?: ConnectionFactory
}

/**
 * A new session for a platform leg, registered for re-attach: its own vendor session (held under
 * `sessionKey`, the leg's own identity), or on a `join` route one channel of its call's stereo session
 * (audio/join.ts; the call is held under `sessionKey`). Not started yet. `refused`: the call is held
 * here by another caller.
 */
export function openLegSession(
  deps: LegSessionDeps,
  owner: SessionOwner,
  log: Logger,
  checked: Accepted,
  legKey: string,
  sessionKey: string
): Session | 'refused' | GatewayError {
  const { route, registry } = deps
  const input: MappingInput = {
    init: checked.init,
    leg: { id: deps.legId, route: route.name, ...checked.identity },
    route: { name: route.name, params: route.config.params, checksToken: demandsCredential(route, 'audio') },
    upstream: { name: '', audio: null, credential: null, hasCredential: false }
  }
  const sessionDeps = {
    route,
    settings: deps.settings,
    metrics: deps.metrics,
    store: deps.store,
    clock: deps.clock,
    host: registry,
    log,
    connect: deps.connect,
    traceparent: deps.traceparent,
    caller: checked.caller,
    placement: deps.placement
  }
  if (route.config.join !== undefined) {
    const channel = openJoined(sessionDeps, owner, input, legKey, sessionKey, deps.legId)
    if (channel instanceof Error || channel === 'refused') return channel
    registry.add(channel, checked.caller)
    return channel
  }
  const session = new VendorSession(sessionDeps, owner, input, legKey, deps.legId)
  registry.add(session, checked.caller)
  deps.placement.hold(sessionKey, checked.caller, session)
  return session
}

/**
 * Start a leg's new session. With a store other processes share, on the replica the leg's affinity
 * names (audio/affinity.ts: a leg that was served elsewhere comes back to the same replica).
 */
export function startLegSession(
  deps: LegSessionDeps,
  session: Session,
  log: Logger,
  checked: Accepted,
  key: string,
  mismatch: () => void
): void {
  if (deps.route.config.join !== undefined) return session.start(null)
  startOnAffinity(deps, session, key, { log, caller: checked.caller, mismatch })
}
