import type { Clock } from '../../clock'
import type { AudioSettings } from '../../config/types'
import type { GatewayError } from '../../errors'
import type { MappingInput } from '../../mapping/run'
import type { LegIdentity } from '../../validate/messages'
import { demandsCredential, namespaceOf, type RouteRuntime, type TeeRuntime } from '../../route'
import type { Store } from '../../store/port'
import type { Logger } from '../../telemetry/log'
import type { LegCounters, Metrics } from '../../telemetry/metrics'
import type { ConnectionFactory } from '../connection/connection-contract'
import type { VendorFeed } from '../feed/feed'
import { VendorSession } from './session'
import type { SessionHost, SessionEvents } from './session-contract'

/** What the tees of one leg need from it. They never touch its platform socket but through `forward`. */
export interface TeeDeps {
  /** The leg's own route (the tees are `route.tees`). */
  route: RouteRuntime
  settings: AudioSettings
  metrics: Metrics
  store: Store
  clock: Clock
  log: Logger
  legId: string
  traceparent?: string
  connect?: ConnectionFactory
  /** A tee result for the platform, already tagged (`parameters.tee`): the leg sends it as one of its MESSAGE frames. */
  forward: (text: string) => void
  /** The leg's platform socket and its high-water mark: while it is above, a forwarded result is dropped (counted). */
  platform: { bufferedAmount: () => number }
  platformHighWaterBytes: number
}

/** Tee sessions are never parked or claimed: nobody re-attaches to them. */
const NO_HOST: SessionHost = { parked: () => {}, unparked: () => {}, closed: () => {} }

/**
 * A vendor result as the platform gets it from a tee: a MESSAGE frame with `parameters.tee` set to the
 * tee's name (`parameters` is the interface's free-form object, so the platform's schema still holds).
 * Null for anything else (a mapping's CONNECTED or ERROR never reaches the platform from a tee).
 */
export function tagResult(text: string, tee: string): string | null {
  let msg: unknown
  try {
    msg = JSON.parse(text)
  } catch {
    return null
  }
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return null
  const m = msg as Record<string, unknown>
  if (m.command !== 'MESSAGE') return null
  const p = m.parameters
  m.parameters = { ...(p !== null && typeof p === 'object' && !Array.isArray(p) ? p : {}), tee }
  return JSON.stringify(m)
}

/**
 * The fan-out of one platform leg: one TeeSession per tee of its route whose mapping has an audio
 * section. They start when the leg's init is accepted and end when the leg ends. `write` is on the
 * per-frame path, right after the primary's feed: the same frame to each tee's own feed (which
 * copies it only when it must queue), no allocation.
 */
export class LegTees {
  private readonly tees: TeeSession[]

  constructor(deps: TeeDeps, checked: { init: Record<string, unknown>; identity: LegIdentity; tenant?: string }) {
    const init = checked.init
    const leg: MappingInput['leg'] = { id: deps.legId, route: deps.route.name, ...checked.identity }
    const tees = deps.route.tees ?? []
    // A tee's sessions live in the leg's tenant's namespace too (route.ts `namespaceOf`).
    const ns = namespaceOf(deps.route.name, checked.tenant ?? deps.route.name)
    this.tees = tees
      .filter(t => t.runtime.mapping.audio !== null)
      .map(t => new TeeSession(t, deps, init, leg, `${ns}/${t.name}`))
    for (const t of this.tees) t.start()
  }

  get size(): number {
    return this.tees.length
  }

  /** Per-frame path. `data` is only valid during this call. */
  write(data: ArrayBuffer): void {
    const t = this.tees
    for (let i = 0; i < t.length; i++) t[i].write(data)
  }

  /** The leg ended (any way): each tee says goodbye to its vendor; nothing reaches the platform any more. */
  close(): void {
    for (const t of this.tees) t.close()
  }
}

/**
 * One tee vendor of one leg: a vendor session of its own (audio/session/session.ts: balancing over the tee's
 * pool, readiness, failover with replay, rotation), owned by this object instead of the platform leg.
 * Its queue always drops the oldest audio when full (counted), whatever `audio.backpressurePolicy`
 * says; when its session gives up (refused, unreachable, failover deadline), the leg goes on and later
 * frames are counted as dropped (`ended`). It never sends CONNECTED, ERROR or a close to the platform.
 */
