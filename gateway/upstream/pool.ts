import type { RouteConfig, UpstreamConfig } from '../config/types'

/** One replica of a route's vendor, with this instance's live counts. */
export class Replica {
  activeStreams = 0
  constructor (readonly config: UpstreamConfig) {}
  get name (): string { return this.config.name }
  get healthy (): boolean { return true }
}

/**
 * Picks replicas for a route. Audio: least active streams relative to weight, among replicas with an
 * audio URL, room under maxStreams and good health; ties keep config order.
 */
export class UpstreamPool {
  readonly replicas: readonly Replica[]
  constructor (route: RouteConfig) {
    this.replicas = route.upstreams.map(u => new Replica(u))
  }

  /** Audio replicas in the order to try them; empty when none can take a stream. */
  audioCandidates (): Replica[] {
    return this.replicas
      .filter(r => r.config.audio !== undefined && r.healthy && r.activeStreams < r.config.maxStreams)
      .sort((a, b) => a.activeStreams / a.config.weight - b.activeStreams / b.config.weight)
  }

  /** True when some replica could take an audio stream now (readiness, dry-run handshakes). */
  hasAudioCapacity (): boolean {
    return this.audioCandidates().length > 0
  }
}
