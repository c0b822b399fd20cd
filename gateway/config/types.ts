/** The validated, frozen configuration (schemas/gateway-config.schema.json is the source of truth). */
export interface UpstreamConfig {
  readonly name: string
  readonly audio?: string
  readonly text?: string
  readonly credential?: string
  readonly headers: Readonly<Record<string, string>>
  readonly weight: number
  readonly maxStreams: number
  readonly maxPendingHandshakes: number
  readonly maxInFlight: number
}

export interface RouteConfig {
  readonly name: string
  readonly default: boolean
  /** Text hook: answer 202 at once and deliver in the background. */
  readonly async: boolean
  /** Absolute path of the mapping file. */
  readonly mapping: string
  readonly auth: { readonly audio?: readonly string[]; readonly text?: readonly string[] }
  readonly params: Readonly<Record<string, unknown>>
  readonly upstreams: readonly UpstreamConfig[]
}

export interface AudioSettings {
  readonly handshakeTimeoutSeconds: number
  readonly connectTimeoutSeconds: number
  readonly readyTimeoutSeconds: number
  readonly holdBufferBytes: number
  readonly bufferBytes: number
  readonly vendorHighWaterBytes: number
  readonly backpressurePolicy: 'drop-oldest' | 'close'
  readonly replaySeconds: number
  readonly failoverTimeoutSeconds: number
  readonly reattachGraceSeconds: number
  readonly vendorPingSeconds: number
  /** Replay and queued audio to a new vendor session: at most this × real time (0: unpaced). */
  readonly replayRate: number
  /** Session-open rate limit per replica (upstream/pool.ts). */
  readonly sessionBreaker: {
    readonly quickLossSeconds: number
    readonly quickLosses: number
    readonly windowSeconds: number
    readonly holdOffSeconds: number
  }
  /** Backoff between failover rounds and repeated failovers (audio/failover.ts). */
  readonly recoveryBackoff: { readonly baseMs: number; readonly maxMs: number; readonly stableSeconds: number }
}

export interface HealthSettings {
  readonly active: {
    readonly kind: 'ws' | 'http' | 'none'
    readonly path: string
    readonly intervalSeconds: number
    readonly timeoutSeconds: number
    readonly unhealthyThreshold: number
    readonly healthyThreshold: number
  }
  readonly passive: {
    readonly consecutiveFailures: number
    readonly baseEjectionSeconds: number
    readonly maxEjectionSeconds: number
  }
}

export interface StoreSettings {
  readonly keyPrefix: string
  readonly syncIntervalSeconds: number
  readonly leaseSeconds: number
  readonly sentinels?: readonly { readonly host: string; readonly port: number }[]
  readonly sentinelName: string
  readonly clusterNodes?: readonly { readonly host: string; readonly port: number }[]
}

/** The text hook and its vendor HTTP calls (schemas/gateway-config.schema.json `text`). */
export interface TextSettings {
  readonly maxBodyBytes: number
  readonly timeoutSeconds: number
  readonly connectTimeoutSeconds: number
  readonly headersTimeoutSeconds: number
  readonly bodyTimeoutSeconds: number
  readonly connectionsPerReplica: number
  readonly maxResponseBytes: number
  readonly asyncQueueSize: number
  readonly asyncConcurrency: number
  readonly retries: number
  readonly retryBudgetPercent: number
  readonly balancing: 'round-robin' | 'p2c'
}

export interface EmulatorConfig {
  readonly kind: 'passthrough' | 'json-events'
  readonly port: number
  readonly host: string
  readonly resultEveryFrames: number
}

export interface Config {
  /** Absolute path of the file this came from. */
  readonly file: string
  readonly listen: {
    readonly host: string
    readonly port: number
    readonly tls: { readonly cert: string; readonly key: string; readonly passphrase?: string } | null
  }
  readonly admin: { readonly host: string; readonly port: number }
  readonly redis: string | null
  readonly uws: {
    readonly allowFallback: boolean
    readonly idleTimeoutSeconds: number
    readonly maxPayloadBytes: number
    readonly maxBackpressureBytes: number
  }
  readonly audio: AudioSettings
  readonly text: TextSettings
  readonly health: HealthSettings
  readonly store: StoreSettings
  readonly log: { readonly level: string }
  readonly emulators: readonly EmulatorConfig[]
  readonly routes: Readonly<Record<string, RouteConfig>>
  /**
   * Every credential value in the config (auth lists, upstream credentials and headers, TLS
   * passphrase, Redis password): redacted from every log line.
   */
  readonly secrets: readonly string[]
  /** Non-fatal findings, logged at start-up and printed by `check`. */
  readonly warnings: readonly string[]
}
