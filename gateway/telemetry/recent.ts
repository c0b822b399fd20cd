/** One moment the status page lists (`GET /admin/recent`): what happened, where, when. Never a credential. */
export interface RecentEvent {
  /** ISO 8601. */
  at: string
  /**
   * failover: a vendor session replaced mid-call (or not: `code`); ejected / down / up: a replica taken out
   * by gateway-side failures, or probed down or up; refusal: a leg or an utterance answered with an error.
   */
  kind: 'failover' | 'ejected' | 'down' | 'up' | 'refusal'
  route: string
  /** The replica it concerns (a failover's new one). */
  upstream?: string
  /** A failover's lost replica. */
  from?: string
  /** The error code of a refusal or a failed failover. */
  code?: string
  hook?: 'audio' | 'text'
  /** Short, from the gateway's own words (a reason, a gap), never from a request. */
  detail?: string
}

/** How many of each list one process keeps. */
export const RECENT_KEPT = 25

/**
 * The last few failovers and replica changes, and apart from them the last few refusals (so a flood of
 * refused requests never pushes a failover out), of one process: bounded rings, newest first, no timer.
 */
export class RecentEvents {
  private readonly lists = { changes: [] as RecentEvent[], refusals: [] as RecentEvent[] }

  add(e: Omit<RecentEvent, 'at'>): void {
    const list = e.kind === 'refusal' ? this.lists.refusals : this.lists.changes
    list.unshift({ at: new Date().toISOString(), ...e })
    if (list.length > RECENT_KEPT) list.length = RECENT_KEPT
  }

  /** Newest first. */
  view(): { changes: RecentEvent[]; refusals: RecentEvent[] } {
    return { changes: this.lists.changes.slice(), refusals: this.lists.refusals.slice() }
  }
}
