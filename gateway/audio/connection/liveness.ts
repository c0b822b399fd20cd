import type { AudioSettings } from '../../config/types'
import type { AudioMapping } from '../../mapping/audio'

/** How a vendor session is watched, and the replay window that makes its loss cost no audio. */
export interface Liveness {
  /** WebSocket ping interval (0: none). */
  readonly pingMs: number
  /** A pong missing this long after its ping: the session is lost. */
  readonly timeoutMs: number
  /** Seconds of audio kept after it was written, replayed to the replacement session on a loss. */
  readonly replaySeconds: number
}

/** Margin of the replay window beyond detection: a coalesced write and a late timer tick. */
const REPLAY_MARGIN_SECONDS = 0.5

/**
 * A route's liveness: the mapping's own `liveness`, else the config's `vendorPingSeconds` and
 * `vendorPongTimeoutSeconds`. A frozen vendor is found at most ping + timeout after the last audio it
 * answered for (a pong answers everything written before its ping), so the replay window covers that
 * much audio and a margin, unless `audio.replaySeconds` says otherwise: then what is written since the
 * vendor's last sign of life beyond the ring is lost, and counted (`failover_unreplayed`).
 */
export function livenessOf(settings: AudioSettings, mapping: Pick<AudioMapping, 'liveness'>): Liveness {
  const pingSeconds = mapping.liveness?.pingSeconds ?? settings.vendorPingSeconds
  const timeoutSeconds = mapping.liveness?.timeoutSeconds ?? settings.vendorPongTimeoutSeconds
  const detection = pingSeconds > 0 ? pingSeconds + timeoutSeconds : 0
  return {
    pingMs: pingSeconds * 1000,
    timeoutMs: timeoutSeconds * 1000,
    replaySeconds: settings.replaySeconds ?? (detection > 0 ? detection + REPLAY_MARGIN_SECONDS : 2)
  }
}
