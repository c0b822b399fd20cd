import { type Clock, Timer } from '../../clock'
import type { JoinSettings } from '../../config/types'
import { GatewayError } from '../../errors'
import type { MappingInput } from '../../mapping/run'
import type { ContinuedSession } from '../../store/port'
import type { Logger } from '../../telemetry/log'
import type { LegCounters } from '../../telemetry/metrics'
import type { SpanAttributes } from '../../telemetry/tracing'
import type { Replica } from '../../upstream/pool'
import { JoinHub } from './join-hub'
import { JOIN_TICK_MS, StereoMixer } from './join-mixer'
import { DRAINS, type JoinState, MIX_IDLE, type MixClock, ON_LEG_START, ON_NEW_LEG, OPENS } from './join-states'
import { startOnAffinity } from './affinity'
import { VendorSession } from './session'
import type {
  AudioInput,
  Session,
  SessionDeps,
  SessionEventName,
  SessionHost,
  SessionEvents,
  SessionState
} from './session-contract'
import { FLOWING } from './session-states'
import { type Result, unhandled } from '../../result'
import type { SessionStats } from './session-stats'

/** At most this many ticks are caught up at once after a late timer (the rest of the lag is skipped). */
const MAX_CATCH_UP = 5
/** How far one side may run ahead of the clock (bytes of 8 kHz µ-law): 2 s; beyond, its oldest audio goes. */
const SIDE_CAPACITY = 16000

/** One hub per session registry (an instance; each unit test its own). */
const hubs = new WeakMap<SessionHost, JoinHub<Join>>()

/** The joined sessions open under `host` (tests and the admin view). */
export function joinsOf(host: SessionHost): number {
  return hubs.get(host)?.joins.size ?? 0
}

/** The state of each joined contact open under `host` (tests). */
export function joinStates(host: SessionHost): JoinState[] {
  return [...(hubs.get(host)?.joins.values() ?? [])].map(j => j.state)
}

/**
 * The session of a leg on a `join` route: a channel of the contact's joined vendor session, made or
 * found by busNo and contactId. The leg sees an ordinary Session (audio/session/session-contract.ts): its
 * audio goes to the channel, its park, re-attach, close and hand-off are the channel's.
 */
export function openJoined(
  deps: SessionDeps,
  join: JoinSettings,
  events: SessionEvents,
  input: MappingInput,
  legKey: string,
  callKey: string,
  legId: string
): Result<JoinedLeg, GatewayError> {
  const channel = join.channels.indexOf(input.leg.perspective as 'TX' | 'RX')
  if (channel < 0) {
    const detail = `route ${deps.route.name} joins ${join.channels.join(' and ')}; a ${input.leg.perspective} leg cannot join`
    return { ok: false, error: new GatewayError('MESSAGE_INVALID', { detail }) }
  }
  let hub = hubs.get(deps.host)
  if (hub === undefined) {
    hub = new JoinHub<Join>(deps.clock)
    hubs.set(deps.host, hub)
  }
  const caller = deps.caller ?? ''
  let j = hub.joins.get(callKey)
  const arrival = j === undefined ? 'new-join' : ON_NEW_LEG[j.state]
  if (j === undefined || arrival === 'new-join') {
    j = new Join(hub, deps, join, input, callKey, legId, caller)
    hub.add(j)
  } else {
    // The call belongs to the caller that opened it: another caller's leg never touches it.
    if (j.caller !== caller) return { ok: false, error: new GatewayError('CALLER_MISMATCH') }
    // The channel's previous leg (ended, or live under another identity claim): this one takes it over.
    const previous = j.legs[channel]
    if (previous !== null && !previous.ended) {
      previous.attached?.superseded()
      previous.end()
    }
    if (arrival === 'late-partner') deps.metrics.joins.inc({ route: deps.route.name, result: 'late_partner' })
  }
  const leg = new JoinedLeg(j, channel, events, legKey, legId, deps.host)
  j.legs[channel] = leg
  return { ok: true, value: leg }
}

/**
 * A joined contact: one vendor session (audio/session/session.ts) to which this is the attached leg and the host, fed by the
 * mixer on the shared 20 ms clock; its results go to the leg of their channel. The first leg waits
 * `join.waitSeconds` for its partner before the vendor session opens.
 */
class Join implements SessionEvents, SessionHost {
  readonly session: VendorSession
  readonly legs: [JoinedLeg | null, JoinedLeg | null] = [null, null]
  /** Where the contact is (audio/session/join-states.ts): every decision below reads its tables. */
  state: JoinState = 'GATHERING'
  private readonly mixer = new StereoMixer(SIDE_CAPACITY)
  private readonly frame: ArrayBuffer
  private mixClock: MixClock = MIX_IDLE
  private readonly wait: Timer
  private params: Record<string, unknown> | null = null
  private pauses = 0

