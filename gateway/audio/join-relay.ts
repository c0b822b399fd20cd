import type { Clock } from '../clock'
import type { AudioSettings } from '../config/types'
import type { JoinOwner, Store } from '../store/port'
import type { LegCounters } from '../telemetry/metrics'
import { describeSocketFailure, VendorSocket } from '../upstream/ws-leg'
import { signRelayedAddress } from '../auth/hook-auth'

/**
 * The join across processes (route `join`). The TX and RX legs of a call may land on different
 * instances of a fleet, or on different workers of one `serve --workers N`. The first leg of a call to
 * arrive claims the call in the store (set-if-absent, with a TTL its process refreshes while the join
 * lives); a leg of that call landing anywhere else is relayed, as a plain WebSocket carrying the
 * platform's own init message and frames, to the owner's audio hook, where it joins the stereo session
 * like a local leg (the owner checks its credential and caller again). A relayed leg is marked with
 * RELAY_HEADER, so it is relayed at most once more (to a worker of the owner's own process) and never
 * back.
 */

/** The header that marks a relayed leg: `instance` (from another instance) or `worker` (from another worker). */
export const RELAY_HEADER = 'x-assist-gateway-relay'
/** The platform's address of a relayed leg, signed (auth/hook-auth.ts `signRelayedAddress`). */
export const RELAYED_FOR_HEADER = 'x-assist-gateway-relay-for'
/** How a leg arrived: from the platform (null), or relayed by another instance or worker. */
export type RelayHop = 'instance' | 'worker' | null

/** How long an owner record lives without a refresh, and how often the owner refreshes it. */
export const OWNER_TTL_MS = 10_000
export const OWNER_REFRESH_MS = 3_000

/** Where a leg of a joined call is served. `here` with `unreachable`: its owner is elsewhere, out of reach. */
export type JoinPlace =
  | { readonly kind: 'here'; readonly unreachable?: string }
  | { readonly kind: 'relay'; readonly url: string; readonly hop: 'instance' | 'worker'; readonly owner: JoinOwner }

/** The joined call a leg belongs to: its route, busNo and contactId (audio/join.ts keys its joins so). */
export function joinKeyOf(route: string, leg: { busNo: unknown; contactId: unknown }): string {
  return `${route}:${leg.busNo}:${leg.contactId}`
}

export function relayHop(header: string): RelayHop {
  return header === 'instance' || header === 'worker' ? header : null
}

/** This process's view of the joined calls' owners (through the store). */
export class JoinDirectory {
  constructor(
    private readonly store: Store,
    /** This process as an owner: its instance id, group and the URLs it is reached at. */
    readonly me: JoinOwner
  ) {}

  /** Where the call `key` is joined; this process claims it when nobody live holds it. */
  async place(key: string, arrived: RelayHop): Promise<JoinPlace> {
    return this.placeOf(await this.store.claimJoin(key, this.me, OWNER_TTL_MS), arrived)
  }

  /** The owner was not reachable: this process takes the call over (unless a third one already has). */
  async takeOver(key: string, dead: JoinOwner, arrived: RelayHop): Promise<JoinPlace> {
    return this.placeOf(await this.store.claimJoin(key, this.me, OWNER_TTL_MS, dead.instance), arrived)
  }

  /** The owner's refresh of its record (while the joined session lives). */
  refresh(key: string): void {
    this.store.claimJoin(key, this.me, OWNER_TTL_MS).catch(() => {})
  }

  release(key: string): void {
    this.store.releaseJoin(key, this.me.instance)
  }

  private placeOf(owner: JoinOwner, arrived: RelayHop): JoinPlace {
    if (owner.instance === this.me.instance) return { kind: 'here' }
    // A leg relayed once by a worker is never relayed again: the owner moved meanwhile; it is served here.
    if (arrived === 'worker') return { kind: 'here', unreachable: 'relayed twice' }
    if (owner.group === this.me.group && owner.local !== '')
      return { kind: 'relay', url: owner.local, hop: 'worker', owner }
    if (arrived === 'instance') return { kind: 'here', unreachable: 'relayed twice' }
    if (owner.url === '') return { kind: 'here', unreachable: 'the owner has no listen.advertiseUrl' }
    return { kind: 'relay', url: owner.url, hop: 'instance', owner }
  }
}

