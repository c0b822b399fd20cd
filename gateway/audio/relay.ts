import type { Clock, TimerHandle } from '../clock'
import type { AudioSettings } from '../config/types'
import type { LegCounters } from '../telemetry/metrics'
import { HoldBuffer } from './hold-buffer'
import { Pacer } from './pacer'
import { ReplayRing } from './replay-ring'

/** Where the relay writes audio: the vendor connection that currently carries it (audio/vendor-connection.ts). */
export interface AudioSink {
  /** Bytes queued towards the vendor; at or above the high-water mark the relay queues instead. */
  readonly bufferedAmount: number
  /** Per-frame path: `data` is only valid during this call. */
  writeAudio: (data: ArrayBuffer | Uint8Array) => void
}

/**
 * What platform audio does in each relay mode. hold: before the vendor is first ready, bounded by
 * `holdBufferBytes`, overflow ends the leg. flow: written through, queued while the vendor is backed up
 * (`backpressurePolicy`). gated: queued behind a control frame still on its way (resume), same policy.
 * recover: queued while a replacement connection opens; the oldest audio goes first. closed: counted late.
 */
type RelayMode = 'hold' | 'flow' | 'gated' | 'recover' | 'closed'

/** The relay cannot take more audio under the policy in force: the session ends the leg with this code. */
export type Overflow = 'HOLD_BUFFER_OVERFLOW' | 'BACKPRESSURE_OVERFLOW'

const BACKLOG_POLL_MS = 10
/** Credit the pacer keeps across late ticks: a vendor sees at most replayRate × (W + 0.1 s) in any window W. */
const PACER_BURST_MS = 100

/** What the lost vendor connection may not have processed (audio/connection-contract.ts `lossReport`). */
export interface LossReport {
  /** Frames written to it since its last sign of life (pong, result). */
  readonly framesSinceLife: number
  /** Frames still in its socket buffer when it was lost (never read by the vendor). */
  readonly unreadFrames: number
}

/**
 * The per-frame path of one leg: platform frames to the vendor connection, through a bounded queue
 * when it cannot take them now, each written frame kept in the replay ring. It knows no vendor, no
 * mapping and no failure policy; the session sets its mode and sink, and hears of overflow.
 */
export class AudioRelay {
  private mode: RelayMode = 'hold'
  private sink: AudioSink | null = null
  private readonly queue = new HoldBuffer()
  private readonly ring: ReplayRing
  private limit: number
  private readonly highWater: number
  /** The one timer of the leg's backlog: high-water polling and pacing both run on it. */
  private backlogTimer: TimerHandle | null = null
  /** Paces backlog (held, replayed, queued audio) to `replayRate` × real time; null: unpaced. */
  private readonly pacer: Pacer | null

  /**
   * `overflow`: the relay cannot take more audio; the session ends the leg. `holdFull`: the hold buffer
   * is full before the first ready; true when the session moved on to another replica: the oldest held
   * audio is then dropped (counted) and holding goes on; false: HOLD_BUFFER_OVERFLOW.
   */
  constructor(
    private readonly counters: LegCounters,
    private readonly settings: AudioSettings,
    private readonly clock: Clock,
    private readonly overflow: (code: Overflow) => void,
    private readonly holdFull: () => boolean = () => false,
    replayRate: number = settings.replayRate
  ) {
    this.ring = new ReplayRing(Math.round(settings.replaySeconds * 8000))
    this.limit = settings.holdBufferBytes
    this.highWater = settings.vendorHighWaterBytes
    this.pacer = replayRate > 0 ? new Pacer(replayRate, PACER_BURST_MS) : null
  }

  /** Per-frame path. `data` is only valid during this call: written through, or copied into the queue. */
  write(data: ArrayBuffer): void {
    const sink = this.sink
    if (this.mode === 'flow' && this.queue.bytes === 0 && sink !== null && sink.bufferedAmount < this.highWater) {
      this.writeThrough(sink, data)
      return
    }
    this.enqueue(data)
  }

  /** Write one platform frame to the vendor and keep it for replay. Per-frame path: counters only. */
  private writeThrough(sink: AudioSink, data: ArrayBuffer | Uint8Array): void {
    sink.writeAudio(data)
    this.ring.push(data)
    this.counters.framesToVendor++
    this.counters.bytesToVendor += data.byteLength
  }

