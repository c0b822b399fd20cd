import { UNKNOWN_TENANT } from '../../auth/tenant-credentials'
import type { Clock } from '../../clock'
import { CODES, type GatewayError, logLevelOf } from '../../errors'
import type { CallRecord } from '../../store/port'
import type { Logger } from '../../telemetry/log'
import type { LogLimiter } from '../../telemetry/log-limit'
import type { LegCounters, Metrics } from '../../telemetry/metrics'
import type { SpanAttributes, TraceSpan } from '../../telemetry/tracing'
import type { LegIdentity } from '../../validate/messages'
import type { Session } from '../session/session-contract'

/** What became of a leg's session when the leg ended (the summary's `session`). */
export type SessionFate = 'none' | 'parked' | 'closed' | 'handed_off' | 'taken'

/** What a leg's call tells the book (audio/leg/call-book.ts CallBook). */
export interface CallBookPort {
  placed: (call: LegCall, state: string) => void
  ended: (call: LegCall, session: Session | null, fate: SessionFate) => void
}

/** Where a call record says it is served: the gateway instance, the process, the worker's index. */
export interface CallPlace {
  readonly instance: string
  readonly process: string
  readonly worker: number | null
}

/** The W3C trace id of a `traceparent` (its second field), or undefined. */
function traceIdOf(traceparent: string | undefined): string | undefined {
  return traceparent !== undefined && traceparent.length >= 35 ? traceparent.slice(3, 35) : undefined
}

/**
 * One platform leg as an operator looks for it: its log lines (the identity every later line is bound to,
 * `leg_failed`, `platform_closed`, `leg_drained`, and `leg_summary` at its end: contract, one line per
 * leg, whatever ended it) and the call record its process publishes while it lives (audio/leg/call-book.ts,
 * `GET /admin/calls`). Reads what the leg and its session already count (audio/session/session-stats.ts); the
 * last-frame age is sampled when the record is made (the frame count moved since the last sample), so
 * the per-frame path gains nothing. Before its init is accepted anyone can open a leg: its lines are then
 * under the flood cap (telemetry/log-limit.ts), its first line deciding for all of them, so a refused or
 * abandoned leg writes its `leg_failed`, `platform_closed` and `leg_summary` lines together or not at all.
 */
export class LegCall {
  /** Wall clock of the connection, for the record. */
  readonly startedAt = new Date().toISOString()
  private readonly began: number
  identity: LegIdentity | null = null
  /** Whose leg it is (auth/route-auth.ts `Principal`), once its credential was accepted. */
  tenant: string = UNKNOWN_TENANT
  /** Vendor results sent to the platform (MESSAGE frames). */
  results = 0
  relayedTo: string | undefined
  private session: Session | null = null
  /** Where its record is published (audio/leg/call-book.ts); absent in unit tests. */
  private readonly book: CallBookPort | undefined
  /** The session's failovers and gap when this leg took it (a re-attached leg counts only its own). */
  private baseFailovers = 0
  private baseGapMs = 0
  private sampledFrames = 0
  private lastFrameAt: number | null = null
  /** Whether the lines of a leg not accepted are written (decided by its first one); null: not decided yet. */
  private voiced: boolean | null = null
  private readonly logLimit: LogLimiter | undefined

  private readonly clock: Clock
  readonly legId: string
  readonly route: string
  private readonly traceparent: string | undefined
  readonly relayedFrom: string | undefined
  /** The leg's one span: events for its moments, never per frame; ended with the leg. */
  private readonly span: TraceSpan | null
  /** Where its refusal is listed for the status page (telemetry/recent.ts). */
  private readonly recent: Metrics['recent'] | undefined

  constructor(
    leg: {
      clock: Clock
      legId: string
      route: { name: string }
      traceparent?: string
      relayed?: { from: string }
      calls?: CallBookPort
      span?: TraceSpan
      metrics?: Pick<Metrics, 'recent'>
      logLimit?: LogLimiter
    },
    private readonly counters: LegCounters
  ) {
    this.clock = leg.clock
    this.legId = leg.legId
    this.route = leg.route.name
    this.traceparent = leg.traceparent
    this.relayedFrom = leg.relayed?.from
    this.book = leg.calls
    this.logLimit = leg.logLimit
    this.began = leg.clock.now()
    this.span = leg.span?.recording === true ? leg.span : null
    this.recent = leg.metrics?.recent
    this.span?.set({
      'assist_gateway.route': this.route,
      'assist_gateway.leg_id': this.legId,
      'assist_gateway.relayed_from': this.relayedFrom
    })
  }

