import type { TimerHandle } from '../clock'
import { afterFailureDelay } from '../auth/failure-budget'
import type { PlaceTaken } from '../auth/admission'
import { CODES, GatewayError, logLevelOf, type ErrorCode } from '../errors'
import type { Logger } from '../telemetry/log'
import { scrubberFor, sentIn } from '../telemetry/scrub'
import type { LegCounters } from '../telemetry/metrics'
import type { Problem } from '../validate/compile'
import { EarlyResults } from './early-results'
import { checkHandshake, connectedFrame, errorFrame, type HandshakeCheck } from './handshake'
import { HeldAudio } from './held-audio'
import {
  CLOSE_OUTCOME,
  ON_BINARY,
  ON_END,
  ON_HANDSHAKE_TIMEOUT,
  ON_RESULT,
  ON_TEXT,
  type LegDeps,
  type LegState,
  type PlatformLeg
} from './leg-contract'
import { openLegSession, startLegSession } from './leg-session'
import { legKeyOf, type Place, sessionKeyOf } from './placement'
import { RelayLink } from './relay-link'
import type { AudioInput, Session, SessionOwner } from './session-contract'
import { LegTees } from './tee'

export type { LegDeps, LegState, PlatformLeg } from './leg-contract'

type Accepted = Extract<HandshakeCheck, { ok: true }>

/** Sync or async, decided at one site: `then` now when the value is here, else when the Promise settles. */
function whenReady<T>(v: T | Promise<T>, then: (v: T) => void, failed: (err: unknown) => void): void {
  if (v instanceof Promise) v.then(then, failed)
  else then(v)
}

/**
 * One platform audio leg: its handshake, where its session is, then audio to that session (here, or in
 * another process over a relay link) and results back to the platform. Every event is decided by the
 * state (audio/leg-contract.ts tables). The per-frame path is `onPlatformBinary` → `sink.write`
 * (`AudioFeed.write` → `VendorConnection.writeAudio` → `VendorSocket.sendBinary`, or `RelayLink.write`):
 * no parse, no await, no log, no allocation, no prom-client call.
 */
export class AudioLeg implements SessionOwner {
  state: LegState = 'AWAIT_INIT'
  readonly counters: LegCounters
  /** The id of the bearer token the leg was opened with (its revocation ends the leg), once checked. */
  tokenJti: string | undefined
  private log: Logger
  private readonly held: HeldAudio
  /** Results held until CONNECTED (bounded; the platform never sees MESSAGE first). */
  private readonly early: EarlyResults
  private handshakeTimer: TimerHandle | null
  private initText = ''
  private initAt = 0
  /** Where audio goes in CONNECTING, STREAMING and RELAYING. */
  private sink: AudioInput = { write: () => {} }
  private session: Session | null = null
  private link: RelayLink | null = null
  /** Fan-out (route `tee`): the same audio to each tee vendor, from the leg's admission to its end. */
  private tees: LegTees | null = null
  /** Gives back this leg's place under limits.legsPerRoute/legsPerClient. */
  private releasePlace: (() => void) | null = null
  /** Secrets the caller sent in its own init message: never scrubbed from its answers (telemetry/scrub.ts). */
  private readonly sentByCaller = sentIn(() => this.initText)
  /** Reading from the vendor (or the holder) is paused while the platform's socket is backed up. */
  private vendorPaused = false

  constructor(
    private readonly platform: PlatformLeg,
    private readonly deps: LegDeps
  ) {
    this.counters = deps.metrics.startLeg(deps.route.name)
    this.counters.active = true
    this.log = deps.log
    this.held = new HeldAudio(deps.settings.holdBufferBytes)
    this.early = new EarlyResults((n, first) => this.countEarlyDropped(first, n))
    this.handshakeTimer = deps.clock.setTimeout(() => {
      this.handshakeTimer = null
      if (ON_HANDSHAKE_TIMEOUT[this.state] === 'fail') this.fail(new GatewayError('HANDSHAKE_TIMEOUT'))
    }, deps.settings.handshakeTimeoutSeconds * 1000)
  }

  // ---- platform events -------------------------------------------------------------------------