/** What a relayed leg reports to its platform leg (audio/leg.ts). */
export interface ForwardEvents {
  /** The owner's socket opened: the init message and the held audio are on their way. */
  opened: () => void
  /** A text frame from the owner (CONNECTED, MESSAGE, ERROR), for the platform as it is. */
  text: (text: string) => void
  /** The owner closed the relayed leg with this code (its ERROR frame came before). */
  ended: (code: number, reason: string) => void
  /** The owner never answered (`why`, no URL): the leg may be served here; its held audio is `takeHeld()`. */
  unreachable: (why: string) => void
  /** The owner's socket was lost after it opened (the owner's process died, or the path to it). */
  lost: (why: string) => void
  /** The audio held before the socket opened outgrew `audio.holdBufferBytes`. */
  overflow: () => void
}

/**
 * A leg relayed to its joined call's owner: one WebSocket to the owner's `/audio/{route}`, carrying the
 * platform's init message unchanged and then every binary frame (a masked copy by `ws`, as towards a
 * vendor); what the owner sends back goes to the platform as it is. Audio before the socket opens is
 * held (copied, up to `audio.holdBufferBytes`). Towards an owner that does not read, frames beyond
 * `audio.bufferBytes` queued are dropped and counted, as towards a vendor.
 */
export class ForwardedLeg {
  private held: ArrayBuffer[] | null = []
  private heldBytes = 0
  private readonly socket: VendorSocket
  private open = false

  constructor(
    place: Extract<JoinPlace, { kind: 'relay' }>,
    route: string,
    private readonly init: string,
    /** The platform leg's: what goes to the owner counts as sent to the vendor, its drops as backpressure. */
    private readonly counters: LegCounters,
    traceparent: string | undefined,
    /** The platform's address as this process saw it: the owner keys the leg's failure budget by it. */
    clientAddress: string,
    private readonly settings: AudioSettings,
    clock: Clock,
    private readonly events: ForwardEvents
  ) {
    const base = place.url.endsWith('/') ? place.url.slice(0, -1) : place.url
    const headers: Record<string, string> = {
      [RELAY_HEADER]: place.hop,
      [RELAYED_FOR_HEADER]: signRelayedAddress(clientAddress)
    }
    if (traceparent !== undefined) headers.traceparent = traceparent
    this.socket = new VendorSocket(
      `${base}/audio/${encodeURIComponent(route)}`,
      {
        headers,
        connectTimeoutMs: settings.connectTimeoutSeconds * 1000,
        maxPayloadBytes: 16 << 20,
        loopbackTls: place.hop === 'worker'
      },
      clock,
      {
        onOpen: () => this.opened(),
        onText: text => this.events.text(text),
        onBinary: () => {},
        onClose: (code, reason, opened, failure) => {
          this.open = false
          const why = failure === null ? `closed ${code}` : describeSocketFailure(failure)
          if (!opened) this.events.unreachable(why)
          else if (failure !== null || code === 1006) this.events.lost(why)
          else this.events.ended(code, reason)
        }
      }
    )
  }

  /** Per-frame path: to the owner (or held until its socket opens). `data` is only valid during this call. */
  write(data: ArrayBuffer): void {
    if (this.open) {
      const c = this.counters
      if (this.socket.bufferedAmount > this.settings.bufferBytes) {
        c.dropBackpressure++
        return
      }
      this.socket.sendBinary(data)
      c.framesToVendor++
      c.bytesToVendor += data.byteLength
      return
    }
    if (this.held === null) return
    this.heldBytes += data.byteLength
    if (this.heldBytes > this.settings.holdBufferBytes) {
      this.held = null
      return this.events.overflow()
    }
    this.held.push(data.slice(0))
  }

  /** The audio held while the owner was being reached (the leg is served here after all). */
  takeHeld(): ArrayBuffer[] {
    const held = this.held ?? []
    this.held = null
    return held
  }

  /** The platform side is backed up: stop reading from the owner (and resume). */
  pause(): void {
    this.socket.pause()
  }
  resume(): void {
    this.socket.resume()
  }

  /** The platform leg is over (closed, failed or drained): the owner sees its relayed leg close. */
  close(): void {
    this.held = null
    this.socket.close(1000, 'platform leg closed')
  }

  private opened(): void {
    this.socket.sendText(this.init)
    this.open = true
    const held = this.held ?? []
    this.held = null
    for (const b of held) this.write(b)
    this.socket.startHeartbeat(this.settings.vendorPingSeconds * 1000)
    this.events.opened()
  }
}
