import { randomUUID } from 'node:crypto'
import type { AudioMapping, PreviousSession } from '../../mapping/audio'
import type { Expr } from '../../mapping/expr'
import type { MappingInput, SocketInput } from '../../mapping/run'
import type { Replica, StreamLease } from '../../upstream/pool'
import type { SocketFailure } from '../../upstream/ws-leg'
import type { VendorLeg } from '../../upstream/vendor-leg'
import {
  audioMappingOf,
  type Connection,
  type ConnectionContext,
  type ConnectionEvents,
  type ConnectionState,
  type VendorFailure
} from './connection-contract'
import { FrameCounters } from '../feed/encoder'
import { type ControlStage, ControlFrames } from './control-frames'
import { livenessOf } from './liveness'
import { SignOfLife } from './sign-of-life'
import { VendorControl } from './vendor-control'
import { closeFailure, ON_CLOSE, READ } from './connection-states'
import { parseVendorText, type Reading, type Verdict } from './vendor-message'
import { upstreamInput, vendorTarget } from '../../mapping/vendor-target'
import { openLeg, socketEncoder } from './vendor-wire'
import { actOnResult, actOnStep, binaryMessages, type StepActions } from './connection-reading'
import { ConnectionTimers } from './connection-timers'
import { FollowOn } from './follow-on'
import { AudioWriter } from './audio-writer'
import { runSetup } from './setup-steps'

/**
 * One vendor connection of a session: builds URL and headers from the mapping, holds a stream lease on
 * its replica, opens the socket, sends the open frame, reads vendor messages (audio/connection/vendor-message.ts)
 * and acts on the verdict, encodes audio (a sink of audio/feed/feed.ts), sends keepalive and pause/resume
 * frames, and says goodbye. It decides no policy: it tells the session ready, refused or lost.
 */
export class VendorConnection implements Connection {
  state: ConnectionState = 'BUILDING'
  private socket: VendorLeg | null = null
  /** Taken when the replica is picked, so the next pick counts this stream; released on every end path. */
  private readonly lease: StreamLease
  private readonly frames = new FrameCounters()
  /** The mapping's control rules: per-session state and the audio gate (audio/connection/vendor-control.ts). */
  private readonly rules: VendorControl
  /** The mapping's own frames: open, keepalive, pause, resume, close, replies. */
  private readonly out: ControlFrames
  /** The mapping input of this connection, with its own mapping session id. */
  private readonly input: SocketInput
  private readonly audio: AudioMapping
  private readonly timers: ConnectionTimers
  /** What it was sent is accounted for while it closes: the vendor said its goodbye, or the session was told of the loss. */
  private accounted = false
  /** The audio path (a sink of audio/feed/feed.ts), with its rotation by audio. */
  private readonly audioOut: AudioWriter
  private readonly life = new SignOfLife()
  /** The call's frame this connection's audio starts at (audio/feed/result-timeline.ts). */
  startFrame = 0
  /** Its messages wait for the connection it took over from; others wait for it to close. */
  private readonly followOn: FollowOn

  /** What each step of a vendor message does here (audio/connection/connection-reading.ts `actOnStep`). */
  private readonly steps: StepActions = {
    end: step => this.end(step.after, step.vendorMessage),
    reading: step => this.reading(step.reading),
    reply: step => this.out.sendValue(step.value),
    emit: step => this.verdict(step.verdict),
    resume: () => this.rules.resume(),
    reconnect: () => this.askReplacement()
  }

  constructor(
    private readonly ctx: ConnectionContext,
    readonly replica: Replica,
    input: MappingInput,
    private readonly events: ConnectionEvents
  ) {
    this.audio = audioMappingOf(ctx.route)
    this.followOn = new FollowOn(
      ctx.clock,
      () => this.state === 'CLOSED',
      text => this.readText(text)
    )
    this.input = { ...input, upstream: upstreamInput(replica.config), session: { id: randomUUID() } }
    this.rules = new VendorControl(this.audio, this.frames, ctx)
    const socket = (): VendorLeg | null => this.socket
    this.out = new ControlFrames(this.audio, this.frames, this.rules, ctx, socket)
    this.audioOut = new AudioWriter(this.audio, this.frames, this.rules, () => this.askReplacement())
    this.timers = new ConnectionTimers(ctx.clock)
    this.lease = ctx.route.pool.leaseStream(replica, this)
    ctx.chain.run(async () => await this.connect())
  }

