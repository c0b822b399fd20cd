import type { Logger } from '../telemetry/log'
import type { StoreOp } from './redis-options'
import { byEvent, type Row } from '../state-table'

// The Redis store's connection as sharing sees it (store/redis.ts): one state and total tables, so a new
// state does not compile until every table says what it does there.

/**
 * - OFFLINE: no ready connection: before the first, or since one was lost (ioredis retries).
 * - UNPROVEN: a connection is ready, but no sync has succeeded over it yet (it may refuse every command),
 *   or a command failed since the last sync that did.
 * - UP: ready, the last sync succeeded and no command failed since: sharing works.
 * - CLOSING: `close()` was called over a ready connection that was not UP: its cleanup still goes out.
 * - CLOSING_UP: `close()` was called while UP: the cleanup goes out, and sharing answers as it did until
 *   the connection goes.
 * - CLOSED: closed and without a connection. Nothing reconnects it and nothing is said again.
 */
export type LinkState = 'OFFLINE' | 'UNPROVEN' | 'UP' | 'CLOSING' | 'CLOSING_UP' | 'CLOSED'

/** ioredis's 'ready', its 'close' or 'end', a failed command, a successful sync, the store's `close()`. */
export const LINK_EVENTS = ['ready', 'lost', 'failed', 'synced', 'close'] as const
export type LinkEvent = (typeof LINK_EVENTS)[number]

/** What a transition says (a log line and `onUp`): sharing came up, went down, or nothing changed. */
export type LinkNews = 'up' | 'down' | null

export type LinkStep = readonly [to: LinkState, news: LinkNews]

/**
 * Every event in every state. Sharing goes down once per outage (leaving UP) and comes up once (entering
 * UP): the news. A closing store says nothing of its own quit, and a closed one never reconnects. A sync
 * already in flight at close() that succeeds still proves the connection, and says so (as it always has).
 */
// biome-ignore format: a row per state, a cell per event of LINK_EVENTS, in its order
const ROWS: { readonly [S in LinkState]: Row<typeof LINK_EVENTS, Record<LinkEvent, LinkStep>> } = {
  //           ready                 lost                 failed                synced                close
  OFFLINE:    [['UNPROVEN', null],   ['OFFLINE', null],   ['OFFLINE', null],    ['OFFLINE', null],    ['CLOSED', null]],
  UNPROVEN:   [['UNPROVEN', null],   ['OFFLINE', null],   ['UNPROVEN', null],   ['UP', 'up'],         ['CLOSING', null]],
  UP:         [['UP', null],         ['OFFLINE', 'down'], ['UNPROVEN', 'down'], ['UP', null],         ['CLOSING_UP', null]],
  CLOSING:    [['CLOSING', null],    ['CLOSED', null],    ['CLOSING', null],    ['CLOSING_UP', 'up'], ['CLOSING', null]],
  CLOSING_UP: [['CLOSING_UP', null], ['CLOSED', null],    ['CLOSING_UP', null], ['CLOSING_UP', null], ['CLOSING_UP', null]],
  CLOSED:     [['CLOSED', null],     ['CLOSED', null],    ['CLOSED', null],     ['CLOSED', null],     ['CLOSED', null]]
}

/** NEXT[state][event]: the rows above, keyed by event. */
export const NEXT: { readonly [S in LinkState]: { readonly [E in LinkEvent]: LinkStep } } = byEvent(
  LINK_EVENTS,
  ROWS,
  step => step
)

/** Whether commands go to Redis in each state (a ready connection). */
export const CONNECTED: Record<LinkState, boolean> = {
  OFFLINE: false,
  UNPROVEN: true,
  UP: true,
  CLOSING: true,
  CLOSING_UP: true,
  CLOSED: false
}

/** Whether sharing works in each state (`Store.up()`): the fleet's counts, leases and the prober lease are used. */
export const SHARING: Record<LinkState, boolean> = {
  OFFLINE: false,
  UNPROVEN: false,
  UP: true,
  CLOSING: false,
  CLOSING_UP: true,
  CLOSED: false
}

/** Whether a sync runs in each state (a ready connection, and no close() called). */
export const SYNCS: Record<LinkState, boolean> = {
  OFFLINE: false,
  UNPROVEN: true,
  UP: true,
  CLOSING: false,
  CLOSING_UP: false,
  CLOSED: false
}

