import type { AudioSettings } from '../config/types'
import { CODES, GatewayError, logLevelOf, type ErrorCode } from '../errors'
import type { MappingInput } from '../mapping/run'
import { frameOf, run, truthy } from '../mapping/run'
import type { RouteRuntime } from '../route'
import type { Logger } from '../telemetry/log'
import type { LegCounters, Metrics } from '../telemetry/metrics'
import type { Replica } from '../upstream/pool'
import { VendorSocket } from '../upstream/ws-leg'
import { validator, type Problem } from '../validate/compile'
import { checkHandshake, connectedFrame, errorFrame } from './handshake'
import { HoldBuffer } from './hold-buffer'

/** The platform socket as the leg sees it (the uWS adapter lives in server/audio-route.ts). */
export interface PlatformLeg {
  /** uWS semantics: 1 sent, 0 sent but backpressure built up, 2 dropped (backpressure limit). */
  sendText: (text: string) => number
  /** Send a close frame; the adapter then reports `onPlatformClose` synchronously. */
  end: (code: number, reason: string) => void
  bufferedAmount: () => number
}

export interface Clock {
  now: () => number
  setTimeout: (fn: () => void, ms: number) => NodeJS.Timeout
  clearTimeout: (t: NodeJS.Timeout) => void
}

export const systemClock: Clock = { now: () => performance.now(), setTimeout: (fn, ms) => setTimeout(fn, ms), clearTimeout: t => clearTimeout(t) }

export interface LegDeps {
  route: RouteRuntime
  settings: AudioSettings
  metrics: Metrics
  log: Logger
  clock: Clock
  legId: string
  /** Above this many bytes queued towards the platform, reading from the vendor pauses. */
  platformHighWaterBytes: number
}

/**
 * Leg states. AWAIT_INIT: upgraded, waiting for the init message. CONNECTING: init accepted, vendor
 * socket opening or not ready yet (audio is held). STREAMING: CONNECTED sent, audio relayed.
 * CLOSED: over (platform closed, or a failure ended it).
 */
export type LegState = 'AWAIT_INIT' | 'CONNECTING' | 'STREAMING' | 'CLOSED'

/** What a binary platform frame means in each state (a total table: a new state will not compile without a row). */
const BINARY_IN: Record<LegState, 'relay' | 'hold' | 'refuse' | 'count-late'> = {
  AWAIT_INIT: 'refuse',
  CONNECTING: 'hold',
  STREAMING: 'relay',
  CLOSED: 'count-late'
}

const BACKLOG_POLL_MS = 10

/**
 * One platform audio leg: handshake, vendor session, relay both ways.
 * The per-frame path is `onPlatformBinary` → `VendorSocket.sendBinary`: no parse, no await, no log,
 * no prom-client call; it bumps plain integers and writes through.
 */
export class AudioLeg {
  state: LegState = 'AWAIT_INIT'
  readonly counters: LegCounters
  private vendor: VendorSocket | null = null
  private replica: Replica | null = null
  private readonly queue = new HoldBuffer()
  private queueLimit: number
  private readonly highWater: number
  private handshakeTimer: NodeJS.Timeout | null
  private readyTimer: NodeJS.Timeout | null = null
  private backlogTimer: NodeJS.Timeout | null = null
  private vendorPaused = false
  private vendorClosing = false
  private input: MappingInput | null = null
  private chain: Promise<void> = Promise.resolve()
  private log: Logger
  private initAt = 0
  private candidates: Replica[] = []

  constructor (private readonly platform: PlatformLeg, private readonly deps: LegDeps) {
    this.counters = deps.metrics.startLeg(deps.route.name)
    this.counters.active = true
    this.queueLimit = deps.settings.holdBufferBytes
    this.highWater = deps.settings.vendorHighWaterBytes
    this.log = deps.log
    this.handshakeTimer = deps.clock.setTimeout(() => {
      this.handshakeTimer = null
      if (this.state === 'AWAIT_INIT') this.fail(new GatewayError('HANDSHAKE_TIMEOUT'))
    }, deps.settings.handshakeTimeoutSeconds * 1000)
  }

  // ---- platform events -------------------------------------------------------------------------

