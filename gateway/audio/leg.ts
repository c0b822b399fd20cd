import type { TimerHandle } from '../clock'
import { CODES, GatewayError, logLevelOf, type ErrorCode } from '../errors'
import type { MappingInput } from '../mapping/run'
import type { Logger } from '../telemetry/log'
import type { LegCounters } from '../telemetry/metrics'
import type { Problem } from '../validate/compile'
import { EarlyResults } from './early-results'
import { checkHandshake, connectedFrame, errorFrame, type HandshakeCheck } from './handshake'
import { ForwardedLeg, type JoinDirectory, type JoinPlace, joinKeyOf } from './join-relay'
import { openLegSession, startLegSession } from './leg-session'
import type { Session, SessionOwner } from './session-contract'
import { LegTees } from './tee'
import { BINARY_IN, type LegDeps, type LegState, type PlatformLeg } from './leg-contract'

export type { LegDeps, LegState, PlatformLeg } from './leg-contract'

/**
 * One platform audio leg: handshake, then hands audio to its vendor session (audio/session.ts) and
 * results back to the platform. The per-frame path is `onPlatformBinary` → `AudioRelay.write` →
 * `VendorConnection.writeAudio` → `VendorSocket.sendBinary`: no parse, no await, no log, no
 * allocation, no prom-client call.
 */
export class AudioLeg implements SessionOwner {
  state: LegState = 'AWAIT_INIT'
  readonly counters: LegCounters
  private session: Session | null = null
  private handshakeTimer: TimerHandle | null
  private vendorPaused = false
  private log: Logger
  private initAt = 0
  /** Results held until CONNECTED (bounded; the platform never sees MESSAGE first). */
  private readonly early: EarlyResults
  /** Audio that came while the init message's credential was being verified (null: not verifying). */
  private held: ArrayBuffer[] | null = null
  private heldBytes = 0
  /** Fan-out (route `tee`): the same audio to each tee vendor, from the init to the end of the leg. */
  private tees: LegTees | null = null
  /** A refusal is waiting out `auth.failureDelayMs`: frames meanwhile are dropped. */
  private refusing = false
  /** Gives back this leg's place under limits.legsPerRoute/legsPerClient. */
  private releasePlace: (() => void) | null = null
  /** A join leg relayed to the process that holds its call (audio/join-relay.ts); its init message as sent. */
  private forward: ForwardedLeg | null = null
  private initText = ''

  constructor(
    private readonly platform: PlatformLeg,
    private readonly deps: LegDeps
  ) {
    this.counters = deps.metrics.startLeg(deps.route.name)
    this.counters.active = true
    this.log = deps.log
    this.early = new EarlyResults((n, first) => this.countEarlyDropped(first, n))
    this.handshakeTimer = deps.clock.setTimeout(() => {
      this.handshakeTimer = null
      if (this.state === 'AWAIT_INIT') this.fail(new GatewayError('HANDSHAKE_TIMEOUT'))
    }, deps.settings.handshakeTimeoutSeconds * 1000)
  }

  // ---- platform events -------------------------------------------------------------------------

  /** Per-frame path. `data` is only valid during this call. */
  onPlatformBinary(data: ArrayBuffer): void {
    const c = this.counters
    c.framesFromPlatform++
    c.bytesFromPlatform += data.byteLength
    const forward = this.forward
    if (forward !== null) return forward.write(data)
    const session = this.session
    if (session !== null && this.state !== 'CLOSED') {
      session.relay.write(data)
      if (this.tees !== null) this.tees.write(data)
      return
    }
    if (this.refusing) return
    if (this.held !== null && this.state !== 'CLOSED') return this.hold(data)
    if (BINARY_IN[this.state] === 'refuse') this.fail(new GatewayError('FIRST_FRAME_NOT_TEXT'))
    else c.dropAfterClose++
  }

  onPlatformText(data: ArrayBuffer): void {
    if (this.refusing) return
    if (this.state !== 'AWAIT_INIT') {
      // The interface sends only audio after the init message; a stray text frame is ignored, not fatal.
      this.log.debug({ event: 'platform_text_ignored', state: this.state }, 'text frame after the init message ignored')
      return
    }
    if (data.byteLength > (this.deps.initMessageBytes ?? Number.POSITIVE_INFINITY)) {
      this.deps.metrics.limitRefusals.inc({ limit: 'init_size', hook: 'audio' })
      return this.refuse('MESSAGE_TOO_LARGE')
    }
    this.onInit(Buffer.from(data).toString('utf8'))
  }

