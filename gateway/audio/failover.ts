import type { Clock } from '../clock'
import type { AudioSettings } from '../config/types'
import { GatewayError } from '../errors'
import type { Replica, UpstreamPool } from '../upstream/pool'
import { describeSocketFailure } from '../upstream/ws-leg'
import type { VendorFailure } from './connection-contract'

const RETRY_BACKOFF_MS = [100, 250, 500, 1000, 2000]

/** How a connection failure counts, and what it says if it ends the leg. */
export interface Judgement {
  /** A gateway-side failure (counts against the replica's passive health); never a vendor's verdict. */
  readonly gatewaySide: boolean
  /** Short text for logs and error details (never an expression's output). */
  readonly why: string
  /** The leg's error if this failure ends it; `extra` goes to the log and the ERROR frame's parameters. */
  readonly error: GatewayError
  readonly extra: Record<string, unknown>
}

/**
 * Judge a connection failure. `when`: before readiness (refused) or after (lost). Only gateway-side
 * failures count against a replica: connect/TLS errors, an upgrade answered 5xx, abnormal closes
 * (1006/1011), missed pongs, no readiness in time; never a vendor 4xx, a graceful close or a refusal.
 */
export function judge(f: VendorFailure, when: 'refused' | 'lost'): Judgement {
  switch (f.kind) {
    case 'unreachable': {
      const why = describeSocketFailure(f.socket)
      const vendorVerdict = f.socket.kind === 'upgrade' && f.socket.status >= 400 && f.socket.status < 500
      return {
        gatewaySide: !vendorVerdict,
        why,
        error: new GatewayError('UPSTREAM_UNREACHABLE', { detail: why }),
        extra: {}
      }
    }
    case 'closed': {
      const abnormal = f.code === 1006 || f.code === 1011
      if (when === 'refused')
        return {
          gatewaySide: abnormal,
          why: `closed with ${f.code} before ready`,
          error: new GatewayError('UPSTREAM_REFUSED', { detail: `vendor closed with ${f.code} before it was ready` }),
          extra: { vendorCloseCode: f.code }
        }
      const why = `vendor closed with ${f.code}${f.socket !== null ? ` (${describeSocketFailure(f.socket)})` : ''}`
      return {
        gatewaySide: abnormal || f.socket !== null,
        why,
        error: new GatewayError('UPSTREAM_CLOSED', { detail: why }),
        extra: { vendorCloseCode: f.code, vendorCloseReason: f.reason.slice(0, 120) }
      }
    }
    case 'not-ready':
      return { gatewaySide: true, why: 'not ready in time', error: new GatewayError('UPSTREAM_NOT_READY'), extra: {} }
    case 'refused':
      return {
        gatewaySide: false,
        why: `refused: ${f.vendorMessage ?? 'no reason'}`,
        error: new GatewayError('UPSTREAM_REFUSED'),
        extra: { vendorMessage: f.vendorMessage }
      }
    case 'mapping': {
      // The same mapping fails on every replica: never walked. The expression's text stays in the log.
      const detail = f.stage === 'template' ? 'frames.template' : f.stage === 'open' ? 'open' : `audio.${f.stage}`
      return {
        gatewaySide: false,
        why: `mapping ${f.stage}`,
        error: new GatewayError('MAPPING_FAILED', { detail }),
        extra: {}
      }
    }
    case 'ended': {
      const why = `the vendor ended the session${f.vendorMessage === undefined ? '' : `: ${f.vendorMessage}`}`
      return {
        gatewaySide: false,
        why,
        error: new GatewayError(when === 'refused' ? 'UPSTREAM_REFUSED' : 'UPSTREAM_CLOSED', { detail: why }),
        extra: { vendorMessage: f.vendorMessage }
      }
    }
    case 'replica-down':
      return {
        gatewaySide: false,
        why: f.why,
        error: new GatewayError('UPSTREAM_CLOSED', { detail: f.why }),
        extra: {}
      }
  }
}

/**
 * The failover policy of one session: which replica to try next (least-streams order from the pool,
 * affinity first), and, while recovering, the backoff between rounds and the deadline
 * (`failoverTimeoutSeconds` from the loss).
 */
export class ReplicaWalk {
  private candidates: Replica[] = []
  private attempt = 0
  private deadline = 0
  /** When the recovery began (clock ms) and which replica was lost. */
  lostAt = 0
  lostReplica: Replica | null = null
  /** Why the last attempt failed, for the error that ends the walk. */
  lastError: string | null = null

  constructor(
    private readonly pool: UpstreamPool,
    private readonly settings: AudioSettings,
    private readonly clock: Clock
  ) {}

  /** The first open: `preferred` first when it is healthy (affinity), then by balancing. False when none is available. */
  begin(preferred: Replica | null): boolean {
    const all = this.pool.audioCandidates()
    this.candidates = preferred?.healthy ? [preferred, ...all.filter(r => r !== preferred)] : all
    return this.candidates.length > 0
  }

  /** A loss mid-call: the deadline starts now, and the lost replica is tried last. */
  beginRecovery(lost: Replica): void {
    this.lostAt = this.clock.now()
    this.deadline = this.lostAt + this.settings.failoverTimeoutSeconds * 1000
    this.lostReplica = lost
    this.candidates = this.pool.audioCandidates(new Set([lost]))
  }

  next(): Replica | undefined {
    return this.candidates.shift()
  }

  /** Every candidate failed while recovering: ms to wait before the next round, or null past the deadline. */
  backoff(): number | null {
    const now = this.clock.now()
    if (now >= this.deadline) return null
    const wait = Math.min(RETRY_BACKOFF_MS[Math.min(this.attempt, RETRY_BACKOFF_MS.length - 1)], this.deadline - now)
    this.attempt++
    return wait
  }

  /** A new round after the backoff. Never eject the last replica in effect: with none healthy, the lost one is tried again. */
  refill(): void {
    this.candidates = this.pool.audioCandidates()
    if (this.candidates.length === 0 && this.lostReplica?.config.audio !== undefined)
      this.candidates = [this.lostReplica]
  }

  /** A replacement is ready: the seconds audio did not flow. */
  recovered(): number {
    this.attempt = 0
    return this.gapSeconds()
  }

  gapSeconds(): number {
    return (this.clock.now() - this.lostAt) / 1000
  }
}
