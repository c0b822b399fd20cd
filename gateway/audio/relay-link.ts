import type { Clock } from '../clock'
import type { AudioSettings } from '../config/types'
import type { RelayTokens } from '../auth/relay-token'
import { RELAY_TOKEN_HEADER, type RelayClaims } from '../auth/relay-token'
import type { LegCounters } from '../telemetry/metrics'
import { describeSocketFailure, VendorSocket } from '../upstream/ws-leg'
import type { Place } from './placement'

/** The path of the relay on a fleet listener (server/fleet-listener.ts): the only thing it serves. */
export const RELAY_PATH = '/relay/audio/'

/** What a relayed leg reports to its platform leg (audio/leg.ts). */
export interface RelayEvents {
  /** The holder's socket opened: the init message and the held audio are on their way. */
  opened: () => void
  /** A text frame from the holder (CONNECTED, MESSAGE, ERROR), for the platform as it is. */
  text: (text: string) => void
  /** The holder closed the relayed leg with this code (its ERROR frame came before). */
  ended: (code: number, reason: string) => void
  /** The holder never answered (`why`, no URL): the leg may be served here; its held audio is `takeHeld()`. */
  unreachable: (why: string) => void
  /** The holder's socket was lost after it opened (the holder's process died, or the path to it). */
  lost: (why: string) => void
  /** The audio held before the socket opened outgrew `audio.holdBufferBytes`. */
  overflow: () => void
}

/**
 * A leg relayed to the process that holds its session (audio/placement.ts): one WebSocket to the holder's
 * fleet listener, `RELAY_PATH{route}`, with a relay token that asserts the platform's address and the
 * session the leg belongs to (auth/relay-token.ts), carrying the platform's init message unchanged and
 * then every binary frame (a masked copy by `ws`, as towards a vendor); what the holder sends back goes
 * to the platform as it is. Audio before the socket opens is held (copied, up to
 * `audio.holdBufferBytes`). Towards a holder that does not read, frames beyond `audio.bufferBytes`
 * queued are dropped and counted, as towards a vendor.
 */
export class RelayLink {
  private held: ArrayBuffer[] | null = []
  private heldBytes = 0
  private readonly socket: VendorSocket
  private open = false

  constructor(
    place: Extract<Place, { kind: 'relay' }>,
    route: string,
    private readonly init: string,
    /** The platform leg's: what goes to the holder counts as sent to the vendor, its drops as backpressure. */
    private readonly counters: LegCounters,
    traceparent: string | undefined,
    tokens: RelayTokens,
    /** What the holder is told: the platform's address, the session, this process (`to` and `hop` are filled in). */
    claims: Omit<RelayClaims, 'to' | 'hop'>,
    private readonly settings: AudioSettings,
    clock: Clock,
    private readonly events: RelayEvents
  ) {
    const base = place.url.endsWith('/') ? place.url.slice(0, -1) : place.url
    // A worker is addressed by its own id; another instance by its gateway's (any of its workers may take it).
    const to = place.hop === 'worker' ? place.owner.instance : place.owner.group
    const headers: Record<string, string> = { [RELAY_TOKEN_HEADER]: tokens.sign({ ...claims, hop: place.hop, to }) }
    if (traceparent !== undefined) headers.traceparent = traceparent
    this.socket = new VendorSocket(
      `${base}${RELAY_PATH}${encodeURIComponent(route)}`,
      {
        headers,
        connectTimeoutMs: settings.connectTimeoutSeconds * 1000,
        maxPayloadBytes: 16 << 20
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

  /** Per-frame path: to the holder (or held until its socket opens). `data` is only valid during this call. */
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

  /** The audio held while the holder was being reached (the leg is served here after all). */
  takeHeld(): ArrayBuffer[] {
    const held = this.held ?? []
    this.held = null
    return held
  }

  /** The platform side is backed up: stop reading from the holder (and resume). */
  pause(): void {
    this.socket.pause()
  }
  resume(): void {
    this.socket.resume()
  }

  /** The platform leg is over (closed, failed or drained): the holder sees its relayed leg close. */
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
