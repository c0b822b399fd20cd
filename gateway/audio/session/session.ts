import { Timer } from '../../clock'
import { type ErrorCode, GatewayError } from '../../errors'
import type { AudioMapping } from '../../mapping/compile'
import type { MappingInput } from '../../mapping/run'
import type { Logger } from '../../telemetry/log'
import type { LegCounters } from '../../telemetry/metrics'
import type { ContinuedSession } from '../../store/port'
import type { Replica } from '../../upstream/pool'
import type {
  Connection,
  ConnectionContext,
  ConnectionEvents,
  ConnectionFactory
} from '../connection/connection-contract'
import { writeAffinity } from './affinity'
import { FailoverReport } from './failover-report'
import { Handover } from './handover'
import { judge, ReplicaWalk, replicaSecrets } from './failover'
import type { VendorFeed } from '../feed/feed'
import { ResultTimeline } from '../feed/result-timeline'
import type { Session, SessionDeps, SessionFailure, SessionEvents, SessionState } from './session-contract'
import { afterFailure, FLOWING, KEEPS } from './session-states'
import { audioMappingOf, newConnection, sessionContext, sessionFeed } from './session-parts'
import { RetryPacer } from './session-retry'
import { KeptResults } from './kept-results'
import { SessionStats } from './session-stats'
import { sessionOver } from './teardown'

/**
 * The vendor side of one call leg, as a state machine over its vendor connections. It may outlive a
 * platform connection: when the platform drops (a lost connection, a hold), the session is parked for
 * `reattachGraceSeconds` and a leg that comes back with the same busNo, contactId and perspective
 * continues it. When the vendor connection fails mid-call the session opens a replacement (another
 * healthy replica first), replays the recent audio the failed one may not have processed, then
 * continues with the audio queued meanwhile. Audio itself goes through `feed` and never through here.
 */
export class VendorSession implements Session {
  state: SessionState = 'OPENING'
  /** Set by `handOff`: the close reason, and the affinity stays for the next instance. */
  private handedOff: string | null = null
  readonly counters: LegCounters
  readonly stats = new SessionStats()
  private readonly parkedResults = new KeptResults()
  /** Each final once (audio/feed/result-timeline.ts), when the mapping says where its results are. */
  private readonly results: ResultTimeline | null
  readonly feed: VendorFeed
  attached: SessionEvents | null
  /** The connection audio goes to (null while none is ready or being opened). */
  private conn: Connection | null = null
  /** A replacement made ready while `conn` still carries audio (rotation, a vendor's reconnect, a move). */
  private readonly handover: Handover
  private readonly walk: ReplicaWalk
  private readonly report: FailoverReport
  private readonly ctx: ConnectionContext
  private readonly events: ConnectionEvents
  private readonly connect: ConnectionFactory
  private readonly retry: RetryPacer
  private readonly parkTimer: Timer
  /** The route's audio mapping (a vendor session exists only on a route that has one). */
  private readonly audio: AudioMapping
  private vendorParams: Record<string, unknown> = {}
  /** When `conn` was opened (clock ms), for the replica's session-open breaker; and the one a full hold buffer moved to. */
  private connOpenedAt = 0
  private holdMovedTo: Connection | null = null

  constructor(
    private readonly deps: SessionDeps,
    leg: SessionEvents,
    private input: MappingInput,
    readonly key: string,
    readonly id: string
  ) {
    this.attached = leg
    const audio = audioMappingOf(deps.route)
    this.audio = audio
    this.parkTimer = new Timer(deps.clock)
    this.counters = deps.metrics.startLeg(deps.route.name)
    this.results = audio.time != null ? new ResultTimeline(audio.frames.channels ?? 1) : null
    this.feed = sessionFeed(deps, audio, this.counters, this.results, {
      overflow: code => this.fail({ kind: 'fatal', error: new GatewayError(code) }),
      holdFull: () => this.holdFull()
    })
    this.connect = deps.connect ?? newConnection
    this.walk = new ReplicaWalk(deps.route.pool, deps.settings, deps.clock, deps.random)
    this.retry = new RetryPacer(deps.clock, this.walk, {
      recovering: () => this.state === 'RECOVERING',
      idle: () => this.state === 'RECOVERING' && this.conn === null,
      tryNext: () => this.tryNext(),
      timedOut: () => this.timedOut()
    })
    this.ctx = sessionContext(deps, this.counters, this.results, err => {
      this.ctx.log.error({ event: 'session_bug', err }, 'unexpected error in vendor session control work')
      this.fail({ kind: 'fatal', error: new GatewayError('INTERNAL') })
    })
    this.report = new FailoverReport(deps.metrics, deps.route.name, this.counters, this.ctx, this.stats, (name, a) =>
      this.attached?.sessionEvent(name, a)
    )
    this.events = {
      ready: (conn, params) => this.connectionReady(conn, params),
      refused: (conn, failure) => this.fail({ kind: 'connection', conn, failure, when: 'refused' }),
      lost: (conn, failure) => this.fail({ kind: 'connection', conn, failure, when: 'lost' }),
      result: (text, channel) => this.deliver(text, channel),
      replicaDown: conn => this.replicaDownWhileParked(conn),
      reconnect: conn => this.handover.begin(conn),
      move: (conn, to) => this.handover.begin(conn, to),
      unconfirmed: conn => this.report.unconfirmed(conn.replica, this.feed.framesLost(conn.lossReport?.() ?? null))
    }
    this.handover = new Handover({
      clock: deps.clock,
      rotateAfterMs: audio.rotateAfterMs,
      current: () => (this.state === 'READY' ? this.conn : null),
      open: (to, input) => this.connect(this.ctx, to, input, this.events),
      input: () => this.input,
      tookOver: (conn, old, held) => this.tookOver(conn, old, held),
      log: () => this.ctx.log
    })
  }