  /** A moment of the leg on its span (its vendor session's too: audio/session/session-contract.ts `sessionEvent`). */
  event(name: string, attributes?: SpanAttributes): void {
    this.span?.event(name, attributes)
  }

  /** A line of this leg may be written: always once its init is accepted; before, as the flood cap says for `kind`. */
  private voice(kind: string): boolean {
    if (this.identity !== null) return true
    this.voiced ??= this.logLimit?.allow(kind) ?? true
    return this.voiced
  }

  /**
   * Its init was accepted: `identity` is known and binds every later line of the leg. `contactId` and `busNo` are
   * logged as the numbers they are (exact: checkInit refuses ids above 2^53-1), so `jq '.contactId==1001'` finds them.
   */
  identified(log: Logger, id: LegIdentity, tenant: string): Logger {
    this.identity = id
    this.tenant = tenant
    this.span?.set({
      'assist_gateway.contact_id': String(id.contactId),
      'assist_gateway.bus_no': String(id.busNo),
      'assist_gateway.perspective': id.perspective
    })
    this.span?.event('handshake.accepted')
    const { perspective, requestId } = id
    return log.child({ busNo: Number(id.busNo), contactId: Number(id.contactId), perspective, requestId })
  }

  platformClosed(log: Logger, code: number, cut: string | undefined): void {
    if (!this.voice('platform_closed')) return
    log.info(
      { event: 'platform_closed', code, cut, framesFromPlatform: this.counters.framesFromPlatform },
      cut === undefined ? 'platform ended the leg' : 'the platform sent a frame the server cut the socket for'
    )
  }

  drained(log: Logger): void {
    log.info(
      { event: 'leg_drained', code: 'SHUTTING_DOWN', framesFromPlatform: this.counters.framesFromPlatform },
      'gateway draining: leg closed with 1012 so the platform reconnects to another instance'
    )
  }

  /** Its one `leg_failed` line. */
  failed(log: Logger, error: GatewayError, extra: Record<string, unknown>): void {
    const code = error.code
    this.span?.event('leg.failed', { code })
    this.recent?.add({ kind: 'refusal', hook: 'audio', route: this.route, code })
    if (!this.voice(code)) return
    log[logLevelOf(code)](
      {
        event: 'leg_failed',
        code,
        flag: CODES[code].flag,
        pointers: error.pointers.length > 0 ? error.pointers : undefined,
        ...extra
      },
      error.message
    )
  }

  /** The leg writes to `session` from now on: its record is published at once (not at the next refresh). */
  attached(session: Session, reattached: boolean): void {
    this.span?.event('placement', { where: reattached ? 'reattached' : 'here', session: session.id })
    this.session = session
    this.baseFailovers = session.stats.failovers
    this.baseGapMs = session.stats.gapMs
    this.book?.placed(this, 'CONNECTING')
  }

  /** CONNECTED went to the platform: the `connected` line, and its record (STREAMING, on its replica) goes out now. */
  connected(log: Logger, handshakeSeconds: number): void {
    this.span?.event('handshake.connected', { handshakeSeconds })
    log.info({ event: 'connected', handshakeSeconds }, 'vendor session ready; audio flowing')
    this.book?.placed(this, 'STREAMING')
  }

  /** The leg's session is owned by process `owner`: its audio goes there (its record says so at once). */
  relayed(owner: string): void {
    this.relayedTo = owner
    this.span?.event('placement', { where: 'relayed', owner })
    this.book?.placed(this, 'RELAYING')
  }

