import { type Clock, Timer } from '../../clock'
import { namespaceOf } from '../../route'
import type { OwnerRecord, Store } from '../../store/port'

/**
 * Where a leg's session is: "this call's session lives in another process" is one idea, whether the
 * other process is a worker of this gateway or another instance, and whether the leg is re-attaching
 * (a lost connection, a call taken off hold) or is the second leg of a joined call. Every session that a
 * leg landing elsewhere may need to reach has an owner record in the store (set only if absent, with a
 * TTL its owner refreshes, released when the session ends or is handed off), naming its owning process
 * and the caller that opened it. A leg of that session landing elsewhere is relayed to the owner
 * (audio/placement/relay-link.ts) over the owner's fleet listener, if the same caller opened it; another caller is
 * refused and never touches the session.
 */

/** How a relayed leg came: from a worker of the same gateway (loopback), or from another instance. */
export type Hop = 'instance' | 'worker'

/** This process as a owner, without the caller (each record names the caller of its own session). */
export type OwnerProcess = Omit<OwnerRecord, 'caller'>

/** Where a leg is served. `here` with `unreachable`: its owner is elsewhere and out of reach (served here). */
export type Place =
  | { readonly kind: 'here'; readonly unreachable?: string }
  | { readonly kind: 'relay'; readonly url: string; readonly hop: Hop; readonly owner: OwnerRecord }
  | { readonly kind: 'refused' }

const HERE: Place = { kind: 'here' }
const REFUSED: Place = { kind: 'refused' }

/** How long an owner record lives without a refresh, and how often its owner refreshes it. */
export const OWNER_TTL_MS = 10_000
export const OWNER_REFRESH_MS = 3_000

/** A leg's own identity: its tenant, route, busNo, contactId and perspective (a re-attach finds its session by it). */
export function legKeyOf(
  route: string,
  leg: { readonly busNo: unknown; readonly contactId: unknown; readonly perspective: unknown },
  tenant: string
): string {
  return `${namespaceOf(route, tenant)}:${leg.busNo}:${leg.contactId}:${leg.perspective}`
}

/**
 * The session a leg belongs to: on a `join` route its call (tenant, route, busNo, contactId: both legs share
 * one stereo session), else its own identity (with the perspective).
 */
export function sessionKeyOf(
  route: { readonly name: string; readonly config: { readonly join?: unknown } },
  leg: { readonly busNo: unknown; readonly contactId: unknown; readonly perspective: unknown },
  tenant: string
): string {
  return route.config.join !== undefined
    ? `${namespaceOf(route.name, tenant)}:${leg.busNo}:${leg.contactId}`
    : legKeyOf(route.name, leg, tenant)
}

/**
 * The sessions this process owns, by session key, with their callers; and, when other processes share
 * its store (`me` set: a fleet on Redis, or the workers of one gateway), their owner records.
 */
export class Placement {
  /** Session key → who holds it here: the caller, and the object (session or joined call) that holds it. */
  private readonly owned = new Map<string, { caller: string; by: object }>()
  private readonly timer: Timer

  constructor(
    private readonly store: Store,
    /** Null: no other process can reach this one or be reached (a lone process on the memory store). */
    readonly me: OwnerProcess | null,
    clock: Clock
  ) {
    this.timer = new Timer(clock)
  }

  /** The caller of the session `key` held here, if it is. */
  callerOf(key: string): string | undefined {
    return this.owned.get(key)?.caller
  }

  /** Sessions held here (the refresh batch; tests). */
  get size(): number {
    return this.owned.size
  }

  /**
   * Where the leg of session `key` opened by `caller` is served. Synchronous when the session is held here
   * or no other process shares the store; else after the store's claim (this process claims it when no
   * live owner has it). `arrived`: how the leg came (a relayed leg is relayed at most once more, to a
   * worker of the owner's own gateway, never back).
   */
  place(key: string, caller: string, arrived: Hop | null): Place | Promise<Place> {
    const here = this.owned.get(key)
    if (here !== undefined) return here.caller === caller ? HERE : REFUSED
    const me = this.me
    if (me === null) return HERE
    return this.store.claimOwner(key, { ...me, caller }, OWNER_TTL_MS).then(
      owner => this.placeOf(me, owner, caller, arrived),
      () => HERE
    )
  }

  /** The owner could not be reached: this process takes the session over (unless a third one already has). */
  async takeOver(key: string, caller: string, dead: OwnerRecord, arrived: Hop | null): Promise<Place> {
    const me = this.me
    if (me === null) return HERE
    return this.placeOf(
      me,
      await this.store.claimOwner(key, { ...me, caller }, OWNER_TTL_MS, dead.instance),
      caller,
      arrived
    )
  }

  /** `by` (a session or joined call opened here) owns `key` for `caller`; its record is refreshed while it does. */
  own(key: string, caller: string, by: object): void {
    this.owned.set(key, { caller, by })
    if (this.me !== null && !this.timer.pending) this.timer.every(OWNER_REFRESH_MS, () => this.refresh())
  }

  /** `by` no longer holds `key` (ended, or handed off to the next instance): its record goes. */
  letGo(key: string, by: object): void {
    if (this.owned.get(key)?.by !== by) return
    this.owned.delete(key)
    if (this.me !== null) this.store.releaseOwner(key, this.me.instance)
    if (this.owned.size === 0) this.timer.clear()
  }

  /** A leg placed here that opened nothing after all (refused by a limit): the record it claimed goes. */
  abandon(key: string): void {
    if (this.me !== null && !this.owned.has(key)) this.store.releaseOwner(key, this.me.instance)
  }

  close(): void {
    this.timer.clear()
  }

  private refresh(): void {
    if (this.me !== null && this.owned.size > 0)
      this.store.refreshOwners([...this.owned.keys()], this.me.instance, OWNER_TTL_MS)
  }

  /** Where a leg is served when `owner` owns its session (`me`: this process, as its owner records name it). */
  private placeOf(me: OwnerProcess, owner: OwnerRecord, caller: string, arrived: Hop | null): Place {
    if (owner.instance === me.instance) return HERE
    if (owner.caller !== caller) return REFUSED
    // A leg relayed once by a worker is never relayed again: the owner moved meanwhile; it is served here.
    if (arrived === 'worker') return { kind: 'here', unreachable: 'relayed twice' }
    if (owner.group === me.group && owner.local !== '') return { kind: 'relay', url: owner.local, hop: 'worker', owner }
    if (arrived === 'instance') return { kind: 'here', unreachable: 'relayed twice' }
    if (owner.url === '') return { kind: 'here', unreachable: 'the owner has no fleet.advertiseUrl' }
    return { kind: 'relay', url: owner.url, hop: 'instance', owner }
  }
}
