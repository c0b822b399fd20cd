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
 */
export class ResultTimeline {
  /** The end of the last delivered final, on the call's timeline (ms). */
  deliveredMs = 0
  /** Results not delivered because they were wholly before the mark (a replay transcribed again). */
  dropped = 0

  /** A result ending at `endMs` of the call: whether it goes to the platform (a final then moves the mark). */
  admit(endMs: number, final: boolean): boolean {
    if (this.deliveredMs > 0 && endMs <= this.deliveredMs) {
      this.dropped++
      return false
    }
    if (final && endMs > this.deliveredMs) this.deliveredMs = endMs
    return true
  }

  /** The first call frame the platform has no final for: where a replay starts. */
  get firstOpenFrame(): number {
    return Math.floor(this.deliveredMs / FRAME_MS)
  }
}
