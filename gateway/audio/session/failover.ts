import type { Clock } from '../../clock'
import type { AudioSettings } from '../../config/types'
import { GatewayError } from '../../errors'
import type { CloseClass } from '../../mapping/audio'
import type { Replica, UpstreamPool } from '../../upstream/pool'
import { describeSocketFailure } from '../../upstream/ws-leg'
import type { VendorFailure } from '../connection/connection-contract'

/** Longest vendor reason text kept (WebSocket close reasons are at most 123 bytes). */
const REASON_CHARS = 120

/** How a connection failure counts, and what it says if it ends the leg. */
export interface Judgement {
  /** A gateway-side failure (counts against the replica's passive health); never a vendor's verdict. */
  readonly gatewaySide: boolean
  /** Short text for logs and error details (never an expression's output). */
  readonly why: string
  /** The leg's error if this failure ends it; `extra` goes to the log and the ERROR frame's parameters. */
  readonly error: GatewayError
  readonly extra: Record<string, unknown>
  /** The mapping's meaning of the vendor's close code (`audio.closeCodes`), when it has one. */
  readonly closeClass: CloseClass | null
  /** The same answer would come from every replica (a refused credential, a bad request): end, never walk. */
  readonly final: boolean
}

/**
 * The vendor's close reason as it may be shown: control characters removed, every value in `secrets`
 * (what the gateway sent the vendor: its credential and header values) replaced, bounded.
 */
export function vendorReason(reason: string, secrets: readonly string[]): string {
  let out = ''
  for (const ch of reason) out += ch < ' ' || ch === '\u007f' ? ' ' : ch
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join('[redacted]')
  return out.length > REASON_CHARS ? `${out.slice(0, REASON_CHARS - 1)}…` : out
}

/** What a replica's vendor could echo back: its credential and header values. */
export function replicaSecrets(r: Replica): string[] {
  const c = r.config
  return [...(c.credential === undefined ? [] : [c.credential]), ...Object.values(c.headers ?? {})]
}

/**
 * Judge a connection failure. `when`: before readiness (refused) or after (lost). Only gateway-side
 * failures count against a replica: connect/TLS errors, an upgrade answered 5xx, abnormal closes
 * (1006/1011), missed pongs, no readiness in time; never a vendor 4xx, a graceful close or a refusal.
 */
export function judge(
  f: VendorFailure,
  when: 'refused' | 'lost',
  closeCodes: Readonly<Record<number, CloseClass>> = {},
  secrets: readonly string[] = []
): Judgement {
  if (f.kind === 'closed' && closeCodes[f.code] !== undefined)
    return judgeClassified(f, when, closeCodes[f.code], secrets)
  return { ...judgeUnclassified(f, when), closeClass: null, final: false }
}

/**
 * A close code the mapping classifies: auth and bad-request end the leg (UPSTREAM_REFUSED: every
 * replica would answer the same), rate-exceeded and transient fail over (with backoff). Never charged
 * to the replica's passive health: it is the vendor's verdict; the session-open breaker still counts it.
 */
function judgeClassified(
  f: Extract<VendorFailure, { kind: 'closed' }>,
  when: 'refused' | 'lost',
  cls: CloseClass,
  secrets: readonly string[]
): Judgement {
  const reason = vendorReason(f.reason, secrets)
  const final = cls === 'auth' || cls === 'bad-request'
  const what =
    cls === 'auth' ? 'refused the credential' : cls === 'bad-request' ? 'refused the request' : 'ended the session'
  const why = `vendor ${what}: close ${f.code} (${cls})${reason === '' ? '' : ` ${reason}`}`
  const code = final || when === 'refused' ? 'UPSTREAM_REFUSED' : 'UPSTREAM_CLOSED'
  return {
    gatewaySide: false,
    why,
    error: new GatewayError(code, { detail: `vendor ${what} (close ${f.code}, ${cls})` }),
    extra: { vendorCloseCode: f.code, vendorCloseClass: cls, vendorCloseReason: reason },
    closeClass: cls,
    final
  }
}