  /** Per-frame path. `data` is only valid during this call. */
  onPlatformBinary(data: ArrayBuffer): void {
    const c = this.counters
    c.framesFromPlatform++
    c.bytesFromPlatform += data.byteLength
    switch (ON_BINARY[this.state]) {
      case 'pass':
        return this.sink.write(data)
      case 'hold':
        if (!this.held.add(data)) this.fail(new GatewayError('HOLD_BUFFER_OVERFLOW'))
        return
      case 'refuse':
        return this.fail(new GatewayError('FIRST_FRAME_NOT_TEXT'))
      case 'late':
        c.dropAfterClose++
        return
      case 'drop':
        return
    }
  }

  onPlatformText(data: ArrayBuffer): void {
    switch (ON_TEXT[this.state]) {
      case 'silent':
        return
      case 'ignore':
        // The interface sends only audio after the init message; a stray text frame is ignored, not fatal.
        this.log.debug(
          { event: 'platform_text_ignored', state: this.state },
          'text frame after the init message ignored'
        )
        return
      case 'init':
        if (data.byteLength > (this.deps.initMessageBytes ?? Number.POSITIVE_INFINITY)) {
          this.deps.metrics.limitRefusals.inc({ limit: 'init_size', hook: 'audio' })
          return this.refuse('MESSAGE_TOO_LARGE')
        }
        return this.verify(Buffer.from(data).toString('utf8'))
    }
  }

  /** The platform's socket drained below its backpressure: resume reading from the vendor. */
  onPlatformDrain(): void {
    if (this.vendorPaused && this.platform.bufferedAmount() < this.deps.platformHighWaterBytes) {
      this.vendorPaused = false
      this.session?.resumeVendor()
      this.link?.resume()
    }
  }

  /**
   * The platform socket closed (by the platform, or after our own `end`). Idempotent. `cut`: uWS cut the
   * socket for a frame it will not deliver (over its read limit, or text that is not UTF-8); the leg
   * ends with that outcome.
   */
  onPlatformClose(code: number, cut?: 'too_large_cut' | 'invalid_utf8'): void {
    this.deps.metrics.wsCloses.inc({ side: 'platform', code: String(code) })
    const outcome = CLOSE_OUTCOME[this.state]
    if (outcome === null) return
    if (cut !== undefined) this.deps.metrics.validationFailures.inc({ hook: 'audio' })
    this.log.info(
      { event: 'platform_closed', code, cut, framesFromPlatform: this.counters.framesFromPlatform },
      cut === undefined ? 'platform ended the leg' : 'the platform sent a frame the server cut the socket for'
    )
    this.end(outcome === 'relayed' ? outcome : (cut ?? outcome), 'park')
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
    this.log.info(
      { event: 'leg_drained', code: 'SHUTTING_DOWN', framesFromPlatform: this.counters.framesFromPlatform },
      'gateway draining: leg closed with 1012 so the platform reconnects to another instance'
    )
    if (this.toPlatform(errorFrame(new GatewayError('SHUTTING_DOWN'))) !== 2) this.counters.framesToPlatform++
    this.end(this.state === 'RELAYING' ? 'relayed' : 'shutting_down', { handOffSeconds: ttlSeconds })
    this.platform.end(CODES.SHUTTING_DOWN.close, 'SHUTTING_DOWN')
  }

  // ---- VERIFYING: failure budget, credential, schema ---------------------------------------------

  private verify(text: string): void {
    this.state = 'VERIFYING'
    this.initText = text
    const address = this.deps.clientAddress
    whenReady(
      this.deps.admission.begin(address),
      begun => {
        if (begun !== true) {
          if (this.state !== 'VERIFYING') return
          this.deps.metrics.limitRefusals.inc({ limit: 'failure_budget', hook: 'audio' })
          return this.fail(new GatewayError('TOO_MANY_FAILURES'), [], { retryAfterSeconds: begun })
        }
        if (this.state !== 'VERIFYING') return this.deps.admission.settle(address, false)
        whenReady(
          checkHandshake(this.deps.route, text, this.deps.callerKey),
          c => this.checked(c),
          err => {
            this.deps.admission.settle(address, false)
            this.bug('handshake')(err)
          }
        )
      },
      this.bug('admission')
    )
  }

