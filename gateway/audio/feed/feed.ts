import type { Clock } from '../../clock'
import type { AudioSettings } from '../../config/types'
import type { LegCounters } from '../../telemetry/metrics'
import { type FlushWheel, flushWheel, PLATFORM_BYTES_PER_MS, type WheelClient } from './coalescer'
import { FrameQueue } from './frame-ring'
import { Pacer } from './pacer'
import { ReplayRing } from './replay-ring'
import type { ResultTimeline } from './result-timeline'

/** Where the feed writes audio: the vendor connection that currently carries it (audio/connection/vendor-connection.ts). */
export interface AudioSink {
  /** Bytes queued towards the vendor; at or above the high-water mark the feed queues instead. */
  readonly bufferedAmount: number
  /** One write: a platform frame, or a coalesced chunk of whole frames. `data` is only valid during this call. */
  writeAudio: (data: ArrayBuffer | Uint8Array) => void
}

/**
 * Where audio goes in the modes that have no vendor connection (hold, recover, closed): never written to,
 * since only `flow` writes and `flowTo` sets the sink it writes to; it reads as backed up, and throws if a
 * bug wrote to it anyway.
 */
const NO_SINK: AudioSink = {
  bufferedAmount: Number.POSITIVE_INFINITY,
  writeAudio: () => {
    throw new Error('audio written with no vendor connection to write to')
  }
}

/**
 * What platform audio does in each feed mode. hold: before the vendor is first ready, bounded by
 * `holdBufferBytes`, overflow ends the leg. flow: written through (coalesced to chunks), queued while
 * the vendor is backed up (`backpressurePolicy`). gated: queued behind a control frame still on its way
 * (resume), same policy. recover: queued while a replacement connection opens; the oldest audio goes
 * first. closed: counted late.
 */
type FeedMode = 'hold' | 'flow' | 'gated' | 'recover' | 'closed'

/** The feed cannot take more audio under the policy in force: the session ends the leg with this code. */
export type Overflow = 'HOLD_BUFFER_OVERFLOW' | 'BACKPRESSURE_OVERFLOW'

const BACKLOG_POLL_MS = 10
/** Credit the pacer keeps across late ticks: a vendor sees at most replayRate × (W + 0.1 s) in any window W. */
const PACER_BURST_MS = 100
/** A platform frame (20 ms of µ-law): the size failover counts assume when no frame was kept to measure. */
const PLATFORM_FRAME_BYTES = 160

/**
 * What the lost vendor connection may not have processed (audio/connection/connection-contract.ts `lossReport`), in
 * platform audio bytes (µ-law as the feed wrote it, before any encoding): exact whatever the writes were.
 */
export interface LossReport {
  /** Bytes written to it since its last sign of life (pong, result). */
  readonly bytesSinceLife: number
  /** Bytes still in its socket buffer when it was lost (never read by the vendor). */
  readonly unreadBytes: number
}

/**
 * The per-frame path of one leg: platform frames to the vendor connection, coalesced to chunks of
 * `chunkMs` (whole frames; 0: one write per frame), through a bounded queue when it cannot take them
 * now; each write kept in the replay ring. It knows no vendor, no mapping and no failure policy; the
 * session sets its mode and sink, and hears of overflow. A partial chunk goes when its oldest byte has
 * waited `chunkMs`, at the end of the leg, when the leg parks, and into the replay on failover. Its
 * only timer is the clock's flush wheel (audio/feed/coalescer.ts), shared by every leg: partial chunks, the
 * backlog's high-water polling and pacing all run on it.
 *
 * Counters: `framesToVendor` counts writes to the vendor connection (chunks), `bytesToVendor` their
 * platform bytes; the drop counters count platform frames (every queue entry is whole frames).
 */