  /** Per-frame path. `data` is only valid during this call. */
  onPlatformBinary (data: ArrayBuffer): void {
    const c = this.counters
    c.framesFromPlatform++
    c.bytesFromPlatform += data.byteLength
    const vendor = this.vendor
    if (this.state === 'STREAMING' && this.queue.bytes === 0 && vendor !== null && vendor.bufferedAmount < this.highWater) {
      vendor.sendBinary(data)
      c.framesToVendor++
      c.bytesToVendor += data.byteLength
      return
    }
    this.binarySlowPath(data)
  }

  private binarySlowPath (data: ArrayBuffer): void {
    switch (BINARY_IN[this.state]) {
      case 'refuse':
        this.fail(new GatewayError('FIRST_FRAME_NOT_TEXT'))
        return
      case 'count-late':
        this.counters.dropAfterClose++
        return
      case 'hold':
        if (this.queue.bytes + data.byteLength > this.queueLimit) {
          this.counters.dropHold += this.queue.length + 1
          this.queue.clear()
          this.fail(new GatewayError('HOLD_BUFFER_OVERFLOW', { detail: `more than ${this.queueLimit} bytes` }))
          return
        }
        this.queue.push(data)
        this.counters.bufferedBytes = this.queue.bytes
        return
      case 'relay':
        // The vendor is backed up (or a backlog is draining): queue behind it, bounded.
        while (this.queue.bytes + data.byteLength > this.queueLimit) {
          if (this.deps.settings.backpressurePolicy === 'close') {
            this.counters.dropBackpressure += this.queue.length + 1
            this.queue.clear()
            this.fail(new GatewayError('BACKPRESSURE_OVERFLOW'))
            return
          }
          if (this.queue.shift() === undefined) break
          this.counters.dropBackpressure++
        }
        this.queue.push(data)
        this.counters.bufferedBytes = this.queue.bytes
        this.armBacklog()
    }
  }

  onPlatformText (data: ArrayBuffer): void {
    if (this.state !== 'AWAIT_INIT') {
      // The interface sends only audio after the init message; a stray text frame is ignored, not fatal.
      this.log.debug({ event: 'platform_text_ignored', state: this.state }, 'text frame after the init message ignored')
      return
    }
    this.onInit(Buffer.from(data).toString('utf8'))
  }

  /** The platform's socket has drained below its backpressure: resume reading from the vendor. */
  onPlatformDrain (): void {
    if (this.vendorPaused && this.platform.bufferedAmount() < this.deps.platformHighWaterBytes) {
      this.vendorPaused = false
      this.vendor?.resume()
    }
  }

  /** The platform socket closed (by the platform, or after our own `end`). Idempotent. */
  onPlatformClose (code: number): void {
    this.deps.metrics.wsCloses.inc({ side: 'platform', code: String(code) })
    if (this.state === 'CLOSED') return
    const wasStreaming = this.state === 'STREAMING'
    this.state = 'CLOSED'
    this.log.info({ event: 'platform_closed', code, framesFromPlatform: this.counters.framesFromPlatform, framesToVendor: this.counters.framesToVendor }, 'platform ended the leg')
    this.finish(wasStreaming ? 'ok' : 'abandoned', true)
  }

  /** End the leg from outside (shutdown): one ERROR frame with this code, then its close code. */
  shutdown (code: ErrorCode): void {
    this.fail(new GatewayError(code))
  }

  // ---- handshake -------------------------------------------------------------------------------

  private onInit (text: string): void {
    const route = this.deps.route
    const checked = checkHandshake(route, text)
    if (!checked.ok) {
      if (checked.stage === 'auth') this.deps.metrics.authFailures.inc({ hook: 'audio', reason: checked.error.code === 'AUTH_MISSING' ? 'missing' : 'invalid' })
      else this.deps.metrics.validationFailures.inc({ hook: 'audio' })
      this.fail(checked.error, checked.problems)
      return
    }
    if (this.handshakeTimer !== null) {
      this.deps.clock.clearTimeout(this.handshakeTimer)
      this.handshakeTimer = null
    }
    const id = checked.identity
    this.log = this.log.child({ busNo: id.busNo, contactId: id.contactId, perspective: id.perspective, requestId: id.requestId })
    this.input = {
      init: checked.init,
      leg: { id: this.deps.legId, route: route.name, ...id },
      route: { name: route.name, params: route.config.params, checksToken: route.audioAuth.required },
      upstream: { name: '', credential: null, hasCredential: false }
    }
    this.state = 'CONNECTING'
    this.initAt = this.deps.clock.now()
    this.candidates = route.pool.audioCandidates()
    if (this.candidates.length === 0) {
      this.fail(new GatewayError('NO_HEALTHY_UPSTREAM'))
      return
    }
    this.connectNext(null)
  }