  private checked(checked: HandshakeCheck): void {
    const { metrics, admission, clientAddress } = this.deps
    if (checked.ok) return this.checkedOk(checked)
    admission.settle(clientAddress, checked.stage === 'auth')
    if (this.state !== 'VERIFYING') return
    if (checked.stage !== 'auth') {
      metrics.validationFailures.inc({ hook: 'audio' })
      return this.fail(checked.error, checked.problems)
    }
    metrics.authFailures.inc({ hook: 'audio', reason: checked.reason ?? 'invalid' })
    this.refuseAuth(checked.error)
  }

  /** Checked: the leg's identity names its session, which decides where it is served. */
  private checkedOk(checked: Accepted): void {
    const { route, admission, clientAddress, relayed, placement } = this.deps
    if (this.state !== 'VERIFYING') return admission.settle(clientAddress, false)
    this.clearHandshakeTimer()
    this.tokenJti = checked.jti
    const id = checked.identity
    this.log = this.log.child({
      busNo: id.busNo,
      contactId: id.contactId,
      perspective: id.perspective,
      requestId: id.requestId
    })
    this.state = 'PLACING'
    this.initAt = this.deps.clock.now()
    const key = sessionKeyOf(route, id)
    // A relayed leg is taken only for the session its relay token named.
    if (relayed !== undefined && relayed.key !== key) {
      admission.settle(clientAddress, false)
      this.deps.metrics.authFailures.inc({ hook: 'relay', reason: 'session_mismatch' })
      return this.fail(new GatewayError('RELAY_INVALID', { detail: 'the init message names another session' }))
    }
    whenReady(
      placement.place(key, checked.caller, relayed?.hop ?? null),
      place => {
        // The caller's attempt is settled here: a leg of another caller's session counts as a failure.
        admission.settle(clientAddress, place.kind === 'refused')
        this.placed(place, checked, key)
      },
      err => {
        admission.settle(clientAddress, false)
        this.bug('placement')(err)
      }
    )
  }

  // ---- PLACING: here, relayed, or refused ---------------------------------------------------------

  private placed(place: Place, checked: Accepted, key: string): void {
    if (this.state !== 'PLACING') return
    if (place.kind === 'refused') return this.callerMismatch()
    if (place.kind === 'relay') return this.relay(place, checked, key)
    if (place.kind === 'here' && place.unreachable !== undefined) {
      this.countRelay('relay_failed')
      this.log.warn(
        { event: this.relayEvent('split'), why: place.unreachable },
        "the leg's session is held by another process this leg cannot reach: served here"
      )
    }
    const force = this.deps.registry.live(legKeyOf(this.deps.route.name, checked.identity))
    whenReady(
      this.deps.admission.takePlace(this.deps.route.name, checked.caller, force),
      taken => this.admitted(taken, checked, key),
      this.bug('leg limits')
    )
  }

  /** Its place under the leg limits, then its session: the one it re-attaches to, or a new one (joined, or its own). */
  private admitted(taken: PlaceTaken, checked: Accepted, key: string): void {
    if (typeof taken === 'function' && this.state !== 'PLACING') return taken()
    if (this.state !== 'PLACING') return
    const { route, metrics, registry } = this.deps
    if (typeof taken === 'string') {
      this.deps.placement.abandon(key)
      metrics.limitRefusals.inc({ limit: taken, hook: 'audio' })
      return this.fail(new GatewayError('LEG_LIMIT', { detail: taken }), [], { limit: taken })
    }
    this.releasePlace = taken
    const id = checked.identity
    if (route.tees !== undefined) this.startTees(checked.init, { id: this.deps.legId, route: route.name, ...id })
    const legKey = legKeyOf(route.name, id)
    // CONNECTING first: a session re-attached to tells its new owner it is ready at once.
    this.state = 'CONNECTING'
    const existing = registry.claim(legKey, this, checked.init, this.log, checked.caller)
    if (existing === 'refused') return this.callerMismatch()
    if (existing !== null) {
      this.flowTo(existing)
      metrics.reattach.inc({ route: route.name, result: 'same_session' })
      this.log.info({ event: 'reattached', session: existing.id }, 'leg re-attached to its vendor session')
      if (this.deps.relayed?.hop === 'worker')
        this.log.info(
          { event: 'reattached_across_workers', from: this.deps.relayed.from },
          'leg re-attached across workers'
        )
      return
    }
    const session = openLegSession(this.deps, this, this.log, checked, legKey, key)
    if (session === 'refused') return this.callerMismatch()
    if (session instanceof GatewayError) return this.fail(session)
    this.flowTo(session)
    startLegSession(this.deps, session, this.log, checked, legKey, () => {
      if (this.session === session) this.session = null
      this.callerMismatch()
    })
  }