  /** The platform's socket drained below its backpressure: resume reading from the vendor. */
  onPlatformDrain(): void {
    if (this.vendorPaused && this.platform.bufferedAmount() < this.deps.platformHighWaterBytes) {
      this.vendorPaused = false
      this.session?.resumeVendor()
      this.forward?.resume()
    }
  }

  /**
   * The platform socket closed (by the platform, or after our own `end`). Idempotent. `cut`: uWS cut the
   * socket for a frame it will not deliver (over its read limit, or text that is not UTF-8); the leg
   * ends with that outcome, not `ok`/`abandoned`.
   */
  onPlatformClose(code: number, cut?: 'too_large_cut' | 'invalid_utf8'): void {
    this.deps.metrics.wsCloses.inc({ side: 'platform', code: String(code) })
    if (this.state === 'CLOSED') return
    const wasStreaming = this.state === 'STREAMING'
    this.state = 'CLOSED'
    if (cut !== undefined) this.deps.metrics.validationFailures.inc({ hook: 'audio' })
    this.log.info(
      { event: 'platform_closed', code, cut, framesFromPlatform: this.counters.framesFromPlatform },
      cut === undefined ? 'platform ended the leg' : 'the platform sent a frame the server cut the socket for'
    )
    this.early.drop()
    this.release(this.forward !== null ? 'relayed' : (cut ?? (wasStreaming ? 'ok' : 'abandoned')))
    // Streaming: the vendor session waits for a re-attach (grace), then says goodbye. Not yet
    // streaming: nobody will come back for it.
    const session = this.session
    this.session = null
    if (session !== null && session.owner === this) {
      if (wasStreaming) session.park()
      else session.close(false)
    }
  }

  /** A platform frame the leg will not take (over `uws.maxPayloadBytes`): ERROR with this code, then its close code. */
  refuse(code: ErrorCode): void {
    if (this.state === 'CLOSED') return
    this.counters.framesFromPlatform++
    this.deps.metrics.validationFailures.inc({ hook: 'audio' })
    if (this.state !== 'AWAIT_INIT') this.deps.metrics.limitRefusals.inc({ limit: 'frame_size', hook: 'audio' })
    this.fail(new GatewayError(code))
  }

  /** End the leg from outside (shutdown): one ERROR frame with this code, then its close code. */
  shutdown(code: ErrorCode): void {
    this.fail(new GatewayError(code))
  }

  /**
   * Shutdown drain: the platform reconnects elsewhere and the leg continues there. One ERROR
   * SHUTTING_DOWN frame and 1012; a streaming leg's vendor session says goodbye with an honest reason
   * and keeps its affinity (`ttlSeconds`) so the next instance uses the same replica. Logged at info.
   */
  drain(ttlSeconds: number): void {
    if (this.state === 'CLOSED') return
    const wasStreaming = this.state === 'STREAMING'
    this.state = 'CLOSED'
    this.log.info(
      { event: 'leg_drained', code: 'SHUTTING_DOWN', framesFromPlatform: this.counters.framesFromPlatform },
      'gateway draining: leg closed with 1012 so the platform reconnects to another instance'
    )
    if (this.platform.sendText(errorFrame(new GatewayError('SHUTTING_DOWN'))) !== 2) this.counters.framesToPlatform++
    this.release(this.forward !== null ? 'relayed' : 'shutting_down')
    const session = this.session
    this.session = null
    if (session !== null && session.owner === this) {
      if (wasStreaming) session.handOff('gateway instance draining; the leg continues on another instance', ttlSeconds)
      else session.close(true)
    }
    this.platform.end(CODES.SHUTTING_DOWN.close, 'SHUTTING_DOWN')
  }

  // ---- handshake -------------------------------------------------------------------------------

