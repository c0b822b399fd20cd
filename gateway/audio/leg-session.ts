import type { GatewayError } from '../errors'
import type { MappingInput } from '../mapping/run'
import { demandsCredential, type RouteRuntime } from '../route'
import type { Clock } from '../clock'
import type { AudioSettings } from '../config/types'
import type { Store } from '../store/port'
import type { Metrics } from '../telemetry/metrics'
import type { ConnectionFactory } from './connection-contract'
import type { JoinDirectory } from './join-relay'
import type { SessionRegistry } from './registry'
import type { Logger } from '../telemetry/log'
import type { HandshakeCheck } from './handshake'
import { openJoined } from './join'
import { VendorSession } from './session'
import type { Session, SessionOwner } from './session-contract'

type Accepted = Extract<HandshakeCheck, { ok: true }>

/** What opening a leg's session needs of the leg's dependencies (audio/leg.ts LegDeps). */
export interface LegSessionDeps {
  route: RouteRuntime
  settings: AudioSettings
  metrics: Metrics
  store: Store
  registry: SessionRegistry
  clock: Clock
  legId: string
  /** W3C `traceparent` the vendor upgrades carry (absent: none). */
  traceparent?: string
  /** How vendor connections are made (default: real ones); unit tests pass fakes. */
  connect?: ConnectionFactory
  /** Joined calls' owners across processes (audio/join-relay.ts; absent: every join is local). */
  joins?: JoinDirectory
}

/**
 * A new vendor session for a platform leg (audio/leg.ts), registered for re-attach: its own, or on a
 * `join` route one channel of its call's stereo session (audio/join.ts). Not started yet.
 */
export function openLegSession(
  deps: LegSessionDeps,
  owner: SessionOwner,
  log: Logger,
  checked: Accepted,
  key: string
): Session | GatewayError {
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
    joins: deps.joins
  }
  const session =
    route.config.join === undefined
      ? new VendorSession(sessionDeps, owner, input, key, deps.legId)
      : openJoined(sessionDeps, owner, input, key, deps.legId)
  if (!(session instanceof Error)) registry.add(session, checked.caller)
  return session
}

/**
 * Start a leg's new session. With a fleet store, on the replica the leg's affinity names: a leg that was
 * on another instance comes back to the same replica (a new vendor session there; the old instance's
 * parked session closes when its grace ends), audio held meanwhile. A live session of another caller
 * there: `mismatch` (no takeover), and this session closes.
 */
export function startLegSession(
  deps: LegSessionDeps,
  session: Session,
  log: Logger,
  checked: Accepted,
  key: string,
  mismatch: () => void
): void {
  const { route, metrics } = deps
  if (deps.store.kind === 'memory') return session.start(null)
  deps.store.getAffinity(key).then(
    affinity => {
      if (session.state === 'CLOSED') return
      if (affinity !== null && affinity.caller !== undefined && affinity.caller !== checked.caller) {
        session.close(false)
        return mismatch()
      }
      const preferred =
        affinity !== null && affinity.route === route.name ? (route.pool.byName(affinity.replica) ?? null) : null
      if (preferred?.healthy) {
        metrics.reattach.inc({ route: route.name, result: 'same_replica' })
        log.info(
          { event: 'reattached_replica', upstream: preferred.name, from: affinity!.instance },
          'leg came back from another instance: new vendor session on the same replica'
        )
      }
      // After a drain elsewhere: the mapping may continue that vendor session (AudioHook continuedSessions).
      session.start(preferred, preferred !== null ? affinity?.continued : undefined)
    },
    () => session.start(null)
  )
}