/** Whether a connection error counts (`store_errors_total{op="connect"}`) in each state: not those of our own quit. */
export const COUNTS_CONNECT_ERRORS: Record<LinkState, boolean> = {
  OFFLINE: true,
  UNPROVEN: true,
  UP: true,
  CLOSING: false,
  CLOSING_UP: false,
  CLOSED: false
}

/** The state with its data: the prober lease is held, or not, only while sharing works. */
export type Link = { readonly state: 'UP' | 'CLOSING_UP'; readonly leader: boolean } | { readonly state: Quiet }
type Quiet = Exclude<LinkState, 'UP' | 'CLOSING_UP'>

/** One event applied: the next state with its data (`leader`: what a successful sync said of the lease). */
export function step(link: Link, event: LinkEvent, leader = false): { link: Link; news: LinkNews } {
  const [to, news] = NEXT[link.state][event]
  if (to !== 'UP' && to !== 'CLOSING_UP') return { link: { state: to }, news }
  const held = event === 'synced' ? leader : 'leader' in link && link.leader
  return { link: { state: to, leader: held }, news }
}

export interface LinkOptions {
  log: Logger
  onUp: (up: boolean) => void
  onError?: (op: StoreOp) => void
}

/**
 * The connection's state, and what the store says about it: each outage logged once (`store_down`, with
 * the last failure's reason) and its end once (`store_up`), both told to `onUp`. Every failure is counted.
 */
export class RedisLink {
  private link: Link = { state: 'OFFLINE' }
  /** The last failure's message: the reason a `store_down` line gives (cleared by a successful sync). */
  private lastError = ''

  constructor(private readonly opts: LinkOptions) {}

  get state(): LinkState {
    return this.link.state
  }
  connected(): boolean {
    return CONNECTED[this.link.state]
  }
  up(): boolean {
    return SHARING[this.link.state]
  }
  syncs(): boolean {
    return SYNCS[this.link.state]
  }
  /** This instance holds the prober lease (known only while sharing works). */
  leader(): boolean {
    return 'leader' in this.link && this.link.leader
  }

  /** A new connection is not up until a sync over it succeeds. Returns whether a sync over it should start. */
  ready(): boolean {
    const was = this.link.state
    this.apply('ready')
    return !CONNECTED[was] && this.syncs()
  }
  lost(): void {
    this.apply('lost')
  }
  /** ioredis's 'error': every connection error is counted; the outage itself is logged once, with the last reason. */
  connectError(err: Error): void {
    if (!COUNTS_CONNECT_ERRORS[this.link.state]) return
    this.lastError = err.message
    this.opts.onError?.('connect')
  }
  /** `connect()` refused at start (already counted by the 'error' listener): its reason, unless one is known. */
  startError(err: unknown): void {
    if (this.lastError === '') this.lastError = err instanceof Error ? err.message : String(err)
  }
  /** Count a failed command; sharing is not up until a sync succeeds. */
  failed(op: StoreOp, err: unknown): void {
    this.lastError = err instanceof Error ? err.message : String(err)
    this.opts.onError?.(op)
    this.apply('failed', op)
  }
  synced(leader: boolean): void {
    this.apply('synced', undefined, leader)
    this.lastError = ''
  }
  /** Returns the state close() was called in. */
  close(): LinkState {
    const was = this.link.state
    this.apply('close')
    return was
  }

  /** The one line `start()` logs when sharing does not work yet. */
  sayNotUpAtStart(): void {
    if (this.up()) return
    this.opts.log.error(
      { event: 'store_down', reason: this.lastError || 'not ready' },
      this.connected()
        ? 'Redis commands failing at start: serving on local state until they succeed'
        : 'Redis unreachable at start: serving on local state until it returns'
    )
  }

  private apply(event: LinkEvent, op?: StoreOp, leader?: boolean): void {
    const { link, news } = step(this.link, event, leader)
    this.link = link
    if (news === 'up') this.opts.log.info({ event: 'store_up' }, 'Redis reachable: sharing state with the fleet')
    if (news === 'down')
      this.opts.log.error(
        { event: 'store_down', ...(op !== undefined ? { op } : {}), reason: this.lastError || 'connection lost' },
        this.connected()
          ? 'Redis commands failing: serving on local state until they succeed'
          : 'Redis unreachable: serving on local state until it returns'
      )
    if (news !== null) this.opts.onUp(news === 'up')
  }
}