export class VendorFeed implements WheelClient {
  private mode: FeedMode = 'hold'
  private sink: AudioSink = NO_SINK
  /** Audio not written yet, oldest first: held, queued, replayed, or the partial chunk. */
  private readonly queue = new FrameQueue()
  private readonly ring: ReplayRing
  private limit: number
  private readonly highWater: number
  /** Paces backlog (held, replayed, queued audio) to `replayRate` × real time; null: unpaced. */
  private readonly pacer: Pacer | null
  /** Minimum bytes per write (0: a frame each). */
  private readonly chunkBytes: number
  /** The queue holds a backlog (not just a partial chunk): live audio queues behind it, paced. */
  private backlog = false
  /** Clock ms the oldest byte of the partial chunk came in. */
  private partialSince = 0
  private readonly wheel: FlushWheel
  /** The wheel's mark (audio/feed/coalescer.ts). */
  wheelDue = 0
  /** Platform frames that came in, in all: the call's timeline (audio/feed/result-timeline.ts). */
  private entered = 0

  /**
   * `overflow`: the feed cannot take more audio; the session ends the leg. `holdFull`: the hold buffer
   * is full before the first ready; true when the session moved on to another replica: the oldest held
   * audio is then dropped (counted) and holding goes on; false: HOLD_BUFFER_OVERFLOW. `chunkMs`: ms of
   * audio per write (audio/feed/coalescer.ts `feedChunkMs`); `channels`: interleaved channels of that audio (a join).
   */
  constructor(
    private readonly counters: LegCounters,
    private readonly settings: AudioSettings,
    private readonly clock: Clock,
    private readonly overflow: (code: Overflow) => void,
    private readonly holdFull: () => boolean = () => false,
    replayRate: number = settings.replayRate,
    private readonly chunkMs = 0,
    channels = 1,
    /** The leg's delivered finals (audio/feed/result-timeline.ts): the ring then releases audio they cover. */
    private readonly finals: ResultTimeline | null = null
  ) {
    this.ring = new ReplayRing(Math.round((settings.replaySeconds ?? 0) * 8000))
    this.limit = settings.holdBufferBytes
    this.highWater = settings.vendorHighWaterBytes
    this.chunkBytes = chunkMs * PLATFORM_BYTES_PER_MS * channels
    this.pacer = replayRate > 0 ? new Pacer(replayRate, PACER_BURST_MS, this.chunkBytes) : null
    this.wheel = flushWheel(clock)
  }

  /**
   * Per-frame path. `data` is only valid during this call: copied into the partial chunk (written once
   * it holds `chunkMs`), written through, or queued. No parsing, awaits, logging; one view of `data`.
   */
  write(data: ArrayBuffer): void {
    this.entered++
    if (this.mode !== 'flow' || this.backlog) return this.enqueue(data)
    const sink = this.sink
    if (this.chunkBytes === 0) {
      if (sink.bufferedAmount < this.highWater) this.writeOut(sink, new Uint8Array(data), 1)
      else this.enqueue(data)
      return
    }
    const q = this.queue
    if (q.length === 0) {
      // A new partial chunk: the wake left by the last one (written when it filled) moves to this one's due.
      this.partialSince = this.clock.now()
      this.wheel.move(this, this.partialSince + this.chunkMs)
    }
    q.push(new Uint8Array(data), 1)
    if (q.bytes < this.chunkBytes) return
    if (sink.bufferedAmount < this.highWater) this.writeOut(sink, q.takeRun(this.chunkBytes), q.runFrames)
    else this.backedUp()
  }

  /**
   * One write to the vendor, kept for replay. Counters only. With delivered finals, the ring releases the
   * writes they cover wholly (and the slabs those leave empty): it holds only audio not yet final
   * (`replaySeconds` is its ceiling).
   */
  private writeOut(sink: AudioSink, data: Uint8Array, frames: number): void {
    sink.writeAudio(data)
    const ring = this.ring
    const finals = this.finals
    if (finals !== null && ring.length > 0) {
      // Released before the new write is kept: a slab they empty is the one it takes (the pool gives
      // the slab given back last first).
      const open = finals.firstOpenFrame
      let first = this.entered - this.queue.frames - frames - ring.frames
      while (ring.length > 0 && first + ring.nextFrames <= open) first += ring.dropFront()
    }
    ring.keep(data, frames)
    this.counters.framesToVendor++
    this.counters.bytesToVendor += data.length
  }