  constructor(
    private readonly hub: JoinHub<Join>,
    private readonly deps: SessionDeps,
    private readonly join: JoinSettings,
    input: MappingInput,
    readonly key: string,
    id: string,
    /** Who opened the call (auth/hook-auth.ts `callerTag`): only the same caller's legs join it. */
    readonly caller: string
  ) {
    this.frame = this.mixer.frame.buffer as ArrayBuffer
    this.wait = new Timer(deps.clock)
    const stereo = { ...input, leg: { ...input.leg, perspective: join.channels.join('+') } }
    this.session = new VendorSession({ ...deps, host: this }, this, stereo, `${key}:join`, id)
    deps.placement?.own(key, caller, this)
  }

  // ---- audio: the per-frame path and the tick ---------------------------------------------------

  /** Per-frame path: a copy into the channel's ring; the first audio starts the clock of this contact. */
  push(channel: number, data: ArrayBuffer): void {
    if (this.mixClock.state === 'IDLE') this.mixClock = { state: 'RUNNING', t0: this.deps.clock.now(), emitted: 0 }
    this.mixer.push(channel, new Uint8Array(data))
  }

  /**
   * The shared clock: the stereo frames due since the last tick go to the vendor session's feed. Nothing
   * while the session is parked: its pause frame is out or on its way (AudioHook refuses audio after `paused`).
   */
  tick(now: number): void {
    const clock = this.mixClock
    if (clock.state === 'IDLE' || this.session.attached === null) return
    let due = Math.floor((now - clock.t0) / JOIN_TICK_MS) - clock.emitted
    if (due > MAX_CATCH_UP) {
      clock.emitted += due - MAX_CATCH_UP
      due = MAX_CATCH_UP
    }
    const feed = this.session.feed
    for (let i = 0; i < due; i++) {
      this.mixer.mix()
      clock.emitted++
      feed.write(this.frame)
    }
    // Nobody left sending (both legs parked or ended) and nothing pending: the clock stops until audio comes back.
    if (this.mixer.pending === 0 && !this.anyAttached()) this.mixClock = MIX_IDLE
  }

  /**
   * What both sides sent and no tick took yet goes to the feed now (the last frame filled out with
   * silence, counted), and the clock stops until audio comes back: before the session parks or closes.
   */
  private drainMixer(): void {
    if (!DRAINS[this.state]) return
    const feed = this.session.feed
    while (this.mixer.pending > 0) {
      this.mixer.mix()
      feed.write(this.frame)
    }
    this.mixClock = MIX_IDLE
  }

  /** A leg is attached to either channel (no closure: the tick calls this). */
  private anyAttached(): boolean {
    const [a, b] = this.legs
    return (a !== null && a.attached !== null) || (b !== null && b.attached !== null)
  }

  /** Silence samples filled per channel so far (tests, the end-of-session metric). */
  get filled(): readonly number[] {
    return this.mixer.filled
  }

  // ---- legs -------------------------------------------------------------------------------------

  /** A leg's `start`: the vendor session opens when both legs are here, or when the wait runs out. */
  legStarted(leg: JoinedLeg, preferred: Replica | null, continued?: ContinuedSession): void {
    const action = ON_LEG_START[this.state]
    switch (action) {
      case 'tell-ready':
        if (FLOWING[this.session.state] && this.params !== null) leg.attached?.sessionReady({ ...this.params })
        return
      case 'ignore':
        return
      case 'open-or-wait':
      case 'open-if-paired': {
        const both = this.legs[0] !== null && this.legs[1] !== null
        if (both || this.join.waitSeconds <= 0) return this.open(preferred, continued, 'paired')
        // A second start while waiting (the channel's leg replaced) keeps the first wait and its deadline.
        if (action === 'open-if-paired') return
        this.state = 'WAITING'
        this.wait.set(this.join.waitSeconds * 1000, () => this.open(preferred, continued, 'alone'))
        return
      }
      default:
        return unhandled(action)
    }
  }

  private open(preferred: Replica | null, continued: ContinuedSession | undefined, result: string): void {
    if (!OPENS[this.state]) return
    this.state = 'OPEN'
    this.wait.clear()
    this.deps.metrics.joins.inc({ route: this.deps.route.name, result })
    // The joined session's own affinity (its key, not a leg's): after a drain elsewhere, the same replica
    // and the mapping's continuation (AudioHook continuedSessions), as for a plain leg.
    startOnAffinity(this.deps, this.session, this.session.key, null, { preferred, continued })
  }

  /** A parked leg came back, or a new one took a parked channel: the vendor session continues for it. */
  legAttached(leg: JoinedLeg, init: Record<string, unknown>, log: Logger): void {
    if (this.session.attached === null && this.session.state !== 'CLOSED') this.session.attach(this, init, log)
    else if (FLOWING[this.session.state] && this.params !== null) leg.attached?.sessionReady({ ...this.params })
  }

  /**
   * A leg parked: with no leg left attached the vendor session parks too (its own grace, the mapping's
   * pause), after the audio the legs sent before they left.
   */
  legDetached(): void {
    if (this.anyAttached() || this.session.attached === null) return
    this.drainMixer()
    this.session.park()
  }