  /**
   * The init message. When its checks are asynchronous (token verification), audio meanwhile is held
   * (copied, up to `audio.holdBufferBytes`) for the session; another text frame meanwhile is ignored.
   */
  private onInit(text: string): void {
    if (this.held !== null) return
    const retryAfterSeconds = this.deps.guard?.retryAfterSeconds(this.deps.clientAddress ?? '') ?? 0
    if (retryAfterSeconds > 0) {
      this.deps.metrics.limitRefusals.inc({ limit: 'failure_budget', hook: 'audio' })
      return this.fail(new GatewayError('TOO_MANY_FAILURES'), [], { retryAfterSeconds })
    }
    if (this.deps.joins !== undefined && this.deps.route.config.join !== undefined) this.initText = text
    const checked = checkHandshake(this.deps.route, text)
    if (!(checked instanceof Promise)) return this.initChecked(checked)
    this.held = []
    checked.then(
      checked => {
        const held = this.held ?? []
        this.held = null
        if (this.state !== 'AWAIT_INIT') return
        this.initChecked(checked)
        // Still held (a join leg being placed): these frames go first, with the rest.
        const placing = this.held as ArrayBuffer[] | null
        if (placing !== null) return void placing.unshift(...held)
        for (const b of held) {
          this.session?.relay.write(b)
          this.tees?.write(b)
        }
      },
      (err: unknown) => {
        this.log.error({ event: 'handshake_bug', err }, 'unexpected error while checking the init message')
        this.fail(new GatewayError('INTERNAL'))
      }
    )
  }

  private hold(data: ArrayBuffer): void {
    this.heldBytes += data.byteLength
    if (this.heldBytes > this.deps.settings.holdBufferBytes) return this.fail(new GatewayError('HOLD_BUFFER_OVERFLOW'))
    this.held?.push(data.slice(0)) // a copy: `data` is only valid during the call
  }

  private initChecked(checked: HandshakeCheck): void {
    const { route, metrics, registry } = this.deps
    if (!checked.ok) {
      if (checked.stage !== 'auth') {
        metrics.validationFailures.inc({ hook: 'audio' })
        return this.fail(checked.error, checked.problems)
      }
      metrics.authFailures.inc({ hook: 'audio', reason: checked.reason ?? 'invalid' })
      return this.refuseAuth(checked.error)
    }
    if (this.handshakeTimer !== null) {
      this.deps.clock.clearTimeout(this.handshakeTimer)
      this.handshakeTimer = null
    }
    const id = checked.identity
    this.log = this.log.child({
      busNo: id.busNo,
      contactId: id.contactId,
      perspective: id.perspective,
      requestId: id.requestId
    })
    this.state = 'CONNECTING'
    this.initAt = this.deps.clock.now()
    const key = `${route.name}:${id.busNo}:${id.contactId}:${id.perspective}`

    // Re-attach: the same identity came back while its session is kept here; only by the caller that opened it.
    const existing = registry.claim(key, this, checked.init, this.log, checked.caller)
    if (existing === 'refused') return this.callerMismatch()
    // A join leg whose call may be held by another process: ask where (audio is held meanwhile).
    if (existing === null && this.deps.joins !== undefined && route.config.join !== undefined && this.held === null)
      return this.placeJoined(this.deps.joins, checked, key)
    this.admit(checked, key, existing)
  }

  /** Limits, tees, then the leg's session: the one it re-attached to, or a new one (joined, or its own). */
  private admit(checked: Extract<HandshakeCheck, { ok: true }>, key: string, existing: Session | null): void {
    const { route, metrics } = this.deps
    const id = checked.identity
    const place = this.deps.legLimits?.acquire(route.name, checked.caller, existing !== null) ?? null
    if (typeof place === 'string') {
      metrics.limitRefusals.inc({ limit: place, hook: 'audio' })
      return this.fail(new GatewayError('LEG_LIMIT', { detail: place }), [], { limit: place })
    }
    this.releasePlace = place
    if (route.tees !== undefined) this.startTees(checked.init, { id: this.deps.legId, route: route.name, ...id })
    if (existing !== null) {
      this.session = existing
      metrics.reattach.inc({ route: route.name, result: 'same_session' })
      this.log.info({ event: 'reattached', session: existing.id }, 'leg re-attached to its vendor session')
      return
    }

    const session = openLegSession(this.deps, this, this.log, checked, key)
    if (session instanceof GatewayError) return this.fail(session)
    this.session = session
    startLegSession(this.deps, session, this.log, checked, key, () => {
      if (this.session === session) this.session = null
      this.callerMismatch()
    })
  }

  // ---- a join leg's place (audio/join-relay.ts) --------------------------------------------------