  /** Try the next candidate replica; all tried: UPSTREAM_UNREACHABLE. */
  private connectNext (lastError: string | null): void {
    const replica = this.candidates.shift()
    if (replica === undefined) {
      this.fail(new GatewayError('UPSTREAM_UNREACHABLE', { detail: lastError ?? undefined }))
      return
    }
    const cfg = replica.config
    this.replica = replica
    replica.activeStreams++
    this.input!.upstream = { name: cfg.name, credential: cfg.credential ?? null, hasCredential: cfg.credential !== undefined }
    const headers = { ...cfg.headers }
    this.vendorClosing = false
    this.vendor = new VendorSocket(cfg.audio!, { headers, connectTimeoutMs: this.deps.settings.connectTimeoutSeconds * 1000 }, {
      onOpen: () => this.onVendorOpen(),
      onText: text => this.onVendorText(text),
      onBinary: bytes => { this.counters.dropVendorBinary++; this.counters.bytesFromVendor += bytes },
      onClose: (code, reason, opened, error) => this.onVendorClose(code, reason, opened, error)
    })
  }

  private onVendorOpen (): void {
    if (this.state !== 'CONNECTING') return
    const audio = this.deps.route.mapping.audio!
    this.enqueue(async () => {
      if (this.state !== 'CONNECTING') return
      if (audio.open !== null) {
        const out = await run(audio.open, this.input!)
        if (this.state !== 'CONNECTING') return
        if (!out.ok) return this.mappingFailed('open', out.error)
        const frame = frameOf(out.value)
        if (frame !== null) this.vendor!.sendText(frame)
      }
      if (audio.ready === null) {
        this.becomeReady({})
      } else {
        this.readyTimer = this.deps.clock.setTimeout(() => {
          this.readyTimer = null
          if (this.state === 'CONNECTING') this.fail(new GatewayError('UPSTREAM_NOT_READY'), [], { upstream: this.replica?.name })
        }, this.deps.settings.readyTimeoutSeconds * 1000)
      }
    })
  }

  private onVendorText (text: string): void {
    this.counters.framesFromVendor++
    this.counters.bytesFromVendor += text.length
    this.enqueue(async () => await this.handleVendorText(text))
  }

  private async handleVendorText (text: string): Promise<void> {
    if (this.state === 'CLOSED' || this.input === null) return
    let msg: unknown
    try { msg = JSON.parse(text) } catch { msg = { text } }
    const input: MappingInput = { ...this.input, msg }
    const audio = this.deps.route.mapping.audio!
    if (this.state === 'CONNECTING' && audio.ready !== null) {
      if (audio.ready.refused !== null && truthy(await run(audio.ready.refused, input))) {
        const reason = audio.ready.reason === null ? null : await run(audio.ready.reason, input)
        const vendorMessage = reason !== null && reason.ok && typeof reason.value === 'string' ? reason.value.slice(0, 512) : undefined
        if (this.state === 'CONNECTING') this.fail(new GatewayError('UPSTREAM_REFUSED'), [], { upstream: this.replica?.name, vendorMessage })
        return
      }
      const ready = await run(audio.ready.when!, input)
      if (!ready.ok) this.deps.metrics.mappingErrors.inc({ route: this.deps.route.name, stage: 'ready' })
      if (truthy(ready)) {
        let params: Record<string, unknown> = {}
        if (audio.ready.parameters !== null) {
          const p = await run(audio.ready.parameters, input)
          if (p.ok && p.value !== null && typeof p.value === 'object' && !Array.isArray(p.value)) params = p.value as Record<string, unknown>
        }
        if (this.state === 'CONNECTING') this.becomeReady(params)
        return
      }
      // Not a readiness message: it is a result that arrived early; it goes through the rules below,
      // after CONNECTED (this runs on the leg's ordered chain, so order is kept).
    }
    for (const rule of audio.results) {
      const when = await run(rule.when, input)
      if (!when.ok) {
        this.resultError('when', when.error)
        return
      }
      if (when.value !== true) continue
      const out = await run(rule.emit, input)
      if (!out.ok) return this.resultError('emit', out.error)
      if (out.value === null || out.value === undefined) return
      const platformMessage = validator('platform-websocket-message')
      if (!platformMessage(out.value)) return this.resultError('emit', 'the emitted value is not a PlatformWebSocketMessage')
      this.sendToPlatform(JSON.stringify(out.value))
      this.deps.metrics.vendorMessages.inc({ route: this.deps.route.name, result: 'emitted' })
      return
    }
    this.deps.metrics.vendorMessages.inc({ route: this.deps.route.name, result: 'unmatched' })
  }