  /** A channel is over: the session ends with the last one (a hand-off keeps its affinity for the next instance). */
  legEnded(leg: JoinedLeg, graceful: boolean, handOff?: { reason: string; ttlSeconds: number }): void {
    const other = this.legs[1 - leg.channel]
    if (other !== null && !other.ended) {
      this.legDetached()
      return
    }
    if (graceful || handOff !== undefined) this.drainMixer()
    if (handOff !== undefined) this.session.handOff(handOff.reason, handOff.ttlSeconds)
    else this.session.close(graceful)
  }

  pause(delta: number): void {
    const was = this.pauses
    this.pauses = Math.max(0, this.pauses + delta)
    if (was === 0 && this.pauses > 0) this.session.readVendor(false)
    else if (was > 0 && this.pauses === 0) this.session.readVendor(true)
  }

  // ---- the vendor session's attached leg and host ---------------------------------------------------

  sessionReady(parameters: Record<string, unknown>): void {
    this.params = parameters
    for (const l of this.legs) if (l !== null && !l.ended) l.attached?.sessionReady({ ...parameters })
  }

  sessionFailed(error: GatewayError, extra: Record<string, unknown>): void {
    for (const l of this.legs) l?.attached?.sessionFailed(error, extra)
  }

  deliver(text: string, channel?: number | null): void {
    if (channel === 0 || channel === 1) {
      this.legs[channel]?.attached?.deliver(text)
      return
    }
    for (const l of this.legs) l?.attached?.deliver(text)
  }

  superseded(): void {}

  sessionEvent(name: SessionEventName, attributes: SpanAttributes): void {
    for (const l of this.legs) if (l !== null && !l.ended) l.attached?.sessionEvent(name, attributes)
  }

  get clock(): Clock {
    return this.deps.clock
  }
  get graceSeconds(): number {
    return this.deps.settings.reattachGraceSeconds
  }

  parked(): void {}
  unparked(): void {}

  /** The vendor session is over: so is every channel (a failure reaches the legs through `sessionFailed`). */
  closed(): void {
    if (this.state === 'OVER') return
    this.state = 'OVER'
    this.wait.clear()
    this.hub.remove(this)
    this.deps.placement?.letGo(this.key, this)
    this.mixClock = MIX_IDLE
    const route = this.deps.route.name
    for (let ch = 0; ch < 2; ch++) {
      if (this.mixer.filled[ch] > 0)
        this.deps.metrics.joinSilence.inc({ route, channel: String(ch) }, this.mixer.filled[ch])
      this.legs[ch]?.end()
    }
  }
}

/** One leg's view of its joined session: its channel (audio), its own park / re-attach / close. */
export class JoinedLeg implements Session {
  ended = false
  readonly feed: AudioInput
  private readonly parkTimer: Timer

  constructor(
    private readonly join: Join,
    readonly channel: number,
    public attached: SessionEvents | null,
    readonly key: string,
    readonly id: string,
    private readonly host: SessionHost
  ) {
    this.feed = { write: data => join.push(channel, data) }
    this.parkTimer = new Timer(join.clock)
  }

  get state(): SessionState {
    return this.ended ? 'CLOSED' : this.join.session.state
  }
  get counters(): LegCounters {
    return this.join.session.counters
  }
  get stats(): SessionStats {
    return this.join.session.stats
  }
  /** Silence filled into this channel so far. */
  get filled(): number {
    return this.join.filled[this.channel]
  }

  start(preferred: Replica | null, continued?: ContinuedSession): void {
    if (!this.ended) this.join.legStarted(this, preferred, continued)
  }

  /** The leg dropped (or went on hold): its channel is silence; it may come back within the re-attach grace. */
  park(): void {
    if (this.ended) return
    this.attached = null
    const grace = this.graceSeconds()
    if (grace <= 0 || this.join.session.state === 'CLOSED') return this.close(true)
    this.host.parked(this)
    this.parkTimer.set(grace * 1000, () => this.close(true))
    this.join.legDetached()
  }

  attach(leg: SessionEvents, init: Record<string, unknown>, log: Logger): void {
    const previous = this.attached
    if (previous !== null && previous !== leg) previous.superseded()
    this.parkTimer.clear()
    this.host.unparked(this)
    this.attached = leg
    this.join.legAttached(this, init, log)
  }

  close(graceful: boolean): void {
    if (this.ended) return
    this.end()
    this.join.legEnded(this, graceful)
  }

  handOff(reason: string, ttlSeconds: number): void {
    if (this.ended) return
    this.end()
    this.join.legEnded(this, true, { reason, ttlSeconds })
  }

  readVendor(on: boolean): void {
    this.join.pause(on ? -1 : 1)
  }

  /** Over (keeps `attached`, so a session failure still reaches the leg). */
  end(): void {
    if (this.ended) return
    this.ended = true
    this.parkTimer.clear()
    this.host.closed(this)
  }

  private graceSeconds(): number {
    return this.join.graceSeconds
  }
}
