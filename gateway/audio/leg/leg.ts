import { UNKNOWN_TENANT } from '../../auth/tenant-credentials'
import { Timer } from '../../clock'
import { afterFailureDelay } from '../../auth/failure-budget'
import type { SlotTaken } from '../../auth/admission'
import { CODES, GatewayError, type ErrorCode } from '../../errors'
import type { Logger } from '../../telemetry/log'
import { sentIn } from '../../telemetry/scrub'
import type { LegCounters } from '../../telemetry/metrics'
import type { Problem } from '../../validate/compile'
import { connectedFrame, errorFrame } from './handshake'
import { LegAudio } from './leg-audio'
import { LegCall } from './leg-call'
import {
  type InitVerdict,
  initTooLarge,
  openRelay,
  placeLeg,
  refusedSlot,
  takeOverFrom,
  takeSlotHere,
  verifyInit
} from './leg-handshake'
import {
  type AcceptedLeg,
  BARE,
  CLOSE_OUTCOME,
  tiesOf,
  letGo,
  pauseVendorSide,
  ON_BINARY,
  ON_HANDSHAKE_TIMEOUT,
  ON_RESULT,
  ON_TEXT,
  type LegDeps,
  type Extra,
  type Gone,
  type LegEnd,
  type LegPhase,
  type LegState,
  type PlatformCut,
  type PlatformLeg
} from './leg-contract'
import { reattach, sessionOf, startLegSession } from './leg-session'
import type { Place } from '../placement/placement'
import { PlatformOut } from './platform-out'
import type { RelayEvents } from '../placement/relay-link'
import type { SessionEvents } from '../session/session-contract'
import { LegTees } from '../session/tee'
import { unhandled } from '../../result'

/**
 * One platform audio leg: its handshake, where its session is, then audio to that session (here, or in
 * another process over a relay link) and results back to the platform. Every event is decided by the
 * state (audio/leg/leg-contract.ts tables). The per-frame path is `onPlatformBinary` → `sink.write`
 * (`VendorFeed.write` → `VendorConnection.writeAudio` → `VendorSocket.sendBinary`, or `RelayLink.write`):
 * no parse, no await, no log, no allocation, no prom-client call.
 */
export class AudioLeg implements SessionEvents, RelayEvents {
  /** Its state and what it is tied to there (audio/leg/leg-contract.ts LegPhase); changed by `enter` only. */
  private phase: LegPhase = BARE.AWAIT_INIT
  private binary = ON_BINARY.AWAIT_INIT // ON_BINARY of `phase`, kept by `enter`: the per-frame path reads no table
  readonly counters: LegCounters
  /** Its summary line and call record (audio/leg/leg-call.ts). */
  readonly call: LegCall
  /** The id of the bearer token the leg was opened with (its revocation ends the leg), once checked. */
  tokenJti: string | undefined
  private log: Logger
  /** Where its audio goes: held, then its session (and tees) or its relay link. */
  private readonly audio: LegAudio
  /** Text frames to the platform: scrubbed, counted; results held until CONNECTED; backpressure. */
  private readonly out: PlatformOut
  private readonly handshakeTimer: Timer
  private initText = ''
  /** Gives back this leg's slot under limits.legsPerRoute/legsPerClient (none taken: nothing to give back). */
  private releaseSlot: () => void = () => {}

  constructor(
    private readonly platform: PlatformLeg,
    private readonly deps: LegDeps
  ) {
    this.counters = deps.metrics.startLeg(deps.route.name)
    this.counters.active = true
    this.counters.tenant = UNKNOWN_TENANT
    this.call = new LegCall(deps, this.counters)
    this.log = deps.log
    this.audio = new LegAudio(deps.settings.holdBufferBytes)
    this.out = new PlatformOut(
      platform,
      deps,
      this.counters,
      () => this.log,
      // Secrets the caller sent in its own init message are never scrubbed from its answers.
      sentIn(() => this.initText),
      {
        backedUp: () => pauseVendorSide(this.phase, true),
        drained: () => pauseVendorSide(this.phase, false)
      }
    )
    this.handshakeTimer = new Timer(deps.clock)
    this.handshakeTimer.set(deps.settings.handshakeTimeoutSeconds * 1000, () => {
      if (ON_HANDSHAKE_TIMEOUT[this.state] === 'fail') this.fail(new GatewayError('HANDSHAKE_TIMEOUT'))
    })
  }