function judgeUnclassified(f: VendorFailure, when: 'refused' | 'lost'): Omit<Judgement, 'closeClass' | 'final'> {
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
 * affinity first), and, while recovering, the backoff and the deadline (`failoverTimeoutSeconds` from
 * the loss). Backoff is exponential with equal jitter (`random`: injectable for tests), between rounds
 * of one incident and across incidents: a loss within `recoveryBackoff.stableSeconds` of the last
 * ready waits before its first attempt, so a vendor that ends every session quickly sees few.
 *
 * A recovery never goes back to the replica it is leaving, nor to one failing right now (a session of
 * this process failed on it gateway-side: upstream/pool.ts `failing`), until that replica has proven
 * itself again: a session on it that answers (ready, a pong, a message), or a probe that passes. Such
 * replicas are held back as suspects; when a round has no other candidate, the session asks for their
 * proof (`proveSuspects`: one probe of the route's kind each, at once) and tries only those that pass.
 * So the first replacement attempt goes where an upgrade will be answered.
 */
export class ReplicaWalk {
  private candidates: Replica[] = []
  /** This round's replicas held back until proven (failing, or the one being left). */
  private suspects: Replica[] = []
  private attempt = 0
  private deadline = 0
  private readyAt = Number.NEGATIVE_INFINITY
  /** A loss since the last stable session: the next one within `stableSeconds` of a ready waits. */
  private repeated = false
  /** The lost replica's proofs of life when it was left: it is proven again once they grow. */
  private lostProofs = 0
  /** When audio stopped reaching the vendor (its last sign of life, clock ms) and which replica was lost. */
  lostAt = 0
  lostReplica: Replica | null = null
  /** Why the last attempt failed, for the error that ends the walk. */
  lastError: string | null = null

  /** Why no replica took over within `seconds`: the leg's error detail, naming the last failure. */
  timeoutDetail(seconds: number): string {
    return `no replica could take over within ${seconds} s (last: ${this.lastError ?? 'none available'})`
  }

  constructor(
    private readonly pool: UpstreamPool,
    private readonly settings: AudioSettings,
    private readonly clock: Clock,
    private readonly random: () => number = Math.random
  ) {}

  /**
   * The first open: `preferred` first when it is healthy and not failing (affinity), then by balancing
   * (replicas failing right now last). False when none is available.
   */
  begin(preferred: Replica | null): boolean {
    const all = this.pool.audioCandidates()
    this.candidates = preferred?.healthy && !preferred.failing ? [preferred, ...all.filter(r => r !== preferred)] : all
    this.suspects = []
    return this.candidates.length > 0
  }

  /**
   * A loss mid-call: the deadline starts now, the gap at `lastLifeAt` (the lost connection's last sign
   * of life, when known), and the lost replica is a suspect. Returns ms to wait before the first
   * attempt: 0 for the first loss since a stable session (one that lasted `stableSeconds`), else the
   * next backoff step (the steps carry across incidents until a session is stable).
   */
  beginRecovery(lost: Replica, lastLifeAt: number | null = null): number {
    const now = this.clock.now()
    this.lostAt = lastLifeAt !== null && lastLifeAt < now ? lastLifeAt : now
    this.deadline = now + this.settings.failoverTimeoutSeconds * 1000
    this.lostReplica = lost
    this.lostProofs = lost.proofs
    this.round(this.pool.audioCandidates(new Set([lost])))
    if (now - this.readyAt >= this.settings.recoveryBackoff.stableSeconds * 1000) {
      this.attempt = 0
      this.repeated = false
    }
    if (!this.repeated) {
      this.repeated = true
      return 0
    }
    return this.backoff() ?? 0
  }

  next(): Replica | undefined {
    return this.candidates.shift()
  }

  /** Whether another replica is left to try in this round (suspects not counted until proven). */
  get hasNext(): boolean {
    return this.candidates.length > 0
  }

  /** Whether this round held replicas back that a proof could admit. */
  get hasSuspects(): boolean {
    return this.suspects.length > 0
  }

  /**
   * Prove this round's suspects, each with one probe now (shared with every other session proving the
   * same replica: upstream/pool.ts `prove`); those that pass join the round, in order. True when one did.
   */
  async proveSuspects(): Promise<boolean> {
    const suspects = this.suspects
    this.suspects = []
    const ok = await Promise.all(suspects.map(r => this.pool.prove(r, r === this.lostReplica)))
    this.candidates.push(...suspects.filter((_, i) => ok[i]))
    return this.candidates.length > 0
  }

  /** Every candidate failed while recovering: ms to wait before the next round, or null past the deadline. */
  backoff(): number | null {
    const now = this.clock.now()
    if (now >= this.deadline) return null
    const { baseMs, maxMs } = this.settings.recoveryBackoff
    const cap = Math.min(maxMs, baseMs * 2 ** Math.min(this.attempt, 30))
    const wait = Math.min(cap / 2 + (this.random() * cap) / 2, this.deadline - now)
    this.attempt++
    return wait
  }

  /**
   * A new round after the backoff. Never eject the last replica in effect: with none healthy, the lost one
   * is a candidate again (held off by the breaker: not even that), as a suspect until proven.
   */
  refill(): void {
    const lost = this.lostReplica
    let all = this.pool.audioCandidates(lost === null ? undefined : new Set([lost]))
    if (all.length === 0 && lost?.config.audio !== undefined && !lost.benched) all = [lost]
    this.round(all)
  }

  /**
   * A round over `all` (in order): proven replicas are candidates, the others suspects. A route with no
   * probe cannot prove a replica but by a session: there the suspects are candidates after the others.
   */
  private round(all: readonly Replica[]): void {
    const proven = all.filter(r => !this.suspect(r))
    const suspects = all.filter(r => this.suspect(r))
    if (this.pool.probe === null) {
      this.candidates = [...proven, ...suspects]
      this.suspects = []
    } else {
      this.candidates = proven
      this.suspects = suspects
    }
  }

  private suspect(r: Replica): boolean {
    return r.failing || (r === this.lostReplica && r.proofs === this.lostProofs)
  }

  /** A vendor session is ready (the first, or a replacement): the seconds audio did not flow. */
  recovered(): number {
    this.readyAt = this.clock.now()
    return this.gapSeconds()
  }

  gapSeconds(): number {
    return (this.clock.now() - this.lostAt) / 1000
  }
}