  private enqueue(data: ArrayBuffer): void {
    const c = this.counters
    const mode = this.mode
    if (mode === 'closed') {
      c.dropAfterClose++
      return
    }
    const q = this.queue
    if (q.bytes + data.byteLength > this.limit) {
      if (mode === 'hold' && !this.holdFull()) return this.overflowed('HOLD_BUFFER_OVERFLOW')
      if (mode !== 'recover' && this.settings.backpressurePolicy === 'close')
        return this.overflowed('BACKPRESSURE_OVERFLOW')
      // Held (another replica is being tried), backed up, gated or recovering: bounded; the oldest audio
      // goes first (counted).
      while (q.bytes + data.byteLength > this.limit && q.length > 0) {
        const f = q.dropFront()
        if (mode === 'recover') c.dropFailover += f
        else if (mode === 'hold') c.dropHold += f
        else c.dropBackpressure += f
      }
    }
    q.push(new Uint8Array(data), 1)
    c.bufferedBytes = q.bytes
    if (mode === 'flow') this.backedUp()
  }

  /** The vendor cannot take audio now: what is queued is a backlog, polled on the wheel. */
  private backedUp(): void {
    this.backlog = true
    this.counters.bufferedBytes = this.queue.bytes
    this.wheel.schedule(this, this.clock.now() + BACKLOG_POLL_MS)
  }

  private overflowed(code: Overflow): void {
    const dropped = this.queue.clear() + 1
    if (code === 'HOLD_BUFFER_OVERFLOW') this.counters.dropHold += dropped
    else this.counters.dropBackpressure += dropped
    this.counters.bufferedBytes = 0
    this.overflow(code)
  }

  /** The flush wheel: the backlog's next writes, or a partial chunk that has waited long enough. */
  onWheel(now: number): void {
    this.flush(now)
  }

  /**
   * Write queued audio, oldest first, a chunk at a time, while the sink is below its high-water mark
   * and the pacer allows; the wheel wakes the feed again while some is left (live audio queues behind
   * it meanwhile). Without a backlog: the partial chunk goes once its oldest byte waited `chunkMs`.
   */
  private flush(now: number): void {
    const sink = this.sink
    if (this.mode !== 'flow') return
    const q = this.queue
    if (!this.backlog) {
      if (q.length === 0) return
      const due = this.partialSince + this.chunkMs
      if (now < due) return this.wheel.schedule(this, due)
      if (sink.bufferedAmount >= this.highWater) return this.backedUp()
      this.writeOut(sink, q.takeRun(q.bytes), q.runFrames)
      return
    }
    const pacer = this.pacer
    pacer?.refill(now)
    while (
      q.length > 0 &&
      sink.bufferedAmount < this.highWater &&
      (pacer === null || pacer.take(q.runBytes(this.chunkBytes)))
    )
      this.writeOut(sink, q.takeRun(this.chunkBytes), q.runFrames)
    this.counters.bufferedBytes = q.bytes
    if (q.length > 0) return this.wheel.schedule(this, now + BACKLOG_POLL_MS)
    this.backlog = false
    q.shrink()
  }

  // ---- modes, set by the session ----------------------------------------------------------------

  /** Audio flows to `sink`; what was queued goes first. After the first time, the queue bound is `bufferBytes`. */
  flowTo(sink: AudioSink): void {
    this.mode = 'flow'
    this.sink = sink
    this.limit = this.settings.bufferBytes
    const now = this.clock.now()
    this.pacer?.start(now)
    this.backlog = this.queue.length > 0
    this.flush(now)
  }

  /** Rotation: later audio goes to `sink`, in whatever mode the feed is in. */
  retarget(sink: AudioSink): void {
    this.sink = sink
  }

  /** Audio queues behind a control frame (resume) until `flowTo` again. */
  gate(): void {
    if (this.mode === 'flow') this.mode = 'gated'
  }

  /** The platform leg is gone (the session parks): the partial chunk goes now, before any pause frame. */
  flushPartial(): void {
    const sink = this.sink
    if (this.mode === 'flow' && !this.backlog && this.queue.length > 0)
      this.writeOut(sink, this.queue.takeRun(this.queue.bytes), this.queue.runFrames)
  }