  get state(): LegState {
    return this.phase.state
  }
  private enter(phase: LegPhase): void {
    this.phase = phase
    this.binary = ON_BINARY[phase.state]
  }

  // ---- platform events -------------------------------------------------------------------------

  /** Per-frame path. `data` is only valid during this call. */
  onPlatformBinary(data: ArrayBuffer): void {
    const c = this.counters
    c.framesFromPlatform++
    c.bytesFromPlatform += data.byteLength
    const action = this.binary
    switch (action) {
      case 'pass':
        return this.audio.sink.write(data)
      case 'hold':
        if (this.audio.held.add(data)) return
        // Over the hold buffer: the held frames and this one count as a connecting session's hold does (feed.ts).
        c.dropHold += this.audio.held.drop() + 1
        return this.fail(new GatewayError('HOLD_BUFFER_OVERFLOW'))
      case 'refuse':
        return this.fail(new GatewayError('FIRST_FRAME_NOT_TEXT'))
      case 'late':
        c.dropAfterClose++
        return
      case 'drop':
        return
      default:
        return unhandled(action)
    }
  }

  onPlatformText(data: ArrayBuffer): void {
    const action = ON_TEXT[this.state]
    switch (action) {
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
        if (initTooLarge(this.deps, data)) return this.refuse('MESSAGE_TOO_LARGE')
        return this.verify(Buffer.from(data).toString('utf8'))
      default:
        return unhandled(action)
    }
  }

  /** The platform's socket drained below its backpressure: resume reading from the vendor. */
  onPlatformDrain(): void {
    this.out.drained()
  }

  /**
   * The platform socket closed (by the platform, or after our own `end`). Idempotent. `cut`: uWS cut the
   * socket for a frame it will not deliver (over its read limit, or text that is not UTF-8); the leg
   * ends with that outcome.
   */
  onPlatformClose(code: number, cut?: PlatformCut): void {
    this.deps.metrics.wsCloses.inc({ side: 'platform', code: String(code) })
    const outcome = CLOSE_OUTCOME[this.state]
    if (outcome === null) return
    if (cut !== undefined) this.deps.metrics.validationFailures.inc({ hook: 'audio' })
    this.call.platformClosed(this.log, code, cut)
    this.end(outcome === 'relayed' ? outcome : (cut ?? outcome), 'park', code)
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
    this.call.drained(this.log)
    this.out.frame(errorFrame(new GatewayError('SHUTTING_DOWN')))
    this.end(this.state === 'RELAYING' ? 'relayed' : 'shutting_down', { handOffSeconds: ttlSeconds }, 1012)
    this.platform.end(CODES.SHUTTING_DOWN.close, 'SHUTTING_DOWN')
  }

  // ---- VERIFYING (audio/leg/leg-handshake.ts): failure budget, credential, schema -------------------

  private verify(text: string): void {
    this.enter(BARE.VERIFYING)
    this.initText = text
    verifyInit(this.deps, text, v => this.verified(v), this.bug)
  }

  private verified(v: InitVerdict): void {
    if (this.state !== 'VERIFYING') return
    switch (v.kind) {
      case 'spent':
        return this.fail(new GatewayError('TOO_MANY_FAILURES'), [], { retryAfterSeconds: v.retryAfterSeconds })
      case 'invalid':
        return this.fail(v.error, v.problems)
      case 'refused':
        return this.refuseAuth(v.error)
      case 'accepted':
        break
    }
    this.handshakeTimer.clear()
    const { checked } = v
    this.tokenJti = checked.jti
    this.log = this.call.identified(this.log, checked.identity, checked.tenant)
    this.counters.tenant = checked.tenant
    const accepted: AcceptedLeg = { checked, key: v.key, at: this.deps.clock.now() }
    this.enter({ state: 'PLACING', accepted })
    placeLeg(this.deps, v, place => this.placed(place, accepted), this.bug)
  }