  private resultError (stage: string, error: string): void {
    this.deps.metrics.vendorMessages.inc({ route: this.deps.route.name, result: 'error' })
    this.deps.metrics.mappingErrors.inc({ route: this.deps.route.name, stage: `result_${stage}` })
    this.log.warn({ event: 'mapping_error', stage, mapping: this.deps.route.mapping.file, error }, 'a vendor result could not be mapped; the leg goes on')
  }

  private mappingFailed (stage: string, error: string): void {
    this.deps.metrics.mappingErrors.inc({ route: this.deps.route.name, stage })
    this.fail(new GatewayError('MAPPING_FAILED', { detail: stage }), [], {}, error)
  }

  private becomeReady (vendorParameters: Record<string, unknown>): void {
    if (this.readyTimer !== null) {
      this.deps.clock.clearTimeout(this.readyTimer)
      this.readyTimer = null
    }
    this.state = 'STREAMING'
    const seconds = (this.deps.clock.now() - this.initAt) / 1000
    this.deps.metrics.handshakeDuration.observe({ route: this.deps.route.name }, seconds)
    this.sendToPlatform(connectedFrame({ ...vendorParameters, legId: this.deps.legId, route: this.deps.route.name }))
    this.log.info({ event: 'connected', upstream: this.replica?.name, handshakeSeconds: seconds, heldFrames: this.queue.length }, 'vendor session ready; audio flowing')
    this.queueLimit = this.deps.settings.bufferBytes
    this.flushQueue()
  }

  // ---- relay helpers ---------------------------------------------------------------------------

  /** Write queued frames while the vendor socket is below its high-water mark. */
  private flushQueue (): void {
    const vendor = this.vendor
    if (vendor === null || this.state !== 'STREAMING') return
    const c = this.counters
    while (this.queue.length > 0 && vendor.bufferedAmount < this.highWater) {
      const f = this.queue.shift()!
      vendor.sendBinary(f)
      c.framesToVendor++
      c.bytesToVendor += f.length
    }
    c.bufferedBytes = this.queue.bytes
    if (this.queue.length > 0) this.armBacklog()
  }

  private armBacklog (): void {
    if (this.backlogTimer !== null) return
    this.backlogTimer = this.deps.clock.setTimeout(() => {
      this.backlogTimer = null
      this.flushQueue()
    }, BACKLOG_POLL_MS)
  }

  private sendToPlatform (text: string): void {
    if (this.state === 'CLOSED') return
    const status = this.platform.sendText(text)
    this.counters.framesToPlatform++
    this.counters.bytesToPlatform += text.length
    if (status === 2) {
      this.log.warn({ event: 'platform_backpressure_drop' }, 'a message to the platform was dropped at the backpressure limit')
    } else if (status === 0 && !this.vendorPaused && this.platform.bufferedAmount() >= this.deps.platformHighWaterBytes) {
      this.vendorPaused = true
      this.vendor?.pause()
    }
  }

  /** Run control work (mapping evaluation) in arrival order, one at a time. */
  private enqueue (task: () => Promise<void>): void {
    this.chain = this.chain.then(task).catch(err => {
      this.log.error({ event: 'leg_bug', err }, 'unexpected error in leg control work')
      this.fail(new GatewayError('INTERNAL'))
    })
  }