  /** Audio (the held, then every frame) goes to `session`, and to the tees. */
  private flowTo(session: Session): void {
    this.session = session
    const tees = this.tees
    const feed = session.relay
    this.sink =
      tees === null
        ? feed
        : {
            write: d => {
              feed.write(d)
              tees.write(d)
            }
          }
    this.held.flushTo(this.sink)
  }

  // ---- RELAYING: the session is in another process ------------------------------------------------

  private relay(place: Extract<Place, { kind: 'relay' }>, checked: Accepted, key: string): void {
    const { route, placement, settings, clock, traceparent, clientAddress } = this.deps
    const link: RelayLink = new RelayLink(
      place,
      route.name,
      this.initText,
      this.counters,
      traceparent,
      this.deps.relayTokens,
      { key, address: clientAddress, from: placement.me?.instance ?? '' },
      settings,
      clock,
      {
        opened: () => {
          if (this.link !== link) return
          this.countRelay('relayed')
          this.log.info(
            { event: this.relayEvent('relayed'), to: place.owner.instance, hop: place.hop },
            'leg relayed to the process that holds its session'
          )
        },
        text: text => {
          if (this.link === link) this.sendToPlatform(text)
        },
        ended: (code, reason) => {
          if (this.link !== link) return
          this.end('relayed', 'nothing')
          this.platform.end(code, reason)
        },
        unreachable: why => {
          if (this.link !== link) return
          this.link = null
          this.held.putBack(link.takeHeld())
          this.state = 'PLACING'
          this.log.warn(
            { event: this.relayEvent('owner_unreachable'), holder: place.owner.instance, why },
            "the session's holder could not be reached: taking the session over"
          )
          const here = (): void => this.placed({ kind: 'here', unreachable: why }, checked, key)
          placement.takeOver(key, checked.caller, place.owner, this.deps.relayed?.hop ?? null).then(here, here)
        },
        lost: why => {
          if (this.link !== link) return
          this.link = null
          this.fail(new GatewayError('UPSTREAM_CLOSED', { detail: `session holder lost: ${why}` }))
        },
        overflow: () => {
          if (this.link !== link) return
          this.fail(new GatewayError('HOLD_BUFFER_OVERFLOW'))
        }
      }
    )
    this.link = link
    this.state = 'RELAYING'
    this.sink = link
    this.held.flushTo(link)
  }

  /**
   * The log event of a relay step: `join_*` on a join route (the second leg of a joined call), `reattach_*`
   * otherwise (a leg back on another process than its parked session).
   */
  private relayEvent(step: 'relayed' | 'split' | 'owner_unreachable'): string {
    return `${this.deps.route.config.join !== undefined ? 'join' : 'reattach'}_${step}`
  }

  /** `audio_joins_total{result}` on a join route, `audio_reattach_total{result}` otherwise. */
  private countRelay(result: 'relayed' | 'relay_failed'): void {
    const { metrics, route } = this.deps
    if (route.config.join !== undefined) metrics.joins.inc({ route: route.name, result })
    else metrics.reattach.inc({ route: route.name, result })
  }

  /** The route's tee vendors (audio/tee.ts): their results reach the platform only through `deliver`, tagged. */
  private startTees(init: Record<string, unknown>, leg: ConstructorParameters<typeof LegTees>[2]): void {
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
    switch (ON_RESULT[this.state]) {
      case 'send':
        return this.sendToPlatform(text)
      case 'early':
        return this.early.hold(text)
      case 'drop':
        return
    }
  }