  private enqueue(data: ArrayBuffer): void {
    const c = this.counters
    const mode = this.mode
    if (mode === 'closed') {
      c.dropAfterClose++
      return
    }
    if (this.queue.bytes + data.byteLength > this.limit) {
      if (mode === 'hold' && !this.holdFull()) return this.overflowed('HOLD_BUFFER_OVERFLOW')
      if (mode !== 'recover' && this.settings.backpressurePolicy === 'close')
        return this.overflowed('BACKPRESSURE_OVERFLOW')
      // Held (another replica is being tried), backed up, gated or recovering: bounded; the oldest audio
      // goes first (counted).
      while (this.queue.bytes + data.byteLength > this.limit && this.queue.shift() !== undefined)
        if (mode === 'recover') c.dropFailover++
        else if (mode === 'hold') c.dropHold++
        else c.dropBackpressure++
    }
    this.queue.push(data)
    c.bufferedBytes = this.queue.bytes
    if (mode === 'flow') this.armBacklog()
  }

  private overflowed(code: Overflow): void {
    const dropped = this.queue.clear() + 1
    if (code === 'HOLD_BUFFER_OVERFLOW') this.counters.dropHold += dropped
    else this.counters.dropBackpressure += dropped
    this.counters.bufferedBytes = 0
    this.overflow(code)
  }

  /**
   * Write queued frames, oldest first, while the sink is below its high-water mark and the pacer allows;
   * the one backlog timer keeps running while some are left (live audio queues behind them meanwhile).
   */
  private flush(): void {
    const sink = this.sink
    if (sink === null || this.mode !== 'flow') return this.stopBacklog()
    const pacer = this.pacer
    pacer?.refill(this.clock.now())
    const q = this.queue
    while (q.length > 0 && sink.bufferedAmount < this.highWater && (pacer === null || pacer.take(q.nextBytes))) {
      const f = q.shift()!
      this.writeThrough(sink, f)
      q.recycle(f)
    }
    this.counters.bufferedBytes = q.bytes
    if (q.length > 0) this.armBacklog()
    else this.stopBacklog()
  }

  private armBacklog(): void {
    if (this.backlogTimer !== null) return
    this.backlogTimer = this.clock.setInterval(() => this.flush(), BACKLOG_POLL_MS)
  }

  private stopBacklog(): void {
    if (this.backlogTimer !== null) this.clock.clearInterval(this.backlogTimer)
    this.backlogTimer = null
  }

  // ---- modes, set by the session ----------------------------------------------------------------

  /** Audio flows to `sink`; what was queued goes first. After the first time, the queue bound is `bufferBytes`. */
  flowTo(sink: AudioSink): void {
    this.mode = 'flow'
    this.sink = sink
    this.limit = this.settings.bufferBytes
    this.pacer?.start(this.clock.now())
    this.flush()
  }

  /** Rotation: later audio goes to `sink`, in whatever mode the relay is. */
  retarget(sink: AudioSink): void {
    this.sink = sink
  }

  /** Audio queues behind a control frame (resume) until `flowTo` again. */
  gate(): void {
    if (this.mode === 'flow') this.mode = 'gated'
  }

  /**
   * The sink is gone mid-call: what it may not have processed (the replay ring) goes in front of the
   * queue, trimmed to the bound (counted), and audio queues until a replacement `flowTo`. What it may
   * not have processed beyond the ring (written since its last sign of life, or never read from its
   * socket) is counted as `failover_unreplayed`. Returns the frames replayed and the frames counted.
   */
  recover(loss: LossReport | null = null): { replayed: number; unreplayed: number } {
    this.mode = 'recover'
    this.sink = null
    this.stopBacklog()
    const replay = this.ring.drain()
    const atRisk = loss === null ? 0 : Math.max(loss.framesSinceLife, loss.unreadFrames)
    const unreplayed = Math.max(0, atRisk - replay.length)
    this.counters.dropFailoverUnreplayed += unreplayed
    this.queue.unshiftAll(replay)
    while (this.queue.bytes > this.limit && this.queue.shift() !== undefined) this.counters.dropFailover++
    this.counters.bufferedBytes = this.queue.bytes
    return { replayed: replay.length, unreplayed }
  }

  /** Frames waiting in the queue. */
  get queued(): number {
    return this.queue.length
  }

  /** Recovery gave up: the queued audio is lost to the failover (counted). */
  dropQueued(): void {
    this.counters.dropFailover += this.queue.clear()
    this.counters.bufferedBytes = 0
  }

  /** Closing gracefully: hand every queued frame to `sink` (no replay: nothing comes after). */
  drainTo(sink: AudioSink): void {
    for (let f = this.queue.shift(); f !== undefined; f = this.queue.shift()) {
      sink.writeAudio(f)
      this.counters.framesToVendor++
      this.counters.bytesToVendor += f.length
    }
  }

  /** Over: later frames are counted as late, queued ones as dropped after close. */
  close(): void {
    this.mode = 'closed'
    this.sink = null
    this.stopBacklog()
    this.counters.dropAfterClose += this.queue.clear()
    this.counters.bufferedBytes = 0
  }
}