  /** A parked session has nobody to fail over for: its replica going down ends it with the close sequence, not 1006. */
  private replicaDownWhileParked(conn: Connection): boolean {
    if (this.attached !== null || conn !== this.conn) return false
    this.ctx.log.info(
      { event: 'parked_session_replica_down', upstream: conn.replica.name },
      'the replica of a parked vendor session was marked down; closing the session gracefully'
    )
    this.close(true)
    return true
  }

  readVendor(on: boolean): void {
    if (on) this.conn?.resume()
    else this.conn?.pause()
  }

  // ---- opening ---------------------------------------------------------------------------------
  /** Open the first vendor connection, on `preferred` first when given (affinity), else by balancing. */
  start(preferred: Replica | null, continued?: ContinuedSession): void {
    if (continued !== undefined) this.input = { ...this.input, continued }
    if (this.walk.begin(preferred)) this.tryNext()
    else this.fatal('NO_HEALTHY_UPSTREAM')
  }

  /** The next replica of the walk; when none is left, the first open gives up and a recovery waits. */
  private tryNext(): void {
    if (this.state === 'CLOSED') return
    const replica = this.walk.next()
    if (replica !== undefined) {
      this.connOpenedAt = this.deps.clock.now()
      this.conn = this.connect(this.ctx, replica, this.input, this.events)
    } else if (this.state === 'OPENING') this.fatal('UPSTREAM_UNREACHABLE', this.walk.lastError ?? undefined)
    else if (this.walk.hasSuspects) this.retry.prove()
    else this.retry.backoff()
  }

  private fatal(code: ErrorCode, detail?: string): void {
    this.fail({ kind: 'fatal', error: new GatewayError(code, { detail }) })
  }

  /** No replica could take over within the failover deadline: the leg ends. */
  private timedOut(): void {
    this.report.timedOut()
    const detail = this.walk.timeoutDetail(this.deps.settings.failoverTimeoutSeconds)
    this.fatal('UPSTREAM_CLOSED', detail)
  }

  /** A connection is ready: the first one (CONNECTED), a failover's replacement, or a rotation's next one. */
  private connectionReady(conn: Connection, params: Record<string, unknown>): void {
    if (this.conn !== null && this.handover.ready(conn, this.conn)) return
    if (conn !== this.conn) return
    this.attached?.sessionEvent('vendor.connected', { upstream: conn.replica.name })
    if (this.state === 'RECOVERING')
      this.report.done(conn.replica, this.walk.lostReplica, this.walk.recovered(), this.feed.queued)
    else {
      this.walk.recovered()
      this.vendorParams = params
    }
    this.state = 'READY'
    this.stats.flowsTo(conn.replica.name)
    this.setAffinity(conn, 86400)
    this.handover.arm()
    this.tellOwner()
    conn.startFrame = this.feed.nextFrame
    this.feed.flowTo(conn)
  }

  private tellOwner(): void {
    if (this.attached !== null && FLOWING[this.state]) this.attached.sessionReady({ ...this.vendorParams })
  }

  private deliver(text: string, channel: number | null = null): void {
    const leg = this.attached
    this.deps.metrics.vendorMessages.inc({ route: this.deps.route.name, result: leg === null ? 'parked' : 'emitted' })
    if (leg !== null) leg.deliver(text, channel)
    else this.parkedResults.keep(text, channel)
  }

