/**
 * Sequenced frames (emulator option `sequencedFrames`): for loss accounting by a load generator that
 * numbers its audio. Each 160-byte frame (20 ms of 8 kHz µ-law, the platform's frame) carries, little
 * endian: bytes 0-7 a float64 send time (ms since the epoch), bytes 8-11 a uint32 sequence number per
 * stream (0, 1, 2, ...), bytes 12-15 a uint32 stream id (the sender's leg). The rest is ignored.
 *
 * A session records its arrivals as runs: frames whose sequence numbers follow one another and arrived
 * at most SPLIT_GAP_MS apart. A missing or repeated number, another stream id, or a longer pause in
 * arrivals starts a new run, so a reader can tell exactly which frames arrived, which twice (replayed),
 * and how long the longest pause of arrivals was (above SPLIT_GAP_MS). Bounded: at most MAX_RUNS runs
 * per session are kept; frames past them are counted in `unrecorded`.
 */

/** Bytes per frame: 20 ms of 8 kHz µ-law. */
export const SEQ_FRAME_BYTES = 160
/** Arrivals further apart than this start a new run. */
export const SPLIT_GAP_MS = 250
export const MAX_RUNS = 20_000

/** One run: [first sequence number, last, first arrival (ms since the epoch), last arrival, longest delay (ms)]. */
export type SequenceRun = [number, number, number, number, number]

export interface SequenceReport {
  /** The stream id of the first frame (null before any); frames of another id start runs of their own and count in `foreign`. */
  stream: number | null
  /** Frames read (a message of n × 160 bytes is n frames). */
  frames: number
  /** Frames whose stream id was not the first frame's. */
  foreign: number
  /** Binary messages whose length was not a multiple of 160 (their tail is ignored). */
  badLength: number
  /** Longest delay of a frame: arrival minus its send time (ms). */
  maxDelayMs: number
  runs: SequenceRun[]
  /** Frames in no run (the session had MAX_RUNS runs already). */
  unrecorded: number
}

/** Reads the sequenced frames of one session's audio (the emulator's recorder feeds it every audio message). */
export class FrameSequence {
  private stream: number | null = null
  private frames = 0
  private foreign = 0
  private badLength = 0
  private maxDelay = 0
  private readonly runs: SequenceRun[] = []
  private unrecorded = 0
  private run: SequenceRun | null = null
  private runStream = -1

  /** `now`: the arrival time, ms since the epoch. */
  add(audio: Uint8Array, now: number): void {
    const n = Math.floor(audio.length / SEQ_FRAME_BYTES)
    if (n * SEQ_FRAME_BYTES !== audio.length) this.badLength++
    if (n === 0) return
    const view = new DataView(audio.buffer, audio.byteOffset, n * SEQ_FRAME_BYTES)
    for (let i = 0; i < n; i++) {
      const o = i * SEQ_FRAME_BYTES
      const sentAt = view.getFloat64(o, true)
      const seq = view.getUint32(o + 8, true)
      const stream = view.getUint32(o + 12, true)
      this.frames++
      this.stream ??= stream
      if (stream !== this.stream) this.foreign++
      const delay = now - sentAt
      if (delay > this.maxDelay) this.maxDelay = delay
      const r = this.run
      if (r !== null && stream === this.runStream && seq === r[1] + 1 && now - r[3] <= SPLIT_GAP_MS) {
        r[1] = seq
        r[3] = now
        if (delay > r[4]) r[4] = delay
        continue
      }
      this.open(seq, stream, now, delay)
    }
  }

  private open(seq: number, stream: number, now: number, delay: number): void {
    this.runStream = stream
    if (this.runs.length >= MAX_RUNS) {
      this.unrecorded++
      this.run = null
      return
    }
    this.run = [seq, seq, now, now, Math.max(0, delay)]
    this.runs.push(this.run)
  }

  report(): SequenceReport {
    return {
      stream: this.stream,
      frames: this.frames,
      foreign: this.foreign,
      badLength: this.badLength,
      maxDelayMs: this.maxDelay,
      runs: this.runs.map(r => [...r] as SequenceRun),
      unrecorded: this.unrecorded
    }
  }
}
