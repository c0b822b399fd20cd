import type { RouteRuntime } from '../../route'
import type { ContinuedSession, Store } from '../../store/port'
import type { Logger } from '../../telemetry/log'
import type { Metrics } from '../../telemetry/metrics'
import type { Replica } from '../../upstream/pool'
import type { Session, SessionDeps } from './session-contract'

/**
 * Where session `legId` (key `key`) streams: its route, replica, this instance and the caller that may
 * continue it, kept `ttlSeconds` (a day while it streams, the re-attach grace while parked, past the
 * drain deadline when handed off, with the mapping's continuation for the next instance).
 */
export function writeAffinity(
  deps: Pick<SessionDeps, 'store' | 'route' | 'caller'>,
  key: string,
  legId: string,
  replica: Replica,
  ttlSeconds: number,
  continued?: ContinuedSession
): void {
  const { store, route, caller } = deps
  store.setAffinity(
    key,
    {
      route: route.name,
      replica: replica.name,
      instance: store.instanceId,
      legId,
      ...(continued !== undefined ? { continued } : {}),
      ...(caller !== undefined ? { caller } : {})
    },
    ttlSeconds
  )
}

/**
 * Start `session` on the replica the affinity record `key` names, when that replica is healthy: a leg
 * back from another instance, or a session continued after a drain there (with the mapping's
 * continuation: AudioHook `continuedSessions`). Else on `fallback` (or by balancing). `check`: the
 * caller that may continue it; another caller's record closes the session and calls `mismatch`.
 */
export function startOnAffinity(
  deps: { readonly store: Store; readonly route: RouteRuntime; readonly metrics: Metrics },
  session: Session,
  key: string,
  check: { log: Logger; caller: string; mismatch: () => void } | null,
  fallback: { preferred: Replica | null; continued?: ContinuedSession } = { preferred: null }
): void {
  const { store, route, metrics } = deps
  if (!store.shared) return session.start(fallback.preferred, fallback.continued)
  store.getAffinity(key).then(
    affinity => {
      if (session.state === 'CLOSED') return
      if (check !== null && affinity?.caller !== undefined && affinity.caller !== check.caller) {
        session.close(false)
        return check.mismatch()
      }
      const same =
        affinity !== null && affinity.route === route.name ? (route.pool.byName(affinity.replica) ?? null) : null
      if (same?.healthy) {
        metrics.reattach.inc({ route: route.name, result: 'same_replica' })
        check?.log.info(
          { event: 'reattached_replica', upstream: same.name, from: affinity!.instance },
          'leg came back from another instance: new vendor session on the same replica'
        )
        return session.start(same, affinity!.continued)
      }
      session.start(fallback.preferred, fallback.continued)
    },
    () => session.start(fallback.preferred, fallback.continued)
  )
}
