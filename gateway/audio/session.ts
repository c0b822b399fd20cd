import { randomUUID } from 'node:crypto'
import type { Clock, TimerHandle } from '../clock'
import type { AudioSettings } from '../config/types'
import { GatewayError } from '../errors'
import type { Expr } from '../mapping/compile'
import { frameOf, run, truthy, type MappingInput } from '../mapping/run'
import type { RouteRuntime } from '../route'
import type { Store } from '../store/port'
import type { Logger } from '../telemetry/log'
import type { LegCounters, Metrics } from '../telemetry/metrics'
import type { Replica } from '../upstream/pool'
import { VendorSocket } from '../upstream/ws-leg'
import { validator } from '../validate/compile'
import { AudioEncoder, FrameCounters, MediaTemplate, fillControl, isIdentity } from './encoder'
import { HoldBuffer } from './hold-buffer'
import { ReplayRing } from './replay-ring'

/** The platform leg a session currently serves (audio/leg.ts). */
export interface SessionOwner {
  /** The vendor session is ready (first time, or for a leg that re-attached). */
  sessionReady: (parameters: Record<string, unknown>) => void
  /** The session gave up; the owner ends its platform leg with this error. The session closes itself. */
  sessionFailed: (error: GatewayError, extra: Record<string, unknown>) => void
  /** A MESSAGE for the platform (already a PlatformWebSocketMessage in JSON). */
  deliver: (text: string) => void
}

export interface SessionDeps {
  route: RouteRuntime
  settings: AudioSettings
  metrics: Metrics
  store: Store
  clock: Clock
  registry: SessionRegistry
  log: Logger
}

/**
 * Vendor session states. OPENING: first vendor socket being opened / not ready yet. READY: audio
 * flows. RECOVERING: the vendor socket was lost mid-call; a replacement is being opened (audio is
 * queued, the platform leg stays open). CLOSED: over.
 */
export type SessionState = 'OPENING' | 'READY' | 'RECOVERING' | 'CLOSED'

/**
 * One vendor socket of a session and what its frames count. A session has one current socket; while
 * rotating it briefly has a second (`next`), and a replaced socket lingers while it says goodbye.
 */
interface Conn {
  readonly socket: VendorSocket
  readonly replica: Replica
  readonly counters: FrameCounters
  readonly input: MappingInput
  encoder: AudioEncoder | null
  ready: boolean
  /** Set once the close frame went out: vendor messages are checked against `closeWhen`. */
  closing: boolean
}

const BACKLOG_POLL_MS = 10
const RETRY_BACKOFF_MS = [100, 250, 500, 1000, 2000]

/**
 * The vendor side of one call leg. It may outlive a platform connection: when the platform drops (a
 * lost connection, a hold), the session is parked for `reattachGraceSeconds` and a leg that comes back
 * with the same busNo, contactId and perspective continues it. When the vendor socket fails mid-call
 * the session opens a replacement (another healthy replica first), replays the recent audio the failed
 * socket may not have processed, then continues with the audio queued meanwhile.
 */
export class VendorSession {
  state: SessionState = 'OPENING'
  readonly counters: LegCounters
  owner: SessionOwner | null
  private ownerTold = false
  /** The socket audio goes to (null while none is open). */
  private conn: Conn | null = null
  /** A replacement being made ready while `conn` still carries audio (rotation). */
  private next: Conn | null = null
  private readonly queue = new HoldBuffer()
  private readonly ring: ReplayRing
  private queueLimit: number
  private readonly highWater: number
  private candidates: Replica[] = []
  private lastError: string | null = null
  private failedReplica: Replica | null = null
  private lostAt = 0
  private deadline = 0
  private attempt = 0
  private readyTimer: TimerHandle | null = null
  private retryTimer: TimerHandle | null = null
  private backlogTimer: TimerHandle | null = null
  private parkTimer: TimerHandle | null = null
  private keepaliveTimer: TimerHandle | null = null
  private rotateTimer: TimerHandle | null = null
  private keepaliveMark = -1
  /** A resume frame is on its way: audio queues behind it. */
  private resuming = false
  private chain: Promise<void> = Promise.resolve()
  private vendorParams: Record<string, unknown> = {}
  private log: Logger

