import type { Clock } from '../../clock'
import type { AudioSettings } from '../../config/types'
import type { RelayTokens } from '../../auth/relay-token'
import { RELAY_TOKEN_HEADER, type RelayClaims } from '../../auth/relay-token'
import type { RouteRuntime } from '../../route'
import type { Logger } from '../../telemetry/log'
import type { LegCounters, Metrics } from '../../telemetry/metrics'
import { GatewayError } from '../../errors'
import { describeSocketFailure, VendorSocket } from '../../upstream/ws-leg'
import type { Place } from './placement'

/** The path of the relay on a fleet listener (server/fleet-listener.ts): the only thing it serves. */
export const RELAY_PATH = '/relay/audio/'

/**
 * The log event of a relay step: `join_*` on a join route (the second leg of a joined call), `reattach_*`
 * otherwise (a leg back on another process than its parked session).
 */
export function relayEvent(route: RouteRuntime, step: 'relayed' | 'split' | 'owner_unreachable'): string {
  return `${route.config.join !== undefined ? 'join' : 'reattach'}_${step}`
}

/** `audio_joins_total{result}` on a join route, `audio_reattach_total{result}` otherwise. */
export function countRelay(deps: { route: RouteRuntime; metrics: Metrics }, result: 'relayed' | 'relay_failed'): void {
  const { metrics, route } = deps
  if (route.config.join !== undefined) metrics.joins.inc({ route: route.name, result })
  else metrics.reattach.inc({ route: route.name, result })
}

/** What a relay link reports to its platform leg (audio/leg/leg.ts); never after the leg closed the link. */
export interface RelayEvents {
  /** A text frame from the owner (CONNECTED, MESSAGE, ERROR), for the platform as it is. */
  relayText: (text: string) => void
  /** The owner closed the relayed leg with this code (its ERROR frame came before). */
  relayEnded: (code: number, reason: string) => void
  /** The owner never answered (`why`): the leg may be served here, with the audio the link held. */
  relayUnreachable: (held: ArrayBuffer[], why: string) => void
  /** The link is lost after it opened (the owner died, or the path to it), or its held audio overflowed. */
  relayFailed: (error: GatewayError) => void
}

/** How a leg's relay link is made (default: a real one); unit tests pass fakes. */
export type RelayLinkFactory = (
  ...args: ConstructorParameters<typeof RelayLink>
) => Pick<RelayLink, 'write' | 'pause' | 'resume' | 'close'>

/**
 * A leg relayed to the process that owns its session (audio/placement/placement.ts): one WebSocket to the owner's
 * fleet listener, `RELAY_PATH{route}`, with a relay token that asserts the platform's address and the
 * session the leg belongs to (auth/relay-token.ts), carrying the platform's init message unchanged and
 * then every binary frame (a masked copy by `ws`, as towards a vendor); what the owner sends back goes
 * to the platform as it is. Audio before the socket opens is held (copied, up to
 * `audio.holdBufferBytes`). Towards a owner that does not read, frames beyond `audio.bufferBytes`
 * queued are dropped and counted, as towards a vendor.
 */
export class RelayLink {
  private held: ArrayBuffer[] | null = []
  private heldBytes = 0
  private readonly socket: VendorSocket
  private open = false
  /** Closed by its leg, or reported to it: nothing more is reported. */
  private closed = false

  constructor(
    place: Extract<Place, { kind: 'relay' }>,
    /** The platform's init message, as it came. */
    private readonly init: string,
    /** The platform leg's: what goes to the owner counts as sent to the vendor, its drops as backpressure. */
    private readonly counters: LegCounters,
    /** What the owner is told: the platform's address, the session, this process (`to` and `hop` are filled in). */
    claims: Omit<RelayClaims, 'to' | 'hop'>,
    private readonly deps: {
      settings: AudioSettings
      clock: Clock
      route: RouteRuntime
      metrics: Metrics
      log: Logger
      relayTokens: RelayTokens
      traceparent?: string
    },
    private readonly leg: RelayEvents
  ) {
    const { settings, clock, relayTokens: tokens, traceparent } = deps
    const route = deps.route.name
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
        onOpen: () => this.opened(place),
        onText: text => {
          if (!this.closed) this.leg.relayText(text)
        },
        onBinary: () => {},
        onClose: (code, reason, opened, failure) => {
          this.open = false
          if (this.closed) return
          this.closed = true
          const why = failure === null ? `closed ${code}` : describeSocketFailure(failure)
          if (!opened) this.leg.relayUnreachable(this.takeHeld(), why)
          else if (failure !== null || code === 1006)
            this.leg.relayFailed(new GatewayError('UPSTREAM_CLOSED', { detail: `session owner lost: ${why}` }))
          else this.leg.relayEnded(code, reason)
        }
      }
    )
  }

  /** Per-frame path: to the owner (or held until its socket opens). `data` is only valid during this call. */
  write(data: ArrayBuffer): void {
    if (this.open) {
      const c = this.counters
      if (this.socket.bufferedAmount > this.deps.settings.bufferBytes) {
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
    if (this.heldBytes > this.deps.settings.holdBufferBytes) {
      this.held = null
      if (this.closed) return
      this.closed = true
      return this.leg.relayFailed(new GatewayError('HOLD_BUFFER_OVERFLOW'))
    }
    this.held.push(data.slice(0))
  }

  /** The audio held while the owner was being reached (the leg is served here after all). */
  private takeHeld(): ArrayBuffer[] {
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
    this.closed = true
    // Audio held for a owner that never opened: read from the platform, delivered nowhere, counted.
    this.counters.dropAfterClose += this.held?.length ?? 0
    this.held = null
    this.socket.close(1000, 'platform leg closed')
  }

  private opened(place: Extract<Place, { kind: 'relay' }>): void {
    this.socket.sendText(this.init)
    this.open = true
    const held = this.held ?? []
    this.held = null
    for (const b of held) this.write(b)
    const { vendorPingSeconds: ping, vendorPongTimeoutSeconds: timeout } = this.deps.settings
    this.socket.startHeartbeat(ping * 1000, timeout * 1000)
    countRelay(this.deps, 'relayed')
    this.deps.log.info(
      { event: relayEvent(this.deps.route, 'relayed'), to: place.owner.instance, hop: place.hop },
      'leg relayed to the process that owns its session'
    )
  }
}