class TeeSession implements SessionEvents {
  private session: VendorSession | null = null
  private feed: VendorFeed | null = null
  /** Counts frames that come after the session ended (published as the tee's `ended` drops). */
  private ended: LegCounters | null = null
  private closed = false
  private readyOnce = false
  private readonly log: Logger
  private readonly input: MappingInput
  private readonly key: string
  private readonly namespace: string

  constructor(
    private readonly tee: TeeRuntime,
    private readonly deps: TeeDeps,
    init: Record<string, unknown>,
    leg: MappingInput['leg'],
    /** `<namespace>/<tee>`: the tee's sessions in the leg's tenant's namespace. */
    namespace: string
  ) {
    this.log = deps.log.child({ tee: tee.name })
    this.input = {
      init,
      leg,
      route: {
        name: deps.route.name,
        params: tee.runtime.config.params,
        checksToken: demandsCredential(deps.route, 'audio')
      },
      upstream: { name: '', audio: null, credential: null, hasCredential: false }
    }
    this.namespace = namespace
    this.key = `${namespace}:${leg.busNo}:${leg.contactId}:${leg.perspective}`
  }

  start(): void {
    const { deps, tee } = this
    const settings: AudioSettings = {
      ...deps.settings,
      backpressurePolicy: 'drop-oldest',
      reattachGraceSeconds: 0,
      bufferBytes: tee.bufferBytes ?? deps.settings.bufferBytes
    }
    const session = new VendorSession(
      {
        route: tee.runtime,
        settings,
        metrics: deps.metrics,
        store: deps.store,
        clock: deps.clock,
        host: NO_HOST,
        namespace: this.namespace,
        log: this.log,
        connect: deps.connect,
        traceparent: deps.traceparent
      },
      this,
      this.input,
      this.key,
      deps.legId
    )
    this.session = session
    this.feed = session.feed
    // May fail at once (no healthy replica): sessionFailed then runs before this returns.
    session.start(null)
  }

  write(data: ArrayBuffer): void {
    const feed = this.feed
    if (feed !== null) feed.write(data)
    else if (this.ended !== null) this.ended.dropAfterClose++
  }

  close(): void {
    if (this.closed) return
    this.closed = true
    const session = this.session
    this.session = null
    this.feed = null
    if (session !== null) {
      session.close(true)
      this.count('ok')
    }
    if (this.ended !== null) this.deps.metrics.endLeg(this.ended)
    this.ended = null
  }

  // ---- SessionEvents -------------------------------------------------------------------------------

  /** A tee's vendor session is not on the leg's trace (its own lines say what it does). */
  sessionEvent(): void {}

  sessionReady(): void {
    if (this.readyOnce) return
    this.readyOnce = true
    this.log.info({ event: 'tee_ready' }, 'tee vendor session ready; the leg streams to it too')
  }

  sessionFailed(error: GatewayError, extra: Record<string, unknown>): void {
    if (this.closed || this.session === null) return
    this.session = null
    this.feed = null
    this.ended = this.deps.metrics.startLeg(this.tee.runtime.name)
    this.count(error.code.toLowerCase())
    this.log.warn(
      { event: 'tee_failed', code: error.code, ...extra },
      'tee vendor session ended; the leg and its primary vendor go on without it'
    )
  }

  deliver(text: string): void {
    if (this.closed || this.tee.results === 'drop') return this.message('dropped')
    if (this.deps.platform.bufferedAmount() >= this.deps.platformHighWaterBytes)
      return this.message('platform_backpressure')
    const tagged = tagResult(text, this.tee.name)
    if (tagged === null) return this.message('dropped')
    this.deps.forward(tagged)
    this.message('forwarded')
  }

  /** Never claimed by another leg (tees are not in the registry). */
  superseded(): void {}

  private count(outcome: string): void {
    this.deps.metrics.teeSessions.inc({ route: this.tee.route, tee: this.tee.name, outcome })
  }

  private message(result: 'forwarded' | 'dropped' | 'platform_backpressure'): void {
    this.deps.metrics.teeMessages.inc({ route: this.tee.route, tee: this.tee.name, result })
  }
}