  constructor(
    private readonly deps: SessionDeps,
    owner: SessionOwner,
    private input: MappingInput,
    readonly key: string,
    readonly id: string
  ) {
    this.owner = owner
    this.counters = deps.metrics.startLeg(deps.route.name)
    this.ring = new ReplayRing(Math.round(deps.settings.replaySeconds * 8000))
    this.queueLimit = deps.settings.holdBufferBytes
    this.highWater = deps.settings.vendorHighWaterBytes
    this.log = deps.log
  }

  /** Read through a getter so checks after an await are not narrowed away by the compiler. */
  private get closed(): boolean {
    return this.state === 'CLOSED'
  }

  // ---- audio in (per-frame path) -------------------------------------------------------------

  /** Per-frame path. `data` is only valid during this call. */
  write(data: ArrayBuffer): void {
    const conn = this.conn
    if (
      this.state === 'READY' &&
      this.queue.bytes === 0 &&
      !this.resuming &&
      conn !== null &&
      conn.socket.bufferedAmount < this.highWater
    ) {
      this.writeThrough(conn, data)
      return
    }
    this.enqueue(data)
  }

  private enqueue(data: ArrayBuffer): void {
    const c = this.counters
    if (this.state === 'CLOSED') {
      c.dropAfterClose++
      return
    }
    if (this.state === 'OPENING') {
      if (this.queue.bytes + data.byteLength > this.queueLimit) {
        c.dropHold += this.queue.length + 1
        this.queue.clear()
        this.giveUp(new GatewayError('HOLD_BUFFER_OVERFLOW', { detail: `more than ${this.queueLimit} bytes` }), {})
        return
      }
    } else {
      // READY but backed up, or RECOVERING: bounded; the oldest audio goes first (counted).
      while (this.queue.bytes + data.byteLength > this.queueLimit) {
        if (this.state === 'READY' && this.deps.settings.backpressurePolicy === 'close') {
          c.dropBackpressure += this.queue.length + 1
          this.queue.clear()
          this.giveUp(new GatewayError('BACKPRESSURE_OVERFLOW'), {})
          return
        }
        if (this.queue.shift() === undefined) break
        if (this.state === 'RECOVERING') c.dropFailover++
        else c.dropBackpressure++
      }
    }
    this.queue.push(data)
    c.bufferedBytes = this.queue.bytes
    if (this.state === 'READY') this.armBacklog()
  }

  /** Write queued frames while the vendor socket is below its high-water mark. */
  private flushQueue(): void {
    const conn = this.conn
    if (conn === null || this.state !== 'READY' || this.resuming) return
    const c = this.counters
    while (this.queue.length > 0 && conn.socket.bufferedAmount < this.highWater)
      this.writeThrough(conn, this.queue.shift()!)
    c.bufferedBytes = this.queue.bytes
    if (this.queue.length > 0) this.armBacklog()
  }

  /** Write one platform frame to the vendor and keep it for replay. Per-frame path: counters only. */
  private writeThrough(conn: Conn, data: ArrayBuffer | Uint8Array): void {
    this.sendAudio(conn, data)
    this.ring.push(data)
    this.counters.framesToVendor++
    this.counters.bytesToVendor += data.byteLength
  }

  private sendAudio(conn: Conn, data: ArrayBuffer | Uint8Array): void {
    if (conn.encoder === null) {
      conn.socket.sendBinary(data)
      // What the placeholders read ({{chunk}}, {{position}}): 8 bytes of 8 kHz µ-law per ms.
      conn.counters.chunk++
      conn.counters.audioMs += data.byteLength / 8
    } else {
      conn.encoder.push(data instanceof Uint8Array ? data : new Uint8Array(data))
    }
  }

  private armBacklog(): void {
    if (this.backlogTimer !== null) return
    this.backlogTimer = this.deps.clock.setTimeout(() => {
      this.backlogTimer = null
      this.flushQueue()
    }, BACKLOG_POLL_MS)
  }

  pauseVendor(): void {
    this.conn?.socket.pause()
  }
  resumeVendor(): void {
    this.conn?.socket.resume()
  }

  // ---- opening -------------------------------------------------------------------------------

  /** Open the first vendor socket, on `preferred` first when given (affinity), else by balancing. */
  start(preferred: Replica | null): void {
    const all = this.deps.route.pool.audioCandidates()
    this.candidates = preferred?.healthy ? [preferred, ...all.filter(r => r !== preferred)] : all
    if (this.candidates.length === 0) {
      this.giveUp(new GatewayError('NO_HEALTHY_UPSTREAM'), {})
      return
    }
    this.connectNext()
  }