  /** A newer connection with the same identity took this leg's vendor session. */
  superseded(): void {
    this.session = null
    this.fail(new GatewayError('LEG_REPLACED'))
  }

  // ---- platform output, failure, teardown -------------------------------------------------------

  /**
   * Every text frame to the platform passes here: the route's secrets are scrubbed from it
   * (telemetry/scrub.ts), except those the caller sent in its own init message, which would confirm a guess.
   */
  private toPlatform(text: string): number {
    const secrets = this.deps.route.config.secrets
    if (secrets === undefined) return this.platform.sendText(text)
    return this.platform.sendText(scrubberFor(secrets).json(text, this.sentByCaller))
  }

  private sendToPlatform(text: string): void {
    const status = this.toPlatform(text)
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
      this.link?.pause()
    }
  }

  /**
   * End the leg with a catalogued error: one ERROR frame and a close with the code's close code.
   * Safe from any state; the first failure wins. A session still attached is closed gracefully.
   */
  private fail(error: GatewayError, problems: readonly Problem[] = [], extra: Record<string, unknown> = {}): void {
    if (this.state === 'CLOSED') return
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
    if (this.toPlatform(errorFrame(error, problems, extraForPlatform)) !== 2) this.counters.framesToPlatform++
    this.end(this.state === 'RELAYING' ? 'relayed' : code.toLowerCase(), 'close')
    this.platform.end(CODES[code].close, code)
  }

  /** A leg of another caller's session: refused (after the failure delay) and counted as an auth failure. */
  private callerMismatch(): void {
    this.deps.metrics.authFailures.inc({ hook: 'audio', reason: 'caller_mismatch' })
    this.refuseAuth(new GatewayError('CALLER_MISMATCH'))
  }

  /** A refused credential, answered no sooner than auth.failureDelayMs (its failure was counted when settled). */
  private refuseAuth(error: GatewayError): void {
    if (this.state === 'CLOSED') return
    this.state = 'REFUSING'
    this.clearHandshakeTimer()
    this.held.drop()
    afterFailureDelay(this.deps.auth(), this.deps.clock, () => this.fail(error))
  }

  private bug(step: string): (err: unknown) => void {
    return err => {
      this.log.error({ event: 'leg_bug', step, err }, `unexpected error in the leg's ${step}`)
      this.fail(new GatewayError('INTERNAL'))
    }
  }

  private clearHandshakeTimer(): void {
    if (this.handshakeTimer === null) return
    this.deps.clock.clearTimeout(this.handshakeTimer)
    this.handshakeTimer = null
  }

  /**
   * The leg is over: what it holds is let go as `ON_END` says for the state it was in (a streaming
   * session parks, or is handed off in a drain, or closes on a failure), and its outcome is counted.
   */
  private end(outcome: string, how: 'park' | 'close' | 'nothing' | { handOffSeconds: number }): void {
    const was = this.state
    this.state = 'CLOSED'
    this.clearHandshakeTimer()
    this.held.drop()
    this.early.drop()
    const session = this.session
    const link = this.link
    this.session = null
    this.link = null
    this.sink = { write: () => {} }
    link?.close()
    this.releasePlace?.()
    this.releasePlace = null
    this.counters.active = false
    this.tees?.close()
    this.tees = null
    this.deps.metrics.sessionsTotal.inc({ route: this.deps.route.name, outcome })
    this.deps.metrics.endLeg(this.counters)
    if (session === null || session.owner !== this || how === 'nothing') return
    switch (ON_END[was]) {
      case 'park-session':
        if (how === 'park') return session.park()
        if (how === 'close') return session.close(true)
        return session.handOff('gateway instance draining; the leg continues on another instance', how.handOffSeconds)
      case 'close-session':
        return session.close(how !== 'park')
      default:
        return
    }
  }

  private countEarlyDropped(first: boolean, n: number): void {
    this.deps.metrics.vendorMessages.inc({ route: this.deps.route.name, result: 'dropped_before_connected' }, n)
    if (!first) return
    this.log.warn(
      { event: 'early_results_dropped', count: n, held: this.early.size },
      'vendor results that came before CONNECTED were dropped (over the hold bound, or the leg ended first)'
    )
  }
}