  private placeJoined(joins: JoinDirectory, checked: Extract<HandshakeCheck, { ok: true }>, key: string): void {
    this.held = []
    const call = joinKeyOf(this.deps.route.name, checked.identity)
    const arrived = this.deps.relayedIn ?? null
    joins.place(call, arrived).then(
      place =>
        this.joinPlaced(
          place,
          checked,
          key,
          place.kind === 'relay' ? () => joins.takeOver(call, place.owner, arrived) : null
        ),
      () => this.joinPlaced({ kind: 'here' }, checked, key, null)
    )
  }

  private joinPlaced(
    place: JoinPlace,
    checked: Extract<HandshakeCheck, { ok: true }>,
    key: string,
    takeOver: (() => Promise<JoinPlace>) | null
  ): void {
    if (this.state !== 'CONNECTING') return
    const { route, metrics } = this.deps
    if (place.kind === 'here') {
      if (place.unreachable !== undefined) {
        metrics.joins.inc({ route: route.name, result: 'relay_failed' })
        this.log.warn(
          { event: 'join_split', why: place.unreachable },
          "the call's joined session is on another process this leg cannot reach: joined here alone"
        )
      }
      const held = this.held ?? []
      this.held = null
      this.admit(checked, key, null)
      for (const b of held) {
        this.session?.relay.write(b)
        this.tees?.write(b)
      }
      return
    }
    const forward = new ForwardedLeg(
      place,
      route.name,
      this.initText,
      this.counters,
      this.deps.traceparent,
      this.deps.clientAddress ?? '',
      this.deps.settings,
      this.deps.clock,
      {
        opened: () => {
          if (this.forward !== forward) return
          this.state = 'STREAMING'
          metrics.joins.inc({ route: route.name, result: 'relayed' })
          this.log.info(
            { event: 'join_relayed', to: place.owner.instance, hop: place.hop },
            "leg relayed to its call's joined session"
          )
        },
        text: text => {
          if (this.forward === forward) this.sendToPlatform(text)
        },
        ended: (code, reason) => {
          if (this.forward !== forward || this.state === 'CLOSED') return
          this.state = 'CLOSED'
          this.release('relayed')
          this.platform.end(code, reason)
        },
        unreachable: why => {
          if (this.forward !== forward || this.state === 'CLOSED') return
          this.forward = null
          this.held = forward.takeHeld()
          this.log.warn(
            { event: 'join_owner_unreachable', owner: place.owner.instance, why },
            "the call's joined session could not be reached: taking the call over"
          )
          // Served here either way (the call is split): holding it from now, if nobody else took it meanwhile.
          const here = (): void => this.joinPlaced({ kind: 'here', unreachable: why }, checked, key, null)
          if (takeOver === null) here()
          else takeOver().then(here, here)
        },
        // The leg ends here with its own outcome (no owner counts it): the relay is dropped first.
        lost: why => {
          if (this.forward !== forward) return
          this.forward = null
          this.fail(new GatewayError('UPSTREAM_CLOSED', { detail: `join owner lost: ${why}` }))
        },
        overflow: () => {
          if (this.forward !== forward) return
          this.forward = null
          forward.close()
          this.fail(new GatewayError('HOLD_BUFFER_OVERFLOW'))
        }
      }
    )
    this.forward = forward
    const held = this.held ?? []
    this.held = null
    for (const b of held) forward.write(b)
  }

  /** The route's tee vendors (audio/tee.ts): their results reach the platform only through `deliver`, tagged. */
  private startTees(init: Record<string, unknown>, leg: MappingInput['leg']): void {
    const high = this.deps.platformHighWaterBytes
    const forward = (text: string): void => this.deliver(text)
    const platformBackedUp = (): boolean => this.platform.bufferedAmount() >= high
    this.tees = new LegTees({ ...this.deps, log: this.log, forward, platformBackedUp }, init, leg)
  }

  // ---- session events (SessionOwner) ------------------------------------------------------------

  sessionReady(vendorParameters: Record<string, unknown>): void {
    if (this.state !== 'CONNECTING') return
    this.state = 'STREAMING'
    const seconds = (this.deps.clock.now() - this.initAt) / 1000
    this.deps.metrics.handshakeDuration.observe({ route: this.deps.route.name }, seconds)
    this.sendToPlatform(connectedFrame({ ...vendorParameters, legId: this.deps.legId, route: this.deps.route.name }))
    for (const text of this.early.release()) this.sendToPlatform(text)
    this.log.info({ event: 'connected', handshakeSeconds: seconds }, 'vendor session ready; audio flowing')
  }