  // ---- PLACING: here, relayed, or refused ---------------------------------------------------------

  private placed(place: Place, accepted: AcceptedLeg): void {
    // Gone meanwhile: the owner record its placement claimed goes (none is kept for a session nobody owns).
    if (this.state !== 'PLACING') return place.kind === 'here' ? this.deps.placement.abandon(accepted.key) : undefined
    if (place.kind === 'refused') return this.callerMismatch()
    if (place.kind === 'relay') return this.relay(place, accepted)
    const admitted = (taken: SlotTaken): void => this.admitted(taken, accepted)
    takeSlotHere(this.deps, accepted.checked, place.unreachable, this.log, admitted, this.bug)
  }

  /** Its slot under the leg limits, then its session: the one it re-attaches to, or a new one (joined, or its own). */
  private admitted(taken: SlotTaken, accepted: AcceptedLeg): void {
    const { checked, key } = accepted
    if (this.state !== 'PLACING') {
      if (typeof taken === 'function') taken()
      return this.deps.placement.abandon(key)
    }
    if (typeof taken !== 'function') {
      const { error, extra } = refusedSlot(this.deps, checked, key, taken)
      return this.fail(error, [], extra)
    }
    this.releaseSlot = taken
    // The route's tee vendors (audio/session/tee.ts): their results reach the platform only through `deliver`, tagged.
    if (this.deps.route.tees !== undefined)
      this.audio.withTees(
        new LegTees({ ...this.deps, log: this.log, forward: t => this.deliver(t), platform: this.platform }, checked)
      )
    const found = sessionOf(this.deps, this, this.log, checked, key)
    if (!found.ok)
      return found.error.code === 'CALLER_MISMATCH' ? this.callerMismatch(found.error) : this.fail(found.error)
    const { session, reattached } = found.value
    // CONNECTING with its session first: a session re-attached to tells its newly attached leg it is ready at once.
    this.enter({ state: 'CONNECTING', accepted, session })
    if (reattached) reattach(this.deps, session, this, this.log, checked)
    this.call.attached(session, reattached)
    this.audio.toSession(session)
    // A caller mismatch found at the start closes the session; REFUSING has none.
    if (!reattached) startLegSession(this.deps, session, this.log, checked, () => this.callerMismatch())
  }

  // ---- RELAYING: the session is in another process ------------------------------------------------

  private relay(place: Extract<Place, { kind: 'relay' }>, accepted: AcceptedLeg): void {
    this.call.relayed(place.owner.instance)
    const link = openRelay(this.deps, place, this.initText, this.counters, accepted.key, this.log, this)
    this.enter({ state: 'RELAYING', accepted, relayedTo: place, link })
    this.audio.toLink(link)
  }

  relayText(text: string): void {
    this.out.send(text)
  }

  relayEnded(code: number, reason: string): void {
    this.end('relayed', 'nothing', code)
    this.platform.end(code, reason)
  }

  /** The link failed on its own: the leg fails without closing it again. */
  relayFailed(error: GatewayError): void {
    this.fail(error, [], {}, 'link')
  }

  /** The owner never answered: the leg takes its session over and is served here, its held audio first. */
  relayUnreachable(held: ArrayBuffer[], why: string): void {
    const p = this.phase
    if (p.state !== 'RELAYING') return // only a relaying leg has a link to report on
    const { accepted } = p
    this.audio.back(held)
    this.enter({ state: 'PLACING', accepted })
    const here = (): void => this.placed({ kind: 'here', unreachable: why }, accepted)
    takeOverFrom(this.deps, p.relayedTo.owner, accepted, this.log, why, here)
  }

  // ---- session events (SessionEvents) ------------------------------------------------------------

