import type { AudioSettings } from '../../config/types'
import type { AudioMapping } from '../../mapping/audio'
import { defaultReplaySeconds } from '../feed/replay-ceiling'

/** How a vendor session is watched, and the replay window that makes its loss cost no audio. */
export interface Liveness {
  /** A WebSocket ping to a vendor silent this long (0: none; any message is a sign of life). */
  readonly pingMs: number
  /** Silent this much longer (no pong, no message): the session is lost (upstream/heartbeat.ts). */
  readonly timeoutMs: number
  /** Seconds of audio kept after it was written, replayed to the replacement session on a loss. */
  readonly replaySeconds: number
}

/**
 * A route's liveness: the mapping's own `liveness`, else the config's `vendorPingSeconds` and
 * `vendorPongTimeoutSeconds`. A frozen vendor is found once silent for ping + timeout (and one
 * heartbeat tick), so the replay window covers that much audio and a margin, unless
 * `audio.replaySeconds` says otherwise: then what is written since the vendor's last sign of life
 * beyond the ring is lost, and counted (`failover_unreplayed`).
 */
export function livenessOf(settings: AudioSettings, mapping: Pick<AudioMapping, 'liveness' | 'time'>): Liveness {
  const pingSeconds = mapping.liveness?.pingSeconds ?? settings.vendorPingSeconds
  const timeoutSeconds = mapping.liveness?.timeoutSeconds ?? settings.vendorPongTimeoutSeconds
  const detection = pingSeconds > 0 ? pingSeconds + timeoutSeconds : 0
  return {
    pingMs: pingSeconds * 1000,
    timeoutMs: timeoutSeconds * 1000,
    // The ring's ceiling: with result times, also the longest trail of finals (audio/feed/replay-ceiling.ts).
    replaySeconds: settings.replaySeconds ?? defaultReplaySeconds(detection, mapping.time != null)
  }
}