  private setAffinity(conn: Connection, ttlSeconds: number, continued?: ContinuedSession): void {
    writeAffinity(this.deps, this.key, this.id, conn.replica, ttlSeconds, continued)
  }

  /** A handover's connection took the audio over (session/handover.ts), from the `heldFrames` `old` held unsent. */
  private tookOver(conn: Connection, old: Connection, heldFrames: number): void {
    this.conn = conn
    conn.startFrame = this.feed.nextFrame - heldFrames
    this.feed.retarget(conn)
    this.stats.flowsTo(conn.replica.name)
    if (conn.replica !== old.replica) this.setAffinity(conn, 86400)
  }

  // ---- failure: the one verb -------------------------------------------------------------------

  /**
   * Everything that goes wrong goes through here. A connection failure counts against its replica when
   * gateway-side, then by state: the first open walks on to the next replica when one was unreachable
   * (any other answer is the vendor's and ends the leg); a loss mid-call starts a recovery; a failed
   * replacement walks on, then waits and tries another round until the deadline. A failed rotation
   * keeps the current connection. Fatal: tell the attached leg (it ends with the error), then close.
   */
  private fail(f: SessionFailure): void {
    if (this.state === 'CLOSED') return
    if (f.kind === 'fatal') return this.end(f.error, f.extra ?? {}, f.internal)
    const { conn, failure } = f
    const { pool } = this.deps.route
    const j = judge(failure, f.when, this.audio.closeCodes, replicaSecrets(conn.replica))
    const charged = failure.kind === 'unreachable' ? `connect: ${j.why}` : j.why
    if (j.gatewaySide) pool.recordFailure(conn.replica, charged, 'audio')
    if (failure.kind === 'mapping') return this.end(j.error, j.extra, failure.error)
    if (this.handover.failed(conn, j.why)) return
    if (conn !== this.conn) return
    this.conn = null
    const next = afterFailure(this.state, failure, j.final, this.walk.hasNext)
    // The breaker counts sessions lost once ready (and rate refusals): a refusal before ready is the vendor's
    // verdict on one leg's request, never a storm.
    if (next !== 'end-leg' && (f.when === 'lost' || j.closeClass === 'rate-exceeded'))
      pool.recordSessionLoss(conn.replica, this.deps.clock.now() - this.connOpenedAt, this.deps.settings.sessionBreaker)
    switch (next) {
      case 'end-leg':
        return this.end(j.error, j.extra)
      case 'end':
        return this.end(j.error, { upstream: conn.replica.name, ...j.extra })
      case 'walk':
        this.walk.lastError = j.why
        this.report.attemptFailed(conn.replica, j.why, failure.kind === 'unreachable' || this.state === 'OPENING')
        return this.tryNext()
      case 'recover':
        return this.recover(conn, j.why, j.error, j.extra)
      case 'ignore':
        return
    }
  }

  /** Lost mid-call. With a leg attached and failover enabled: open a replacement and replay. Parked: just close. */
  private recover(lost: Connection, why: string, error: GatewayError, extra: Record<string, unknown>): void {
    // A replacement that was ready (waiting for the lost one to confirm) takes over with the replay; one
    // still opening is abandoned: the replacement below starts from a clean slate.
    const ready = this.handover.takeReady()
    if (ready !== null && (this.attached === null || this.deps.settings.failoverTimeoutSeconds <= 0)) ready.abort()
    this.handover.abandon(false)
    if (this.attached === null) {
      this.ctx.log.info(
        { event: 'parked_session_lost', why },
        'parked vendor session lost; a re-attach will open a new one'
      )
      this.close(false)
      return
    }
    const loss = lost.lossReport?.() ?? null
    if (this.deps.settings.failoverTimeoutSeconds <= 0) {
      // No replay: what the vendor may not have processed is counted before the leg ends.
      this.feed.lost(loss)
      return this.end(error, extra)
    }
    this.state = 'RECOVERING'
    this.retry.restart()
    const wait = this.walk.beginRecovery(lost.replica, loss?.lastLifeAt ?? null)
    const { replayed, unreplayed } = this.feed.recover(loss, this.results?.firstOpenFrame ?? 0)
    this.report.started(lost.replica, why, replayed, unreplayed, ready === null ? wait : 0)
    if (ready !== null) {
      this.conn = ready
      this.connOpenedAt = this.deps.clock.now()
      return this.connectionReady(ready, this.vendorParams)
    }
    if (wait <= 0) return this.tryNext()
    this.retry.after(wait)
  }