  private connectNext(): void {
    if (this.state === 'CLOSED') return
    const replica = this.candidates.shift()
    if (replica === undefined) {
      if (this.state === 'OPENING') {
        this.giveUp(new GatewayError('UPSTREAM_UNREACHABLE', { detail: this.lastError ?? undefined }), {})
        return
      }
      this.scheduleRetry()
      return
    }
    this.run(async () => {
      const conn = await this.open(replica, false)
      if (conn === null) this.connectNext()
      else this.conn = conn
    })
  }

  /**
   * Open one vendor socket on `replica`: URL and headers from the mapping, then the socket. Returns
   * null when the mapping could not build them (counted, logged). Runs on the control chain.
   */
  private async open(replica: Replica, rotation: boolean): Promise<Conn | null> {
    const cfg = replica.config
    const audio = this.deps.route.mapping.audio!
    const input: MappingInput = {
      ...this.input,
      upstream: {
        name: cfg.name,
        audio: cfg.audio ?? null,
        credential: cfg.credential ?? null,
        hasCredential: cfg.credential !== undefined
      },
      session: { id: randomUUID() }
    }
    let url = cfg.audio!
    const headers: Record<string, string> = { ...cfg.headers }
    if (audio.url !== null) {
      const out = await run(audio.url, input)
      if (!out.ok || typeof out.value !== 'string')
        return this.buildFailed('url', out.ok ? 'did not produce a string' : out.error)
      url = out.value
    }
    if (audio.headers !== null) {
      const out = await run(audio.headers, input)
      if (!out.ok || out.value === null || typeof out.value !== 'object')
        return this.buildFailed('headers', out.ok ? 'did not produce an object' : out.error)
      for (const [k, v] of Object.entries(out.value as Record<string, unknown>))
        if (v !== undefined && v !== null) headers[k] = String(v)
    }
    if (this.closed) return null
    replica.activeStreams++
    replica.pendingHandshakes++
    replica.sessions.add(this)
    let pending = true
    const donePending = (): void => {
      if (pending) {
        pending = false
        replica.pendingHandshakes--
      }
    }
    const counters = new FrameCounters()
    let conn: Conn | null = null
    const socket = new VendorSocket(
      url,
      { headers, connectTimeoutMs: this.deps.settings.connectTimeoutSeconds * 1000 },
      {
        onOpen: () => {
          donePending()
          if (conn !== null) this.onSocketOpen(conn)
        },
        onText: text => {
          if (conn !== null) this.onSocketText(conn, text)
        },
        onBinary: bytes => {
          this.counters.dropVendorBinary++
          this.counters.bytesFromVendor += bytes
        },
        onClose: (code, reason, opened, error) => {
          donePending()
          if (conn !== null) this.onSocketClose(conn, code, reason, opened, error)
        }
      }
    )
    conn = { socket, replica, counters, input, encoder: null, ready: false, closing: false }
    if (rotation) this.next = conn
    return conn
  }

  /**
   * The same mapping fails on every replica, so no other replica is tried: the leg ends with
   * MAPPING_FAILED. The expression's error text may quote the init message: it is logged, never sent.
   */
  private buildFailed(stage: 'url' | 'headers', error: string): null {
    this.deps.metrics.mappingErrors.inc({ route: this.deps.route.name, stage })
    this.log.warn({ event: 'mapping_error', stage, error }, 'the mapping could not build the vendor connection')
    this.giveUp(new GatewayError('MAPPING_FAILED', { detail: `audio.${stage}` }), {})
    return null
  }

  private onSocketOpen(conn: Conn): void {
    const audio = this.deps.route.mapping.audio!
    this.run(async () => {
      if (!this.isLive(conn)) return
      if (audio.template !== null) {
        const t = await run(audio.template, conn.input)
        if (!t.ok || t.value === null || typeof t.value !== 'object') {
          this.deps.metrics.mappingErrors.inc({ route: this.deps.route.name, stage: 'template' })
          this.giveUp(
            new GatewayError('MAPPING_FAILED', { detail: 'frames.template' }),
            {},
            t.ok ? 'the template did not produce an object' : t.error
          )
          return
        }
        conn.encoder = this.encoderFor(conn, new MediaTemplate(JSON.stringify(t.value)))
      } else if (!isIdentity(audio.frames)) {
        conn.encoder = this.encoderFor(conn, null)
      }
      if (audio.open !== null && !(await this.sendControl(conn, audio.open, 'open'))) return
      if (!this.isLive(conn)) return
      if (audio.ready === null) {
        this.connReady(conn, {})
      } else {
        this.readyTimer = this.deps.clock.setTimeout(() => {
          this.readyTimer = null
          if (!conn.ready && this.isLive(conn))
            this.attemptFailed(conn, 'not ready in time', true, new GatewayError('UPSTREAM_NOT_READY'))
        }, this.deps.settings.readyTimeoutSeconds * 1000)
      }
    })
  }

