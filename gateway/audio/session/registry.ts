import { GatewayError } from '../../errors'
import type { Result } from '../../result'
import type { Logger } from '../../telemetry/log'
import type { Placement } from '../placement/placement'
import type { Session, SessionHost, SessionEvents } from './session-contract'

/**
 * The vendor sessions of this instance by leg identity (`route:busNo:contactId:perspective`): who owns
 * each, which are parked waiting for their leg, and the claims of legs that come back.
 */
export class SessionRegistry implements SessionHost {
  private readonly byKey = new Map<string, Session>()
  private readonly parkedSessions = new Set<Session>()
  /** Who opened each session (auth/hook-auth.ts `callerTag`): only the same caller may claim it. */
  private readonly callers = new WeakMap<Session, string>()

  /** `placement`: where a plain session's ownership ends when it closes (absent in unit tests of one session). */
  constructor(private readonly placement?: Placement) {}

  /** Told when a session stops being parked (re-attached) or closes (audio/leg/call-book.ts drops its PARKED record). */
  onGone: (s: Session) => void = () => {}

  /** A new session for a leg identity; it replaces a closed one of the same identity. */
  add(s: Session, caller = ''): void {
    this.byKey.set(s.key, s)
    this.callers.set(s, caller)
  }

  /** A live session is kept here for this leg identity (a leg with it would re-attach). */
  live(key: string): boolean {
    const s = this.byKey.get(key)
    return s !== undefined && s.state !== 'CLOSED'
  }

  /**
   * A leg with this identity came back: it takes over the live session kept for it (parked, or still
   * owned by an older connection, which is superseded). Null when there is none: open a new one.
   * `refused` when another caller opened it: the session and its leg are left as they are.
   */
  claim(
    key: string,
    leg: SessionEvents,
    init: Record<string, unknown>,
    log: Logger,
    caller = ''
  ): Result<Session | null, GatewayError> {
    const found = this.find(key, caller)
    if (found.ok && found.value !== null) found.value.attach(leg, init, log)
    return found
  }

  /**
   * The live session kept for this leg identity, not yet attached (the leg holds it first: its ready may
   * come at once, during `attach`). Null when there is none; CALLER_MISMATCH when another caller opened it.
   */
  find(key: string, caller = ''): Result<Session | null, GatewayError> {
    const s = this.byKey.get(key)
    if (s === undefined || s.state === 'CLOSED') return { ok: true, value: null }
    if ((this.callers.get(s) ?? '') !== caller) return { ok: false, error: new GatewayError('CALLER_MISMATCH') }
    return { ok: true, value: s }
  }

  parked(s: Session): void {
    this.parkedSessions.add(s)
  }
  unparked(s: Session): void {
    this.parkedSessions.delete(s)
    this.onGone(s)
  }
  closed(s: Session): void {
    if (this.byKey.get(s.key) === s) this.byKey.delete(s.key)
    this.parkedSessions.delete(s)
    this.onGone(s)
    // A plain session is held under its own key (a join channel's is its call's, held by the join).
    this.placement?.letGo(s.key, s)
  }

  get parkedCount(): number {
    return this.parkedSessions.size
  }
  all(): IterableIterator<Session> {
    return this.byKey.values()
  }
}