  sessionFailed(error: GatewayError, extra: Record<string, unknown>): void {
    this.session = null
    this.fail(error, [], extra)
  }

  deliver(text: string): void {
    if (this.state !== 'CONNECTING') {
      this.sendToPlatform(text)
      return
    }
    this.early.hold(text)
  }

  private countEarlyDropped(first: boolean, n: number): void {
    this.deps.metrics.vendorMessages.inc({ route: this.deps.route.name, result: 'dropped_before_connected' }, n)
    if (!first) return
    this.log.warn(
      { event: 'early_results_dropped', count: n, held: this.early.size },
      'vendor results that came before CONNECTED were dropped (over the hold bound, or the leg ended first)'
    )
  }

  /** A newer connection with the same identity took this leg's vendor session. */
  superseded(): void {
    this.session = null
    this.fail(new GatewayError('LEG_REPLACED'))
  }

  // ---- platform output, failure, teardown -------------------------------------------------------

  private sendToPlatform(text: string): void {
    if (this.state === 'CLOSED') return
    const status = this.platform.sendText(text)
    this.counters.framesToPlatform++
    this.counters.bytesToPlatform += text.length
    if (status === 2) {
      this.log.warn(
        { event: 'platform_backpressure_drop' },
        'a message to the platform was dropped at the backpressure limit'
      )
    } else if (
      status === 0 &&
      !this.vendorPaused &&
      this.platform.bufferedAmount() >= this.deps.platformHighWaterBytes
    ) {
      this.vendorPaused = true
      this.session?.pauseVendor()
      this.forward?.pause()
    }
  }

  /**
   * End the leg with a catalogued error: one ERROR frame and a close with the code's close code.
   * Safe from any state; the first failure wins. A session still attached is closed gracefully.
   */
  private fail(error: GatewayError, problems: readonly Problem[] = [], extra: Record<string, unknown> = {}): void {
    if (this.state === 'CLOSED') return
    this.state = 'CLOSED'
    const code: ErrorCode = error.code
    this.log[logLevelOf(code)](
      {
        event: 'leg_failed',
        code,
        flag: CODES[code].flag,
        pointers: error.pointers.length > 0 ? error.pointers : undefined,
        ...extra
      },
      error.message
    )
    const extraForPlatform = { ...extra }
    delete extraForPlatform.detail
    if (this.platform.sendText(errorFrame(error, problems, extraForPlatform)) !== 2) this.counters.framesToPlatform++
    this.early.drop()
    this.release(this.forward !== null ? 'relayed' : code.toLowerCase())
    const session = this.session
    this.session = null
    if (session !== null && session.owner === this) session.close(true)
    this.platform.end(CODES[code].close, code)
  }

  /** A leg with another caller's identity: refused (after the failure delay) and counted as an auth failure. */
  private callerMismatch(): void {
    this.deps.metrics.authFailures.inc({ hook: 'audio', reason: 'caller_mismatch' })
    this.refuseAuth(new GatewayError('CALLER_MISMATCH'))
  }

  /** A failed authentication: counted against the address's budget, refused no sooner than auth.failureDelayMs. */
  private refuseAuth(error: GatewayError): void {
    const guard = this.deps.guard
    if (guard === undefined) return this.fail(error)
    this.refusing = true
    if (this.handshakeTimer !== null) {
      this.deps.clock.clearTimeout(this.handshakeTimer)
      this.handshakeTimer = null
    }
    guard.failed(this.deps.clientAddress ?? '', () => this.fail(error))
  }

  private release(outcome: string): void {
    const forward = this.forward
    if (forward !== null) {
      this.forward = null
      forward.close()
    }
    this.releasePlace?.()
    this.releasePlace = null
    if (this.handshakeTimer !== null) {
      this.deps.clock.clearTimeout(this.handshakeTimer)
      this.handshakeTimer = null
    }
    this.counters.active = false
    this.tees?.close()
    this.tees = null
    this.deps.metrics.sessionsTotal.inc({ route: this.deps.route.name, outcome })
    this.deps.metrics.endLeg(this.counters)
  }
}