  private encoderFor(conn: Conn, template: MediaTemplate | null): AudioEncoder {
    return new AudioEncoder(this.deps.route.mapping.audio!.frames, conn.counters, template, {
      binary: chunk => conn.socket.sendBinary(chunk),
      text: frame => conn.socket.sendText(frame)
    })
  }

  /** Evaluate a control expression and send its frame(s), placeholders filled. False when it failed fatally. */
  private async sendControl(conn: Conn, expr: Expr, stage: string): Promise<boolean> {
    const out = await run(expr, conn.input)
    if (!out.ok) {
      this.deps.metrics.mappingErrors.inc({ route: this.deps.route.name, stage })
      if (stage === 'open') {
        this.giveUp(new GatewayError('MAPPING_FAILED', { detail: 'open' }), {}, out.error)
        return false
      }
      this.log.warn({ event: 'mapping_error', stage, error: out.error }, `the ${stage} expression failed; nothing sent`)
      return true
    }
    const frames = Array.isArray(out.value) ? out.value : [out.value]
    for (const v of frames) {
      const frame = frameOf(v)
      if (frame !== null && conn.socket.isOpen) conn.socket.sendText(fillControl(frame, conn.counters))
    }
    return true
  }

  /** The conn is still the one this session cares about (current or rotating in) and the session lives. */
  private isLive(conn: Conn): boolean {
    return !this.closed && (conn === this.conn || conn === this.next)
  }

  private onSocketText(conn: Conn, text: string): void {
    this.counters.framesFromVendor++
    this.counters.bytesFromVendor += text.length
    this.run(async () => await this.handleVendorText(conn, text))
  }

  private async handleVendorText(conn: Conn, text: string): Promise<void> {
    if (this.closed && !conn.closing) return
    let msg: unknown
    try {
      msg = JSON.parse(text)
    } catch {
      msg = { text }
    }
    // Vendors that number their messages (AudioHook) are answered with the last number seen.
    const seq = (msg as { seq?: unknown } | null)?.seq
    if (typeof seq === 'number') conn.counters.serverseq = seq
    const input: MappingInput = { ...conn.input, msg }
    const audio = this.deps.route.mapping.audio!
    const route = this.deps.route.name
    if (conn.closing) {
      if (audio.closeWhen !== null && truthy(await run(audio.closeWhen, input)))
        conn.socket.close(audio.closeCode, 'done')
    }
    if (!conn.ready && !conn.closing && audio.ready !== null) {
      if (audio.ready.refused !== null && truthy(await run(audio.ready.refused, input))) {
        const reason = audio.ready.reason === null ? null : await run(audio.ready.reason, input)
        const vendorMessage = reason?.ok && typeof reason.value === 'string' ? reason.value.slice(0, 512) : undefined
        if (this.isLive(conn))
          this.attemptFailed(
            conn,
            `refused: ${vendorMessage ?? 'no reason'}`,
            false,
            new GatewayError('UPSTREAM_REFUSED'),
            { vendorMessage }
          )
        return
      }
      const ready = await run(audio.ready.when!, input)
      if (!ready.ok) this.deps.metrics.mappingErrors.inc({ route, stage: 'ready' })
      if (truthy(ready)) {
        let params: Record<string, unknown> = {}
        if (audio.ready.parameters !== null) {
          const p = await run(audio.ready.parameters, input)
          if (p.ok && p.value !== null && typeof p.value === 'object' && !Array.isArray(p.value))
            params = p.value as Record<string, unknown>
        }
        if (this.isLive(conn)) this.connReady(conn, params)
        return
      }
      // Not a readiness message: a result that came early; it goes through the rules below, after
      // CONNECTED (this runs on the session's ordered chain, so vendor order is kept).
    }
    for (const rule of audio.results) {
      const when = await run(rule.when, input)
      if (!when.ok) return this.resultError('when', when.error)
      if (when.value !== true) continue
      const out = await run(rule.emit, input)
      if (!out.ok) return this.resultError('emit', out.error)
      if (out.value === null || out.value === undefined) return
      if (!validator('platform-websocket-message')(out.value))
        return this.resultError('emit', 'the emitted value is not a PlatformWebSocketMessage')
      if (this.owner === null) {
        this.deps.metrics.vendorMessages.inc({ route, result: 'parked' })
        return
      }
      this.owner.deliver(JSON.stringify(out.value))
      this.deps.metrics.vendorMessages.inc({ route, result: 'emitted' })
      return
    }
    this.deps.metrics.vendorMessages.inc({ route, result: 'unmatched' })
  }