  /**
   * The hold buffer is full before the first ready: the replica being opened is charged (not ready in
   * time) and the next one tried, once per connection; true while the leg goes on (the oldest held
   * audio is dropped, counted), false when no replica is left (HOLD_BUFFER_OVERFLOW).
   */
  private holdFull(): boolean {
    const conn = this.conn
    if (this.state !== 'OPENING' || conn === null) return false
    if (conn === this.holdMovedTo) return true
    if (!this.walk.hasNext) {
      this.deps.route.pool.recordFailure(conn.replica, 'not ready before the hold buffer filled', 'audio')
      return false
    }
    this.conn = null
    conn.abort()
    this.deps.route.pool.recordFailure(conn.replica, 'not ready before the hold buffer filled', 'audio')
    this.ctx.log.warn(
      { event: 'upstream_not_ready', upstream: conn.replica.name },
      'hold buffer full before the vendor was ready; trying the next replica'
    )
    this.tryNext()
    this.holdMovedTo = this.conn
    return this.state === 'OPENING'
  }

  /** The session cannot go on: tell the attached leg (it fails with `error`), then close. */
  private end(error: GatewayError, extra: Record<string, unknown>, internal?: string): void {
    if (this.state === 'RECOVERING') {
      this.feed.dropQueued()
      this.report.failed(this.walk.gapSeconds(), internal)
    }
    const leg = this.attached
    this.close(false)
    leg?.sessionFailed(error, internal === undefined ? extra : { ...extra, detail: internal })
  }

  // ---- platform side: park, re-attach, close ---------------------------------------------------

  /** The platform leg is gone. Keep the vendor session for the re-attach grace, if there is one. */
  park(): void {
    this.attached = null
    const grace = this.deps.settings.reattachGraceSeconds
    if (grace <= 0 || !KEEPS[this.state]) {
      this.close(true)
      return
    }
    this.deps.host.parked(this)
    this.feed.flushPartial()
    if (this.conn !== null) {
      this.setAffinity(this.conn, grace)
      this.conn.control('pause')
    }
    this.parkTimer.set(grace * 1000, () => {
      this.ctx.log.info({ event: 'grace_expired' }, 'no re-attach within the grace period; closing the vendor session')
      this.close(true)
    })
  }

  /** A platform leg with the same identity came back (audio/session/registry.ts `claim`): it continues this session. */
  attach(leg: SessionEvents, init: Record<string, unknown>, log: Logger): void {
    const previous = this.attached
    if (previous !== null && previous !== leg) previous.superseded()
    const conn = this.conn
    if (this.parkTimer.pending) {
      this.parkTimer.clear()
      if (this.state === 'READY' && conn !== null && this.audio.resume !== null) {
        // Audio of the returning leg waits until the resume frame is out (AudioHook refuses audio while
        // paused); the control chain is async, the audio path is not.
        this.state = 'RESUMING'
        this.feed.gate()
        conn.control('resume', () => {
          // RESUMING keeps its connection: a failure of it leaves the state (audio/session/session-states.ts).
          const current = this.conn
          if (this.state !== 'RESUMING' || current === null) return
          this.state = 'READY'
          this.feed.flowTo(current)
        })
      }
    }
    this.attached = leg
    this.ctx.log = log
    this.input = { ...this.input, init }
    this.deps.host.unparked(this)
    this.tellOwner()
    for (const r of this.parkedResults.release()) leg.deliver(r.text, r.channel)
  }

  /** Hand the call to another instance (a drain): the affinity stays for it, with what the vendor needs to continue. */
  handOff(reason: string, ttlSeconds: number): void {
    if (this.state === 'CLOSED') return
    if (this.conn !== null) this.setAffinity(this.conn, ttlSeconds, this.conn.continuation?.())
    this.handedOff = reason
    this.close(true)
  }

  /** End the session. `graceful`: queued audio, then the mapping's close frame, then the close handshake. */
  close(graceful: boolean): void {
    if (this.state === 'CLOSED') return
    const goodbye = graceful && FLOWING[this.state]
    this.state = 'CLOSED'
    this.retry.cancel()
    this.parkTimer.clear()
    this.handover.abandon(true)
    const conn = this.conn
    if (conn !== null && goodbye && conn.state === 'READY') {
      this.feed.drainTo(conn)
      conn.goodbye(this.handedOff ?? undefined)
    } else conn?.abort()
    this.feed.close()
    this.deps.host.closed(this)
    if (this.handedOff === null) sessionOver(this.deps, this.key, this.id, this.input, conn, this.ctx.group?.joinedOn)
    this.deps.metrics.endLeg(this.counters)
  }
}