  sessionReady(vendorParameters: Record<string, unknown>): void {
    const p = this.phase
    if (p.state !== 'CONNECTING') return
    this.enter({ ...p, state: 'STREAMING' })
    const seconds = (this.deps.clock.now() - p.accepted.at) / 1000
    this.deps.metrics.handshakeDuration.observe({ route: this.deps.route.name }, seconds)
    this.out.send(connectedFrame({ ...vendorParameters, legId: this.deps.legId, route: this.deps.route.name }))
    for (const text of this.out.early.release()) this.deliver(text)
    this.call.connected(this.log, seconds)
  }

  readonly sessionEvent: SessionEvents['sessionEvent'] = (name, attributes) => this.call.event(name, attributes)
  /** Its session failed (and closed itself): the leg fails without letting it go. */
  sessionFailed(error: GatewayError, extra: Record<string, unknown>): void {
    this.fail(error, [], extra, 'session')
  }

  deliver(text: string): void {
    if (this.out.result(text, ON_RESULT[this.phase.state])) this.call.results++
  }

  /** A newer connection with the same identity took this leg's vendor session. */
  superseded(): void {
    this.fail(new GatewayError('LEG_REPLACED'), [], {}, 'session')
  }

  // ---- platform output, failure, teardown -------------------------------------------------------

  /**
   * End the leg with a catalogued error: one ERROR frame and a close with the code's close code.
   * Safe from any state; the first failure wins. A session still attached is closed gracefully; `gone`:
   * the session or the link that ended on its side (failed, taken by another leg) is not let go again.
   */
  private fail(error: GatewayError, problems: readonly Problem[] = [], extra: Extra = {}, gone: Gone = null): void {
    if (this.state === 'CLOSED') return
    const code: ErrorCode = error.code
    this.call.failed(this.log, error, extra)
    const { detail: _detail, ...extraForPlatform } = extra
    this.out.frame(errorFrame(error, problems, extraForPlatform))
    this.end(this.state === 'RELAYING' ? 'relayed' : code.toLowerCase(), 'close', CODES[code].close, gone)
    this.platform.end(CODES[code].close, code)
  }

  /** A leg of another caller's session (`error`: the lookup's, if any): refused after the failure delay, counted as an auth failure. */
  private callerMismatch(error = new GatewayError('CALLER_MISMATCH')): void {
    this.deps.metrics.authFailures.inc({ hook: 'audio', reason: 'caller_mismatch' })
    this.refuseAuth(error)
  }

  /** A refused credential, answered no sooner than auth.failureDelayMs (its failure was counted when judged). */
  private refuseAuth(error: GatewayError): void {
    if (this.state === 'CLOSED') return
    this.enter(BARE.REFUSING)
    this.handshakeTimer.clear()
    this.counters.dropAfterClose += this.audio.held.drop()
    afterFailureDelay(this.deps.auth(), this.deps.clock, () => this.fail(error))
  }

  private readonly bug = (step: string) => (err: unknown) => {
    this.log.error({ event: 'leg_bug', step, err }, `unexpected error in the leg's ${step}`)
    this.fail(new GatewayError('INTERNAL'))
  }

  /**
   * The leg is over: what it is tied to is let go as `ON_END` says for the state it was in (audio/leg/leg-contract.ts
   * `letGo`), its outcome counted, its one `leg_summary` line written (`closeCode`: the platform's or ours).
   */
  private end(outcome: string, how: LegEnd, closeCode: number, gone: Gone = null): void {
    const was = this.phase
    if (was.state === 'CLOSED') return
    this.enter(BARE.CLOSED)
    this.handshakeTimer.clear()
    // Frames read from the platform and still held (its checks or its placement were under way): counted.
    this.counters.dropAfterClose += this.audio.stop()
    this.out.early.drop()
    const ties = tiesOf(was, gone)
    this.releaseSlot()
    this.releaseSlot = () => {}
    this.counters.active = false
    this.deps.metrics.sessionsTotal.inc({ route: this.deps.route.name, outcome })
    this.deps.metrics.tenantLegs.inc({ tenant: this.call.tenant, outcome })
    this.deps.metrics.endLeg(this.counters)
    const fate = letGo(ties, this, was.state, how)
    this.call.ended(this.log, { outcome, closeCode, fate, session: ties.session })
  }
}
