import type { Clock } from '../../clock'
import type { GatewayError } from '../../errors'
import type { Result } from '../../result'
import type { AudioSettings } from '../../config/types'
import type { MappingInput } from '../../mapping/run'
import { demandsCredential, namespaceOf, type RouteRuntime } from '../../route'
import type { Store } from '../../store/port'
import type { Logger } from '../../telemetry/log'
import type { Metrics } from '../../telemetry/metrics'
import type { ConnectionFactory } from '../connection/connection-contract'
import type { HandshakeCheck } from './handshake'
import { startOnAffinity } from '../session/affinity'
import { openJoined } from '../session/join'
import { legKeyOf, type Placement } from '../placement/placement'
import type { SessionRegistry } from '../session/registry'
import { VendorSession } from '../session/session'
import type { Session, SessionEvents } from '../session/session-contract'

type Accepted = Extract<HandshakeCheck, { ok: true }>

/** What opening a leg's session needs of the leg's dependencies (audio/leg/leg-contract.ts LegDeps). */
export interface LegSessionDeps {
  route: RouteRuntime
  settings: AudioSettings
  metrics: Metrics
  store: Store
  registry: SessionRegistry
  /** The sessions this process owns, and their owner records when other processes share the store. */
  placement: Placement
  clock: Clock
  legId: string
  /** W3C `traceparent` the vendor upgrades carry (absent: none). */
  traceparent?: string
  /** How vendor connections are made (default: real ones); unit tests pass fakes. */
  connect?: ConnectionFactory
}

/**
 * A leg's session here: the one kept for its identity (a re-attach: the leg takes it over with
 * `reattach`), or a new one (`openLegSession`). CALLER_MISMATCH: kept for, or joined by, another caller.
 */
export function sessionOf(
  deps: LegSessionDeps,
  leg: SessionEvents,
  log: Logger,
  checked: Accepted,
  sessionKey: string
): Result<{ session: Session; reattached: boolean }, GatewayError> {
  const legKey = legKeyOf(deps.route.name, checked.identity, checked.tenant)
  const existing = deps.registry.find(legKey, checked.caller)
  if (!existing.ok) return existing
  if (existing.value !== null) return { ok: true, value: { session: existing.value, reattached: true } }
  const opened = openLegSession(deps, leg, log, checked, legKey, sessionKey)
  return opened.ok ? { ok: true, value: { session: opened.value, reattached: false } } : opened
}

/** The leg takes over the session kept for its identity (found by `sessionOf`), counted `same_session`. */
export function reattach(
  deps: LegSessionDeps & { relayed?: { hop: string; from: string } },
  session: Session,
  leg: SessionEvents,
  log: Logger,
  checked: Accepted
): void {
  session.attach(leg, checked.init, log)
  deps.metrics.reattach.inc({ route: deps.route.name, result: 'same_session' })
  log.info({ event: 'reattached', session: session.id }, 'leg re-attached to its vendor session')
  if (deps.relayed?.hop === 'worker')
    log.info({ event: 'reattached_across_workers', from: deps.relayed.from }, 'leg re-attached across workers')
}

/**
 * A new session for a platform leg, registered for re-attach: its own vendor session (held under
 * `sessionKey`, the leg's own identity), or on a `join` route one channel of its call's stereo session
 * (audio/session/join.ts; the call is held under `sessionKey`). Not started yet. CALLER_MISMATCH: the call is
 * held here by another caller.
 */
export function openLegSession(
  deps: LegSessionDeps,
  leg: SessionEvents,
  log: Logger,
  checked: Accepted,
  legKey: string,
  sessionKey: string
): Result<Session, GatewayError> {
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
    namespace: namespaceOf(route.name, checked.tenant),
    placement: deps.placement
  }
  if (route.config.join !== undefined) {
    const channel = openJoined(sessionDeps, route.config.join, leg, input, legKey, sessionKey, deps.legId)
    if (channel.ok) registry.add(channel.value, checked.caller)
    return channel
  }
  const session = new VendorSession(sessionDeps, leg, input, legKey, deps.legId)
  registry.add(session, checked.caller)
  deps.placement.own(sessionKey, checked.caller, session)
  return { ok: true, value: session }
}

/**
 * Start a leg's new session. With a store other processes share, on the replica the leg's affinity
 * names (audio/session/affinity.ts: a leg that was served elsewhere comes back to the same replica).
 */
export function startLegSession(
  deps: LegSessionDeps,
  session: Session,
  log: Logger,
  checked: Accepted,
  mismatch: () => void
): void {
  if (deps.route.config.join !== undefined) return session.start(null)
  startOnAffinity(deps, session, legKeyOf(deps.route.name, checked.identity, checked.tenant), {
    log,
    caller: checked.caller,
    mismatch
  })
}
