/** One platform frame of the call's audio: 20 ms (µ-law 8 kHz, 160 bytes). */
export const FRAME_MS = 20

/**
 * Where on the call's audio one vendor connection's results are: its audio starts at the call's frame
 * `startFrame` (set when audio starts flowing to it: after the replay, the first frame it gets).
 */
export interface ConnectionTimeline {
  startFrame: number
}

/**
 * Each final once (issue 32): per leg, how far on the call's timeline (ms) the finals delivered to the
 * platform reach. A result wholly before that (its end at or before it) is not delivered, final or
 * partial, whichever vendor session produced it: the audio it is about was transcribed and delivered
 * already. A final delivered moves the mark to its end. On failover, rotation or reconnect the replay
 * starts at the frame the mark falls in (audio/feed/feed.ts `recover`), so the new vendor session transcribes
 * only what the platform has no final for.
 *
 * A joined (stereo) session has one mark per channel: each channel's finals are about its own speaker,
 * over the same stretch of the call as the other's. A result names its channel (the result rule's
 * `channel`); one that names none is held against the lowest mark. The replay starts where the lowest
 * mark is: audio that one channel has no final for is still replayed.
 */
export class ResultTimeline {
  /** The end of the last delivered final, on the call's timeline (ms): the lowest over the channels. */
  deliveredMs = 0
  /** Results not delivered because they were wholly before the mark (a replay transcribed again). */
  dropped = 0
  /** Per channel (a joined session's): the end of its last delivered final; null: one channel. */
  private readonly marks: number[] | null

  constructor(channels = 1) {
    this.marks = channels > 1 ? new Array<number>(channels).fill(0) : null
  }

  /**
   * A result ending at `endMs` of the call (on `channel` of a joined session; null: none named): whether
   * it goes to the platform (a final then moves its channel's mark).
   */
  admit(endMs: number, final: boolean, channel: number | null = null): boolean {
    const marks = this.marks
    const c = marks !== null && channel !== null && channel >= 0 && channel < marks.length ? channel : -1
    const mark = c < 0 ? this.deliveredMs : (marks as number[])[c]
    if (mark > 0 && endMs <= mark) {
      this.dropped++
      return false
    }
    if (!final || endMs <= mark) return true
    if (c < 0) {
      // A final for no channel in particular (or a one-channel session): all of the call up to its end.
      if (marks !== null) for (let i = 0; i < marks.length; i++) marks[i] = Math.max(marks[i], endMs)
      this.deliveredMs = endMs
      return true
    }
    ;(marks as number[])[c] = endMs
    this.deliveredMs = Math.min(...(marks as number[]))
    return true
  }

  /** The first call frame the platform has no final for: where a replay starts. */
  get firstOpenFrame(): number {
    return Math.floor(this.deliveredMs / FRAME_MS)
  }
}
