import type { Clock, TimerHandle } from '../../clock'
import type { CallRecord, Store } from '../../store/port'
import type { CallBookPort, CallPlace, LegCall, SessionFate } from './leg-call'
import { OWNER_REFRESH_MS, OWNER_TTL_MS } from '../placement/placement'
import type { Session } from '../session/session-contract'

/** A live leg as the book reads it (audio/leg/leg.ts AudioLeg). */
export interface CallSource {
  readonly call: LegCall
  /** Its state (audio/leg/leg-contract.ts LegState). */
  readonly state: string
}

/**
 * The call records of this process (`GET /admin/calls`, through the store): every live leg whose init
 * was accepted, and every parked session's last leg (state PARKED), published on the owner records'
 * cadence (audio/placement/placement.ts OWNER_REFRESH_MS) with their TTL, so a dead process's records expire. A
 * leg's record goes at its end (or, parked, when its session is re-attached or closes).
 */
export class CallBook implements CallBookPort {
  private readonly parked = new Map<Session, CallRecord>()
  private timer: TimerHandle | null = null

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly where: CallPlace,
    private readonly legs: () => Iterable<CallSource>
  ) {}

  start(): void {
    this.timer ??= this.clock.setInterval(() => this.publish(), OWNER_REFRESH_MS)
  }

  /** Every record of this process, refreshed in the store now. */
  publish(): void {
    const records: CallRecord[] = [...this.parked.values()]
    for (const leg of this.legs()) {
      if (leg.state === 'CLOSED') continue
      const r = leg.call.record(leg.state, this.where)
      if (r !== null) records.push(r)
    }
    if (records.length > 0) this.store.publishCalls(records, OWNER_TTL_MS)
  }

  /** A leg has its session (here, or in the process it is relayed to): its record goes out now. */
  placed(call: LegCall, state: string): void {
    const r = call.record(state, this.where)
    if (r !== null) this.store.publishCalls([r], OWNER_TTL_MS)
  }

  /** A leg ended: its record goes, or stays as PARKED while its session waits for a re-attach. */
  ended(call: LegCall, session: Session | null, fate: SessionFate): void {
    if (call.identity === null) return
    const r = call.record('PARKED', this.where)
    if (r === null) return
    if (fate === 'parked' && session !== null) {
      this.parked.set(session, r)
      this.store.publishCalls([r], OWNER_TTL_MS)
    } else this.store.removeCall(r.contactId, r.legId)
  }

  /** A parked session was re-attached (its new leg has its own record) or closed: its record goes. */
  sessionGone(s: Session): void {
    const r = this.parked.get(s)
    if (r === undefined) return
    this.parked.delete(s)
    this.store.removeCall(r.contactId, r.legId)
  }

  close(): void {
    if (this.timer !== null) this.clock.clearInterval(this.timer)
    this.timer = null
  }
}