  // ---- audio (a feed sink) ------------------------------------------------------------------------

  /** While the vendor has audio held (a control rule's `pause`) this reads as full: the feed queues. */
  get bufferedAmount(): number {
    return this.rules.gate === 'paused' ? Number.POSITIVE_INFINITY : (this.socket?.bufferedAmount ?? 0)
  }

  /**
   * Per-write path (audio/connection/audio-writer.ts). Nothing goes to a connection that is no longer ready (a
   * control rule ended it on the vendor's word, or it is closing): counted as after close.
   */
  writeAudio(data: ArrayBuffer | Uint8Array): void {
    if (this.state === 'READY') this.audioOut.write(data)
    else this.ctx.counters.dropAfterClose++
  }

  /** A replacement, make-before-break: the vendor asked for one, or its cap on audio is near (rotation-by-audio.ts). */
  private askReplacement(): void {
    if (this.state === 'READY') this.events.reconnect?.(this)
  }

  takeOver(old: Connection): number {
    return this.audioOut.takeOver(old.takeRemainder())
  }

  takeRemainder(): Uint8Array | null {
    return this.audioOut.takeRemainder()
  }

  /** Make-before-break (audio/session/handover.ts): `done` once the vendor confirmed it read what it was sent so far. */
  confirm(done: () => void): void {
    if (this.state !== 'READY') return done()
    this.life.confirm(this.socket, done)
  }

  handover(): PreviousSession {
    return this.rules.handover(this.input.session.id)
  }

  pause(): void {
    this.socket?.pause()
  }
  resume(): void {
    this.socket?.resume()
  }

  // ---- opening -----------------------------------------------------------------------------------

  private async connect(): Promise<void> {
    if (this.state !== 'BUILDING') return
    const setup = await runSetup(this.ctx, this.audio, this.replica, this.input, () => this.state === 'BUILDING')
    if (setup !== null && !setup.ok)
      return setup.failure.kind === 'mapping'
        ? this.mappingFailed('open', setup.failure.error)
        : this.fail(setup.failure)
    if (setup !== null) this.input.steps = setup.steps
    const target = await vendorTarget(this.audio, this.replica.config, this.input)
    if (!target.ok) return this.mappingFailed(target.stage, target.error)
    if (this.state !== 'BUILDING') return
    this.state = 'CONNECTING'
    this.socket = openLeg(this.ctx, this.audio, this.replica, target, {
      onOpen: () => {
        this.lease.handshakeDone()
        if (this.state === 'CONNECTING') this.ctx.chain.run(async () => await this.opened())
      },
      onText: text => this.onText(text),
      onBinary: data => this.onBinary(data),
      onClose: (code, reason, opened, failure) => this.onClose(code, reason, opened, failure),
      onPing: () => this.life.ping(this.ctx.clock.now(), this.audioOut.bytes),
      onPong: () => {
        this.life.pong(this.socket)
        if (this.replica.failing) this.replica.answered()
      }
    })
  }

  /** The socket is open: encoder, open frame, then readiness (at once, or awaited with a deadline). */
  private async opened(): Promise<void> {
    if (this.state !== 'CONNECTING') return
    this.state = 'OPENING'
    const audio = this.audio
    if (this.socket === null) return
    const built = await socketEncoder(audio, this.input, this.frames, this.socket)
    if (!built.ok) return this.mappingFailed('template', built.error)
    this.audioOut.encodeWith(this.socket, built.encoder)
    if (audio.open !== null && !(await this.sendControl(audio.open, 'open'))) return
    if (this.state !== 'OPENING') return
    if (audio.ready === null) {
      this.becomeReady({})
      return
    }
    this.timers.readyBy(this.ctx.settings.readyTimeoutSeconds * 1000, () => {
      if (this.state === 'OPENING') this.fail({ kind: 'not-ready' })
    })
  }