  // ---- vendor close, failure, teardown ------------------------------------------------------------

  private onVendorClose (code: number, reason: string, opened: boolean, error: string | null): void {
    if (opened) this.deps.metrics.wsCloses.inc({ side: 'vendor', code: String(code) })
    if (this.replica !== null) {
      this.replica.activeStreams--
      this.replica = null
    }
    this.vendor = null
    if (this.vendorClosing || this.state === 'CLOSED') return
    if (this.state === 'CONNECTING') {
      if (!opened) {
        this.log.warn({ event: 'upstream_connect_failed', error }, 'vendor replica unreachable; trying the next one')
        this.connectNext(error)
        return
      }
      this.fail(new GatewayError('UPSTREAM_REFUSED', { detail: `vendor closed with ${code} before it was ready` }), [], { vendorCloseCode: code })
      return
    }
    this.fail(new GatewayError('UPSTREAM_CLOSED', { detail: `vendor closed with ${code}` }), [], { vendorCloseCode: code, vendorCloseReason: reason.slice(0, 120) })
  }

  /**
   * End the leg with a catalogued error: one ERROR frame and a close with the code's close code.
   * Safe from any state; the first failure wins.
   */
  private fail (error: GatewayError, problems: readonly Problem[] = [], extra: Record<string, unknown> = {}, internal?: string): void {
    if (this.state === 'CLOSED') return
    const wasStreaming = this.state === 'STREAMING'
    this.state = 'CLOSED'
    const code: ErrorCode = error.code
    const fields = { event: 'leg_failed', code, flag: CODES[code].flag, pointers: error.pointers.length > 0 ? error.pointers : undefined, detail: internal, ...extra }
    this.log[logLevelOf(code)](fields, error.message)
    const status = this.platform.sendText(errorFrame(error, problems, extra))
    if (status !== 2) {
      this.counters.framesToPlatform++
    }
    this.finish(code.toLowerCase(), wasStreaming)
    this.platform.end(CODES[code].close, code)
  }

  /** Release everything the leg holds. `graceful`: say goodbye to the vendor with the mapping's close frame. */
  private finish (outcome: string, graceful: boolean): void {
    for (const t of [this.handshakeTimer, this.readyTimer, this.backlogTimer]) if (t !== null) this.deps.clock.clearTimeout(t)
    this.handshakeTimer = this.readyTimer = this.backlogTimer = null
    const vendor = this.vendor
    if (vendor !== null) {
      this.vendorClosing = true
      if (graceful && vendor.isOpen) {
        // Audio still queued goes out first, then the mapping's close frame, then the close handshake.
        while (this.queue.length > 0) {
          const f = this.queue.shift()!
          vendor.sendBinary(f)
          this.counters.framesToVendor++
          this.counters.bytesToVendor += f.length
        }
        this.closeVendorGracefully(vendor)
      } else {
        vendor.terminate()
      }
    }
    const dropped = this.queue.clear()
    if (dropped > 0) this.counters.dropAfterClose += dropped
    this.counters.bufferedBytes = 0
    this.counters.active = false
    this.deps.metrics.sessionsTotal.inc({ route: this.deps.route.name, outcome })
    this.deps.metrics.endLeg(this.counters)
  }

  private closeVendorGracefully (vendor: VendorSocket): void {
    const audio = this.deps.route.mapping.audio!
    const input = this.input
    if (audio.close === null || input === null) {
      vendor.close(audio.closeCode, 'platform closed')
      return
    }
    // The close expression is async; the chain keeps it after any result still being mapped.
    this.chain = this.chain.then(async () => {
      const out = await run(audio.close!, input)
      if (!out.ok) {
        this.deps.metrics.mappingErrors.inc({ route: this.deps.route.name, stage: 'close' })
        this.log.warn({ event: 'mapping_error', stage: 'close', error: out.error }, 'close expression failed; closing the vendor socket without it')
      } else {
        const frame = frameOf(out.value)
        if (frame !== null && vendor.isOpen) vendor.sendText(frame)
      }
      vendor.close(audio.closeCode, 'platform closed')
    }).catch(() => vendor.terminate())
  }
}