  private resultError(stage: string, error: string): void {
    this.deps.metrics.vendorMessages.inc({ route: this.deps.route.name, result: 'error' })
    this.deps.metrics.mappingErrors.inc({ route: this.deps.route.name, stage: `result_${stage}` })
    this.log.warn(
      { event: 'mapping_error', stage, mapping: this.deps.route.mapping.file, error },
      'a vendor result could not be mapped; the leg goes on'
    )
  }

  /** A socket is ready: the first one (CONNECTED), a failover's replacement, or a rotation's next one. */
  private connReady(conn: Conn, params: Record<string, unknown>): void {
    if (this.readyTimer !== null) {
      this.deps.clock.clearTimeout(this.readyTimer)
      this.readyTimer = null
    }
    conn.ready = true
    this.deps.route.pool.recordSuccess(conn.replica)
    conn.socket.startHeartbeat(this.deps.settings.vendorPingSeconds * 1000)
    if (conn === this.next) {
      // Rotation, make-before-break: audio moves to the new socket, the old one says goodbye.
      const old = this.conn
      this.next = null
      this.conn = conn
      if (old !== null) {
        // Audio held for an incomplete chunk moves to the new socket, so no silence is added mid-call.
        const rest = old.encoder?.takeRemainder() ?? null
        if (rest !== null) conn.encoder?.pushEncoded(rest)
        this.sayGoodbye(old)
      }
      this.log.info({ event: 'rotated', upstream: conn.replica.name }, 'vendor session rotated before its cap')
      this.armRotation()
      return
    }
    const wasRecovering = this.state === 'RECOVERING'
    this.state = 'READY'
    this.queueLimit = this.deps.settings.bufferBytes
    this.attempt = 0
    if (wasRecovering) {
      const gap = (this.deps.clock.now() - this.lostAt) / 1000
      this.deps.metrics.failovers.inc({ route: this.deps.route.name, result: 'ok' })
      this.deps.metrics.gapSeconds.observe({ route: this.deps.route.name }, gap)
      this.log.warn(
        {
          event: 'failover_done',
          upstream: conn.replica.name,
          from: this.failedReplica?.name,
          gapSeconds: gap,
          queuedFrames: this.queue.length,
          droppedFrames: this.counters.dropFailover
        },
        'vendor session replaced; audio flowing again'
      )
    } else {
      this.vendorParams = params
    }
    this.deps.store.setAffinity(
      this.key,
      { route: this.deps.route.name, replica: conn.replica.name, instance: this.deps.store.instanceId, legId: this.id },
      86400
    )
    this.armKeepalive()
    this.armRotation()
    this.tellOwner()
    this.flushQueue()
  }

  private tellOwner(): void {
    if (this.owner !== null && !this.ownerTold && this.state === 'READY') {
      this.ownerTold = true
      this.owner.sessionReady({ ...this.vendorParams })
    }
  }

  /** The mapping's keepalive: on its timer, when idle (no audio since the last tick) or always. */
  private armKeepalive(): void {
    const ka = this.deps.route.mapping.audio!.keepalive
    if (ka === null || this.keepaliveTimer !== null) return
    this.keepaliveTimer = this.deps.clock.setInterval(() => {
      const conn = this.conn
      if (conn === null || !conn.ready || this.state !== 'READY') return
      const sent = this.counters.framesToVendor
      const idle = sent === this.keepaliveMark
      this.keepaliveMark = sent
      if (ka.when === 'always' || idle)
        this.run(async () => {
          if (this.conn === conn) await this.sendControl(conn, ka.frame, 'keepalive')
        })
    }, ka.everyMs)
  }