  /**
   * The sink is gone mid-call: what it may not have processed (the replay ring) goes in front of the
   * queue (which starts with the partial chunk, never written), trimmed to the bound (counted), and audio
   * queues until a replacement `flowTo`. What it may not have processed beyond the ring (written since
   * its last sign of life, or never read from its socket; with result times, what no delivered final
   * covers) is counted as `failover_unreplayed`. Returns the platform frames replayed and the frames counted.
   */
  recover(loss: LossReport | null = null, fromFrame = 0): { replayed: number; unreplayed: number } {
    this.mode = 'recover'
    this.sink = NO_SINK
    this.backlog = false
    this.wheel.cancel(this)
    const ring = this.ring
    const queuedBefore = this.queue.frames
    const unreplayed = this.unreplayed(loss, fromFrame)
    this.counters.dropFailoverUnreplayed += unreplayed
    const q = this.queue
    q.prependFrom(ring)
    // Audio the platform has finals for (before `fromFrame`) is not replayed: the writes before it, and
    // the frames before it of the write it falls in (writes need not end where finals do).
    while (q.length > 0 && this.nextFrame + q.nextFrames <= fromFrame) q.dropFront()
    if (q.length > 0 && fromFrame > this.nextFrame) q.trimFront(fromFrame - this.nextFrame)
    const replayed = Math.max(0, q.frames - queuedBefore)
    while (q.bytes > this.limit && q.length > 0) this.counters.dropFailover += q.dropFront()
    this.counters.bufferedBytes = q.bytes
    return { replayed, unreplayed }
  }

  /**
   * Frames the replay cannot cover that the platform will get nothing for. Without result times: written
   * since the lost connection's last sign of life (or unread), before the ring's first frame. With them:
   * every frame after the last delivered final (`fromFrame`) and before the ring's first one (the ceiling
   * let it go), whether or not the lost connection had read it: a final for it can no longer come.
   */
  private unreplayed(loss: LossReport | null, fromFrame: number): number {
    const ring = this.ring
    if (this.finals === null)
      return this.framesOf((loss === null ? 0 : Math.max(loss.bytesSinceLife, loss.unreadBytes)) - ring.bytes)
    const written = this.entered - this.queue.frames
    return Math.max(0, written - ring.frames - Math.max(fromFrame, this.finals.firstOpenFrame))
  }

  /** Lost with no failover: all it may not have processed is counted as `failover_unreplayed` (frames). */
  lost(loss: LossReport | null): void {
    this.counters.dropFailoverUnreplayed += this.framesLost(loss)
  }

  /** The platform frames a lost connection may not have processed. */
  framesLost(loss: LossReport | null): number {
    return loss === null ? 0 : this.framesOf(Math.max(loss.bytesSinceLife, loss.unreadBytes))
  }

  /** Platform frames `bytes` of audio stand for, at the size of the frames the ring kept (160 when none). */
  private framesOf(bytes: number): number {
    if (bytes <= 0) return 0
    const ring = this.ring
    return Math.ceil(ring.frames > 0 ? (bytes * ring.frames) / ring.bytes : bytes / PLATFORM_FRAME_BYTES)
  }

  /** The call's frame the next write to a vendor starts with (frames in, less those still queued). */
  get nextFrame(): number {
    return this.entered - this.queue.frames
  }

  /** Platform frames waiting in the queue. */
  get queued(): number {
    return this.queue.frames
  }

  /** Recovery gave up: the queued audio is lost to the failover (counted). */
  dropQueued(): void {
    this.counters.dropFailover += this.queue.clear()
    this.counters.bufferedBytes = 0
  }

  /** Closing gracefully: hand every queued frame to `sink` in chunks, the partial one last (no replay: nothing comes after). */
  drainTo(sink: AudioSink): void {
    const q = this.queue
    while (q.length > 0) {
      const run = q.takeRun(this.chunkBytes)
      sink.writeAudio(run)
      this.counters.framesToVendor++
      this.counters.bytesToVendor += run.length
    }
    this.counters.bufferedBytes = 0
  }

  /** Over: later frames are counted as late, queued ones as dropped after close; the ring's slabs go back to the pool. */
  close(): void {
    this.mode = 'closed'
    this.sink = NO_SINK
    this.backlog = false
    this.wheel.cancel(this)
    this.counters.dropAfterClose += this.queue.clear()
    this.counters.bufferedBytes = 0
    this.ring.clear()
  }
}
