import type { AudioMapping } from '../../mapping/compile'
import type { LegCounters } from '../../telemetry/metrics'
import type { ConnectionContext, ConnectionFactory } from '../connection/connection-contract'
import { ControlChain } from '../connection/control-chain'
import { livenessOf } from '../connection/liveness'
import { VendorConnection } from '../connection/vendor-connection'
import { feedChunkMs } from '../feed/coalescer'
import { VendorFeed } from '../feed/feed'
import { effectiveReplayRate } from '../feed/pacer'
import type { ResultTimeline } from '../feed/result-timeline'
import type { SessionDeps } from './session-contract'

// What a vendor session (audio/session/session.ts) is made of, from its route and settings.

/** The audio mapping of the route (audio/connection/connection-contract.ts: its connections check it too). */
export { audioMappingOf } from '../connection/connection-contract'

/** Real vendor connections (audio/connection/vendor-connection.ts): unless `SessionDeps.connect` says otherwise. */
export const newConnection: ConnectionFactory = (ctx, replica, input, events) =>
  new VendorConnection(ctx, replica, input, events)

/**
 * What a session's connections share: its dependencies, counters and results, and one control chain whose
 * unexpected errors go to `bug` (the session logs them and ends).
 */
export function sessionContext(
  deps: SessionDeps,
  counters: LegCounters,
  results: ResultTimeline | null,
  bug: (err: unknown) => void
): ConnectionContext {
  const chain = new ControlChain(bug)
  return { ...deps, chain, counters, group: { joinedOn: null }, ...(results !== null ? { results } : {}) }
}

/**
 * A vendor session's feed (audio/feed/feed.ts), as its route's audio mapping and the audio settings size it:
 * the replay ring covers the vendor's detection window (audio/connection/liveness.ts) unless the config
 * sets its own; the mapping's replay rate, chunk and channels; `results` when the mapping says where they are.
 */
export function sessionFeed(
  deps: Pick<SessionDeps, 'settings' | 'clock'>,
  audio: AudioMapping,
  counters: LegCounters,
  results: ResultTimeline | null,
  on: { overflow: ConstructorParameters<typeof VendorFeed>[3]; holdFull: () => boolean }
): VendorFeed {
  const { settings } = deps
  return new VendorFeed(
    counters,
    { ...settings, replaySeconds: livenessOf(settings, audio).replaySeconds },
    deps.clock,
    on.overflow,
    on.holdFull,
    effectiveReplayRate(settings.replayRate, audio.replayRate),
    feedChunkMs(audio.frames, settings.coalesceMs),
    audio.frames.channels ?? 1,
    results
  )
}