  private armRotation(): void {
    const after = this.deps.route.mapping.audio!.rotateAfterMs
    if (after === null) return
    if (this.rotateTimer !== null) this.deps.clock.clearTimeout(this.rotateTimer)
    this.rotateTimer = this.deps.clock.setTimeout(() => {
      this.rotateTimer = null
      const conn = this.conn
      if (conn === null || this.state !== 'READY' || this.next !== null) return
      this.run(async () => {
        const next = await this.open(conn.replica, true)
        if (next === null) this.armRotation()
      })
    }, after)
  }

  // ---- failures, failover --------------------------------------------------------------------

  private onSocketClose(conn: Conn, code: number, reason: string, opened: boolean, error: string | null): void {
    const replica = conn.replica
    replica.activeStreams--
    replica.sessions.delete(this)
    if (opened) this.deps.metrics.wsCloses.inc({ side: 'vendor', code: String(code) })
    if (conn === this.next) {
      // A rotation attempt failed: keep the current socket, try again later.
      this.next = null
      this.log.warn(
        { event: 'rotation_failed', code, error },
        'could not open the rotated vendor session; keeping the current one'
      )
      this.armRotation()
      return
    }
    if (conn !== this.conn) return
    this.conn = null
    if (this.state === 'CLOSED') return
    if (!opened) {
      this.lastError = error
      // A vendor 4xx on the upgrade (bad credential, bad query) is the vendor's verdict, not a sick replica.
      if (!/^HTTP 4\d\d$/.test(error ?? '')) this.passiveFailure(replica, `connect: ${error ?? 'failed'}`)
      this.log.warn(
        { event: 'upstream_connect_failed', upstream: replica.name, error },
        'vendor replica unreachable; trying the next one'
      )
      this.connectNext()
      return
    }
    if (!conn.ready) {
      this.attemptFailed(
        conn,
        `closed with ${code} before ready`,
        code === 1006 || code === 1011,
        new GatewayError('UPSTREAM_REFUSED', { detail: `vendor closed with ${code} before it was ready` }),
        { vendorCloseCode: code }
      )
      return
    }
    // Lost mid-call. Only gateway-side failures count against the replica, never a graceful close.
    const abnormal = code === 1006 || code === 1011 || error !== null
    if (abnormal) this.passiveFailure(replica, `closed ${code}${error !== null ? ` (${error})` : ''}`)
    this.lose(
      `vendor closed with ${code}${error !== null ? ` (${error})` : ''}`,
      { vendorCloseCode: code, vendorCloseReason: reason.slice(0, 120) },
      conn
    )
  }

  /** An opening attempt failed after the socket opened: first open ends the leg; a failover tries on. */
  private attemptFailed(
    conn: Conn,
    why: string,
    gatewaySide: boolean,
    error: GatewayError,
    extra: Record<string, unknown> = {}
  ): void {
    if (gatewaySide) this.passiveFailure(conn.replica, why)
    if (conn === this.next) {
      this.next = null
      conn.socket.terminate()
      this.armRotation()
      return
    }
    if (this.conn === conn) this.conn = null
    conn.socket.terminate()
    if (this.state === 'OPENING') {
      this.giveUp(error, { upstream: conn.replica.name, ...extra })
      return
    }
    this.lastError = why
    this.log.warn(
      { event: 'failover_attempt_failed', upstream: conn.replica.name, why },
      'replacement vendor session failed; trying on'
    )
    this.connectNext()
  }

  private passiveFailure(replica: Replica, reason: string): void {
    if (this.deps.route.pool.recordFailure(replica, reason)) {
      this.deps.metrics.ejections.inc({ route: this.deps.route.name, upstream: replica.name })
      this.deps.log.warn(
        { event: 'upstream_ejected', upstream: replica.name, reason: replica.ejectReason },
        'replica ejected after gateway-side failures'
      )
      this.deps.registry.onReplicaDown(replica)
    }
  }