  private becomeReady(params: Record<string, unknown>): void {
    this.timers.readyDone()
    this.state = 'READY'
    this.life.reset(this.ctx.clock.now(), this.audioOut.bytes)
    this.ctx.route.pool.recordSuccess(this.replica)
    this.replica.answered()
    const live = livenessOf(this.ctx.settings, this.audio)
    this.socket?.startHeartbeat(live.pingMs, live.timeoutMs)
    const ready = (): boolean => this.state === 'READY'
    this.out.keepalive(this.timers.keepalive, this.input, ready, () => this.audioOut.bytes)
    this.events.ready(this, params)
  }

  // ---- control frames (audio/connection/control-frames.ts) --------------------------------------------------

  /** Sends a control expression's frame(s); false when it was the open frame and it failed (the connection fails). */
  private async sendControl(expr: Expr, stage: ControlStage): Promise<boolean> {
    const error = await this.out.send(expr, stage, this.input)
    if (error === null) return true
    this.mappingFailed('open', error)
    return false
  }

  control(kind: 'pause' | 'resume', done: () => void = () => {}): void {
    const expr = this.audio[kind]
    this.ctx.chain.run(async () => {
      if (expr !== null && this.state === 'READY') await this.sendControl(expr, kind)
      done()
    })
  }

  // ---- vendor messages ---------------------------------------------------------------------------

  lossReport(): { bytesSinceLife: number; unreadBytes: number; lastLifeAt: number } {
    return this.life.report(this.socket, this.audioOut.bytes)
  }

  private onText(text: string): void {
    this.received(text.length)
    if (!this.followOn.defers(text)) this.readText(text)
  }

  private readText(text: string): void {
    this.ctx.chain.run(async () => await this.read(parseVendorText(text)))
  }

  /** A handover made this connection current while `old` says goodbye (audio/connection/follow-on.ts). */
  follow(old: Connection): void {
    if (this.audio.time != null) this.followOn.follow(old, this.audio.closeTimeoutMs)
  }

  whenClosed(fn: () => void): void {
    this.followOn.whenClosed(fn)
  }

  /** Binary vendor frames are read only on an event-stream socket (audio/connection/vendor-wire.ts); else dropped and counted. */
  private onBinary(data: Buffer): void {
    const messages = binaryMessages(this.ctx, this.audio, data)
    if (messages === null) return
    this.received(data.length)
    for (const msg of messages) this.ctx.chain.run(async () => await this.read(msg))
  }

  /** A vendor message is a sign of life (audio/connection/sign-of-life.ts: how much it says). */
  private received(bytes: number): void {
    if (this.state === 'READY' && this.socket !== null)
      this.life.messageOn(this.socket, this.audioOut.bytes, this.ctx.clock.now())
    // A session that answers proves its replica (upstream/pool.ts `failing`).
    if (this.replica.failing) this.replica.answered()
    const c = this.ctx.counters
    c.framesFromVendor++
    c.bytesFromVendor += bytes
  }

  private async read(msg: unknown): Promise<void> {
    const phase = READ[this.state]
    if (phase === null) return
    // Vendors that number their messages (AudioHook) are answered with the last number seen.
    const seq = (msg as { seq?: unknown } | null)?.seq
    if (typeof seq === 'number') this.frames.serverseq = seq
    const results = this.ctx.results
    const place = results === undefined ? null : { startFrame: this.startFrame, leg: results }
    for await (const step of this.rules.read(msg, phase, this.input, place)) actOnStep(step, this.steps)
  }

  private reading(r: Reading): void {
    if (r.closeMatched) {
      this.accounted = true
      this.socket?.close(this.audio.closeCode, 'done')
    }
    if (r.readyFailed) this.ctx.metrics.mappingErrors.inc({ route: this.ctx.route.name, stage: 'ready' })
    this.verdict(r.verdict)
  }

  /**
   * A control rule ended the session on the vendor's word: audio leaves it now (not even the encoder's
   * partial chunk goes: the replay ring has it for the next session); the close transaction follows.
   */
  private end(then: 'failover' | 'leg', vendorMessage: string | undefined): void {
    const tell = ON_CLOSE[this.state]
    if (tell === 'over') return
    this.audioOut.takeRemainder()
    this.goodbye()
    this.accounted = true
    this.events[tell](this, { kind: 'ended', then, vendorMessage })
  }