  /** The record of this leg in `state` (audio/leg/leg-contract.ts LegState, or PARKED) at `where`; null while its init is not accepted. */
  record(state: string, where: CallPlace): CallRecord | null {
    const id = this.identity
    if (id === null) return null
    const now = this.clock.now()
    const c = this.counters
    if (c.framesFromPlatform !== this.sampledFrames) {
      this.sampledFrames = c.framesFromPlatform
      this.lastFrameAt = now
    }
    const stats = this.session?.stats
    return {
      contactId: String(id.contactId),
      busNo: String(id.busNo),
      legId: this.legId,
      ...where,
      route: this.route,
      tenant: this.tenant,
      perspective: id.perspective,
      state,
      replica: stats?.replica ?? '',
      replicas: stats?.replicas.slice() ?? [],
      startedAt: this.startedAt,
      framesFromPlatform: c.framesFromPlatform,
      bytesFromPlatform: c.bytesFromPlatform,
      lastFrameAgeMs: this.lastFrameAt === null ? null : Math.round(now - this.lastFrameAt),
      failovers: (stats?.failovers ?? 0) - this.baseFailovers,
      gapMs: (stats?.gapMs ?? 0) - this.baseGapMs,
      ...(this.relayedTo === undefined ? { resultsSent: this.results } : { relayedTo: this.relayedTo }),
      ...(this.relayedFrom === undefined ? {} : { relayedFrom: this.relayedFrom }),
      at: Date.now()
    }
  }

  /** The leg ended: its summary line, and its record goes from the book (or stays, PARKED). */
  ended(log: Logger, end: { outcome: string; closeCode: number; fate: SessionFate; session: Session | null }): void {
    this.summary(log, end.outcome, end.closeCode, end.fate)
    this.book?.ended(this, end.session, end.fate)
    this.endSpan(end.outcome, end.closeCode, end.fate)
  }

  /** The span ends with the leg: what the summary says, an error status when a 5xx-class code ended it. */
  private endSpan(outcome: string, closeCode: number, fate: SessionFate): void {
    const span = this.span
    if (span === null) return
    const c = this.counters
    const stats = this.session?.stats
    const code = outcome.toUpperCase()
    span.event('close', { outcome, closeCode, session: fate })
    span.set({
      'assist_gateway.outcome': outcome === 'ok' ? 'normal' : outcome,
      'assist_gateway.close_code': closeCode,
      'assist_gateway.frames_from_platform': c.framesFromPlatform,
      'assist_gateway.bytes_from_platform': c.bytesFromPlatform,
      'assist_gateway.replicas': stats?.replicas.join(',') ?? '',
      'assist_gateway.failovers': (stats?.failovers ?? 0) - this.baseFailovers,
      'assist_gateway.gap_ms': (stats?.gapMs ?? 0) - this.baseGapMs,
      'assist_gateway.results_sent': this.results
    })
    span.end(code in CODES && CODES[code as keyof typeof CODES].status >= 500 ? code : undefined)
  }

  /**
   * The leg's one `leg_summary` line. `log` carries the leg's bindings (route, legId, clientAddress, and
   * once its init is accepted busNo, contactId, perspective, requestId), so they are not repeated here.
   * `outcome`: the `audio_sessions_total` outcome ('ok' written as 'normal', an error code as the code).
   */
  summary(log: Logger, outcome: string, closeCode: number, fate: SessionFate): void {
    const c = this.counters
    const stats = this.session?.stats
    const code = outcome.toUpperCase()
    if (!this.voice(code)) return
    log.info(
      {
        event: 'leg_summary',
        tenant: this.tenant,
        durationMs: Math.round(this.clock.now() - this.began),
        framesFromPlatform: c.framesFromPlatform,
        bytesFromPlatform: c.bytesFromPlatform,
        replica: stats?.replica || undefined,
        replicas: stats?.replicas.slice() ?? [],
        failovers: (stats?.failovers ?? 0) - this.baseFailovers,
        gapMs: (stats?.gapMs ?? 0) - this.baseGapMs,
        resultsSent: this.relayedTo === undefined ? this.results : undefined,
        outcome: outcome === 'ok' ? 'normal' : code in CODES ? code : outcome,
        closeCode,
        session: fate,
        relayedTo: this.relayedTo,
        relayedFrom: this.relayedFrom,
        traceId: traceIdOf(this.traceparent)
      },
      'leg ended'
    )
  }
}