  /**
   * The vendor session is gone (socket lost, missed pongs, replica ejected or marked down). With an
   * owner and failover enabled: open a replacement and replay. Parked (no owner): just close.
   */
  lose(why: string, extra: Record<string, unknown> = {}, lost: Conn | null = this.conn): void {
    if (this.state !== 'READY' || lost === null) return
    if (this.conn === lost) this.conn = null
    lost.socket.terminate()
    // A rotation in progress is abandoned: the replacement below starts from a clean slate.
    this.next?.socket.terminate()
    this.next = null
    if (this.owner === null) {
      this.log.info(
        { event: 'parked_session_lost', why },
        'parked vendor session lost; a re-attach will open a new one'
      )
      this.close(false)
      return
    }
    if (this.deps.settings.failoverTimeoutSeconds <= 0) {
      this.giveUp(new GatewayError('UPSTREAM_CLOSED', { detail: why }), extra)
      return
    }
    this.state = 'RECOVERING'
    this.lostAt = this.deps.clock.now()
    this.deadline = this.lostAt + this.deps.settings.failoverTimeoutSeconds * 1000
    this.failedReplica = lost.replica
    const replay = this.ring.drain()
    this.queue.unshiftAll(replay)
    while (this.queue.bytes > this.queueLimit && this.queue.shift() !== undefined) this.counters.dropFailover++
    this.counters.bufferedBytes = this.queue.bytes
    this.log.warn(
      { event: 'failover_start', upstream: lost.replica.name, why, replayFrames: replay.length },
      'vendor session lost mid-call; opening a replacement, the platform leg stays open'
    )
    this.candidates = this.deps.route.pool.audioCandidates(new Set([lost.replica]))
    this.connectNext()
  }

  private scheduleRetry(): void {
    const now = this.deps.clock.now()
    if (now >= this.deadline) {
      this.deps.metrics.failovers.inc({ route: this.deps.route.name, result: 'failed' })
      this.giveUp(
        new GatewayError('UPSTREAM_CLOSED', {
          detail:
            `no replica could take over within ${this.deps.settings.failoverTimeoutSeconds} s ` +
            `(last: ${this.lastError ?? 'none available'})`
        }),
        {}
      )
      return
    }
    const wait = Math.min(RETRY_BACKOFF_MS[Math.min(this.attempt, RETRY_BACKOFF_MS.length - 1)], this.deadline - now)
    this.attempt++
    this.retryTimer = this.deps.clock.setTimeout(() => {
      this.retryTimer = null
      if (this.state !== 'RECOVERING') return
      this.candidates = this.deps.route.pool.audioCandidates()
      if (
        this.candidates.length === 0 &&
        this.failedReplica !== null &&
        this.failedReplica.config.audio !== undefined
      ) {
        // Never eject the last replica in effect: after backoff, the failed one is tried again.
        this.candidates = [this.failedReplica]
      }
      this.connectNext()
    }, wait)
  }

  /** The session cannot go on: tell the owner (its leg fails with `error`), then close. */
  private giveUp(error: GatewayError, extra: Record<string, unknown>, internal?: string): void {
    if (this.state === 'CLOSED') return
    if (this.state === 'RECOVERING') {
      this.counters.dropFailover += this.queue.length
      this.deps.metrics.gapSeconds.observe(
        { route: this.deps.route.name },
        (this.deps.clock.now() - this.lostAt) / 1000
      )
      this.log.error(
        { event: 'failover_failed', droppedFrames: this.counters.dropFailover, detail: internal },
        'no vendor session could replace the lost one; ending the leg'
      )
      this.queue.clear()
    }
    const owner = this.owner
    this.close(false)
    owner?.sessionFailed(error, internal === undefined ? extra : { ...extra, detail: internal })
  }

  // ---- platform side: park, re-attach, close --------------------------------------------------

  /** The platform leg is gone. Keep the vendor session for the re-attach grace, if there is one. */
  park(): void {
    this.owner = null
    this.ownerTold = false
    const grace = this.deps.settings.reattachGraceSeconds
    if (grace <= 0 || this.state === 'OPENING') {
      this.close(true)
      return
    }
    this.deps.registry.park(this)
    const conn = this.conn
    if (conn !== null) {
      this.deps.store.setAffinity(
        this.key,
        {
          route: this.deps.route.name,
          replica: conn.replica.name,
          instance: this.deps.store.instanceId,
          legId: this.id
        },
        grace
      )
      const pause = this.deps.route.mapping.audio!.pause
      if (pause !== null && conn.ready)
        this.run(async () => {
          await this.sendControl(conn, pause, 'pause')
        })
    }
    this.parkTimer = this.deps.clock.setTimeout(() => {
      this.parkTimer = null
      this.log.info({ event: 'grace_expired' }, 'no re-attach within the grace period; closing the vendor session')
      this.close(true)
    }, grace * 1000)
  }