  private verdict(v: Verdict): void {
    if (v.kind === 'ready') {
      if (this.state === 'OPENING') this.becomeReady(v.params)
    } else if (v.kind === 'refused') {
      if (this.state === 'OPENING') this.fail({ kind: 'refused', vendorMessage: v.vendorMessage })
    } else actOnResult(this.ctx, v, (text, channel) => this.events.result(text, channel))
  }

  // ---- failure and the end -----------------------------------------------------------------------

  private mappingFailed(stage: 'url' | 'headers' | 'template' | 'open', error: string): void {
    this.ctx.metrics.mappingErrors.inc({ route: this.ctx.route.name, stage })
    this.ctx.log.warn({ event: 'mapping_error', stage, error }, 'the mapping could not build the vendor connection')
    this.fail({ kind: 'mapping', stage, error })
  }

  /** This connection failed on its own: it ends, then the session is told (refused or lost by state). */
  private fail(failure: VendorFailure): void {
    const tell = ON_CLOSE[this.state]
    if (tell === 'over') return
    this.abort()
    this.events[tell](this, failure)
  }

  /** Rebalancing: this call moves to `to` when its mapping allows a new session mid-call (`movable`). */
  moveTo(to: Replica): boolean {
    return this.audio.movable && this.state === 'READY' && this.events.move?.(this, to) === true
  }

  /**
   * The replica was marked down: a ready connection is lost now (unless its session ends it gracefully);
   * one still opening finds out by itself.
   */
  replicaDown(why: string): void {
    if (this.state !== 'READY' || this.events.replicaDown?.(this) === true) return
    this.fail({ kind: 'replica-down', why })
  }

  /** The stream stops counting at once; what the close means waits for the messages that came before it. */
  private onClose(code: number, reason: string, opened: boolean, socketFailure: SocketFailure | null): void {
    this.lease.release()
    if (opened) this.ctx.metrics.wsCloses.inc({ side: 'vendor', code: String(code) })
    this.ctx.chain.run(async () => this.closed(code, reason, opened, socketFailure))
  }

  private closed(code: number, reason: string, opened: boolean, socketFailure: SocketFailure | null): void {
    // A vendor's close frame comes in order behind the audio: it read all of it. Without one (1006: the
    // close handshake timed out, a missed pong, a reset) what came after its last sign of life is lost.
    if (this.state === 'CLOSING' && !this.accounted && (socketFailure !== null || code === 1006))
      this.events.unconfirmed?.(this)
    this.fail(closeFailure(code, reason, opened, socketFailure))
    this.finish()
  }

  /** What this socket reached (its mapping session id and frame counters), for the instance that continues the leg. */
  continuation(): NonNullable<MappingInput['continued']> {
    const f = this.frames
    return { id: this.input.session.id, seq: f.seq, serverseq: f.serverseq, chunk: f.chunk, audioMs: f.audioMs }
  }

  /**
   * Say goodbye (the session closes gracefully): the mapping's close frame, then the vendor's own
   * goodbye (`closeWhen`: Termination, closed, Metadata) or `closeTimeoutMs`, then the close handshake.
   */
  goodbye(reason = 'platform closed'): void {
    if (this.state === 'CLOSED' || this.state === 'CLOSING') return
    if (this.socket === null) return this.abort() // still building its URL: nothing to say goodbye to
    this.state = 'CLOSING'
    this.timers.stopOpen()
    this.audioOut.flush()
    const audio = this.audio
    this.ctx.chain.run(async () => {
      try {
        if (audio.close !== null) await this.sendControl(audio.close, 'close')
      } catch {
        this.socket?.terminate()
        return
      }
      if (audio.closeWhen === null) this.socket?.close(audio.closeCode, reason)
      else this.timers.closeBy(audio.closeTimeoutMs, () => this.socket?.close(audio.closeCode, reason))
    })
  }

  /** End at once, telling nobody (the session no longer wants it, or it failed). */
  abort(): void {
    if (this.state === 'CLOSED') return
    this.state = 'CLOSED'
    this.socket?.terminate()
    this.finish()
  }

  private finish(): void {
    this.state = 'CLOSED'
    this.lease.release()
    this.timers.stopAll()
    this.followOn.closed()
  }
}
