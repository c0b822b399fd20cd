import type { Clock, TimerHandle } from '../clock'
import type { AudioSettings } from '../config/types'
import type { LegCounters } from '../telemetry/metrics'
import { HoldBuffer } from './hold-buffer'
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
  private backlogTimer: TimerHandle | null = null

  constructor(
    private readonly counters: LegCounters,
    private readonly settings: AudioSettings,
    private readonly clock: Clock,
    private readonly overflow: (code: Overflow) => void
  ) {
    this.ring = new ReplayRing(Math.round(settings.replaySeconds * 8000))
    this.limit = settings.holdBufferBytes
    this.highWater = settings.vendorHighWaterBytes
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
      if (mode === 'hold') return this.overflowed('HOLD_BUFFER_OVERFLOW')
      if (mode !== 'recover' && this.settings.backpressurePolicy === 'close')
        return this.overflowed('BACKPRESSURE_OVERFLOW')
      // Backed up, gated or recovering: bounded; the oldest audio goes first (counted).
      while (this.queue.bytes + data.byteLength > this.limit && this.queue.shift() !== undefined)
        if (mode === 'recover') c.dropFailover++
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

  /** Write queued frames while the sink is below its high-water mark; poll again while some are left. */
  private flush(): void {
    const sink = this.sink
    if (sink === null || this.mode !== 'flow') return
    while (this.queue.length > 0 && sink.bufferedAmount < this.highWater) this.writeThrough(sink, this.queue.shift()!)
    this.counters.bufferedBytes = this.queue.bytes
    if (this.queue.length > 0) this.armBacklog()
  }

  private armBacklog(): void {
    if (this.backlogTimer !== null) return
    this.backlogTimer = this.clock.setTimeout(() => {
      this.backlogTimer = null
      this.flush()
    }, BACKLOG_POLL_MS)
  }

  // ---- modes, set by the session ----------------------------------------------------------------

  /** Audio flows to `sink`; what was queued goes first. After the first time, the queue bound is `bufferBytes`. */
  flowTo(sink: AudioSink): void {
    this.mode = 'flow'
    this.sink = sink
    this.limit = this.settings.bufferBytes
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
   * queue, trimmed to the bound (counted), and audio queues until a replacement `flowTo`. Returns the
   * number of frames replayed.
   */
  recover(): number {
    this.mode = 'recover'
    this.sink = null
    const replay = this.ring.drain()
    this.queue.unshiftAll(replay)
    while (this.queue.bytes > this.limit && this.queue.shift() !== undefined) this.counters.dropFailover++
    this.counters.bufferedBytes = this.queue.bytes
    return replay.length
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
    if (this.backlogTimer !== null) this.clock.clearTimeout(this.backlogTimer)
    this.backlogTimer = null
    this.counters.dropAfterClose += this.queue.clear()
    this.counters.bufferedBytes = 0
  }
}