  /** A platform leg with the same identity came back: it continues this vendor session. */
  attach(owner: SessionOwner, init: Record<string, unknown>, log: Logger): void {
    if (this.parkTimer !== null) {
      this.deps.clock.clearTimeout(this.parkTimer)
      this.parkTimer = null
      const resume = this.deps.route.mapping.audio!.resume
      const conn = this.conn
      if (resume && conn?.ready) {
        // Audio of the returning leg waits in the queue until the resume frame is out (AudioHook
        // refuses audio while paused); the control chain is async, the audio path is not.
        this.resuming = true
        this.run(async () => {
          await this.sendControl(conn, resume, 'resume')
          this.resuming = false
          this.flushQueue()
        })
      }
    }
    this.owner = owner
    this.ownerTold = false
    this.log = log
    this.input = { ...this.input, init }
    this.deps.registry.unpark(this)
    this.tellOwner()
  }

  /** End the session. `graceful`: queued audio, then the mapping's close frame, then the close handshake. */
  close(graceful: boolean): void {
    if (this.state === 'CLOSED') return
    const wasReady = this.state === 'READY'
    this.state = 'CLOSED'
    for (const t of [this.readyTimer, this.retryTimer, this.backlogTimer, this.parkTimer, this.rotateTimer])
      if (t !== null) this.deps.clock.clearTimeout(t)
    if (this.keepaliveTimer !== null) this.deps.clock.clearInterval(this.keepaliveTimer)
    this.readyTimer =
      this.retryTimer =
      this.backlogTimer =
      this.parkTimer =
      this.rotateTimer =
      this.keepaliveTimer =
        null
    this.next?.socket.terminate()
    this.next = null
    const conn = this.conn
    if (conn !== null) {
      if (graceful && wasReady && conn.ready && conn.socket.isOpen) {
        while (this.queue.length > 0) {
          const f = this.queue.shift()!
          this.sendAudio(conn, f)
          this.counters.framesToVendor++
          this.counters.bytesToVendor += f.length
        }
        conn.encoder?.flush()
        this.sayGoodbye(conn)
      } else {
        conn.socket.terminate()
      }
    }
    this.counters.dropAfterClose += this.queue.clear()
    this.counters.bufferedBytes = 0
    this.deps.registry.remove(this)
    this.deps.store.deleteAffinity(this.key, this.id)
    this.deps.metrics.endLeg(this.counters)
  }

  /** The mapping's close frame, then wait for `closeWhen` (or its timeout), then the close handshake. */
  private sayGoodbye(conn: Conn): void {
    const audio = this.deps.route.mapping.audio!
    conn.closing = true
    this.chain = this.chain
      .then(async () => {
        if (audio.close !== null) await this.sendControl(conn, audio.close, 'close')
        if (audio.closeWhen === null) {
          conn.socket.close(audio.closeCode, 'platform closed')
          return
        }
        // The vendor's own goodbye (Termination, closed, Metadata) closes it; this timer is the bound.
        this.deps.clock.setTimeout(() => conn.socket.close(audio.closeCode, 'platform closed'), audio.closeTimeoutMs)
      })
      .catch(() => conn.socket.terminate())
  }

  /** Control work (mapping evaluation) runs in arrival order, one at a time. */
  private run(task: () => Promise<void>): void {
    this.chain = this.chain.then(task).catch(err => {
      this.log.error({ event: 'session_bug', err }, 'unexpected error in vendor session control work')
      this.giveUp(new GatewayError('INTERNAL'), {})
    })
  }
}

export class SessionRegistry {
  private readonly byKey = new Map<string, VendorSession>()
  private readonly parked = new Set<VendorSession>()

  get(key: string): VendorSession | undefined {
    return this.byKey.get(key)
  }
  add(s: VendorSession): void {
    this.byKey.set(s.key, s)
  }
  remove(s: VendorSession): void {
    if (this.byKey.get(s.key) === s) this.byKey.delete(s.key)
    this.parked.delete(s)
  }

  park(s: VendorSession): void {
    this.parked.add(s)
  }
  unpark(s: VendorSession): void {
    this.parked.delete(s)
  }
  get parkedCount(): number {
    return this.parked.size
  }
  all(): IterableIterator<VendorSession> {
    return this.byKey.values()
  }

  /** A replica was ejected or probed down: its sessions fail over now rather than at their next error. */
  onReplicaDown(replica: Replica): void {
    for (const s of [...replica.sessions]) s.lose(`replica ${replica.name} marked down`)
  }
}
