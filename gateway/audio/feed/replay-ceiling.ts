/**
 * How far a shipped vendor's finals may trail the audio they cover, at its published defaults, where
 * one bounds it: Speechmatics' `max_delay` (4 s by default: the final within that much of the end of a
 * word; docs.speechmatics.com "Latency"). Deepgram finalizes at each endpoint (10 ms of silence by
 * default) and publishes no bound for speech without pauses; Amazon Transcribe, AssemblyAI and OpenAI
 * Realtime finalize at the end of a segment or turn (its length plus a silence). The table, with what
 * the emulators measured: docs/concepts/replicas-and-failover.md "How much audio a leg keeps".
 */
export const FINALS_TRAIL_SECONDS = 4

/** Margin of the replay window beyond detection: a coalesced write and a late timer tick. */
export const REPLAY_MARGIN_SECONDS = 0.5

/**
 * `audio.replaySeconds` when the config leaves it out: the ring's ceiling. It must reach back from
 * the moment a frozen vendor is found (`detectionSeconds` after its last sign of life: ping + pong
 * timeout) to the first audio the platform has no final for. Without result times (a mapping with
 * `time: {none}`) the ring releases nothing, so it keeps detection and a margin (3.5 s with the
 * defaults). With them, what it holds is the audio since the last delivered final (about a second
 * for a vendor that finalizes promptly), and the ceiling adds the longest trail of finals a shipped
 * vendor bounds (`FINALS_TRAIL_SECONDS`): 7.5 s with the defaults, reached only by a leg whose vendor
 * has finalized nothing for that long. No detection (pings off): 2 s, plus the trail with result times.
 */
export function defaultReplaySeconds(detectionSeconds: number, resultTimes: boolean): number {
  const liveness = detectionSeconds > 0 ? detectionSeconds + REPLAY_MARGIN_SECONDS : 2
  return resultTimes ? liveness + FINALS_TRAIL_SECONDS : liveness
}
