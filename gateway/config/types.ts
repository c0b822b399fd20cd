import type { TracingSettings } from '../telemetry/tracing'
import type { RouteTokenSettings, TokenSettings } from './tokens'

/** The validated, frozen configuration (schemas/gateway-config.schema.json is the source of truth). */
export interface UpstreamConfig {
  readonly name: string
  readonly audio?: string
  readonly text?: string
  readonly credential?: string
  readonly headers: Readonly<Record<string, string>>
  /** Keys a mapping's `audio.sign` signs the vendor URL with (secrets; absent: none). */
  readonly signing?: Readonly<{ accessKeyId: string; secretAccessKey: string; sessionToken?: string }>
  readonly weight: number
  readonly maxStreams: number
  readonly maxPendingHandshakes: number
  readonly maxInFlight: number
}

/**
 * Every quota the gateway counts, by its config name (`tenants.<t>.limits`, `routes.<r>.limits`): the one
 * list of limits. A new limit is one name here, its counting in auth/quotas.ts, its schema and its docs.
 * 0: no limit.
 */
export const QUOTA_NAMES = ['legs', 'legsPerSecond', 'utterancesPerSecond'] as const
export type QuotaName = (typeof QUOTA_NAMES)[number]
export type Quota = { readonly [name in QuotaName]: number }

/** One customer (schemas/gateway-config.schema.json `tenant`): the credentials that identify it, its quotas. */
export interface TenantConfig {
  readonly name: string
  readonly credentials: {
    readonly audio?: readonly string[]
    readonly text?: readonly string[]
    /** Token-auth clients (`tokens.clients[].id`) whose tokens identify this tenant. */
    readonly clients?: readonly string[]
  }
  readonly limits: Quota
}

export interface RouteConfig {
  readonly name: string
  /** The tenants that may use this route (names under `tenants:`); absent: every tenant. */
  readonly tenants?: readonly string[]
  /** The route's own quotas, all its tenants together (absent in configs built by hand: none). */
  readonly limits?: Quota
  readonly default: boolean
  /** Text hook: answer 202 at once and deliver in the background. */
  readonly async: boolean
  /** Absolute path of the mapping file. */
  readonly mapping: string
  readonly auth: {
    readonly audio?: readonly string[]
    readonly text?: readonly string[]
    /** Bearer tokens this route accepts (scope `<route>:<hook>`), besides its static lists. */
    readonly tokens?: RouteTokenSettings
  }
  readonly params: Readonly<Record<string, unknown>>
  /** Overrides the mapping's `health` probe for this route. */
  readonly health?: RouteHealth
  readonly upstreams: readonly UpstreamConfig[]
  /** Fan-out vendors (absent in configs built by hand: none). */
  readonly tee?: readonly TeeConfig[]
  /** Stereo join of a contact's TX and RX legs into one vendor session (audio/session/join.ts); absent: one session per leg. */
  readonly join?: JoinSettings
  /**
   * The route's own secrets (its credentials, its vendors' credentials, headers and ${VAR}s in their URLs),
   * filled in by the loader: its answers to the platform are scrubbed of them (absent in configs built by hand).
   */
  readonly secrets?: readonly string[]
}

/** One fan-out vendor of a route (schemas/gateway-config.schema.json `tee`); `mapping` is an absolute path. */
export interface TeeConfig {
  readonly name: string
  readonly mapping: string
  readonly upstreams: readonly UpstreamConfig[]
  readonly results: 'drop' | 'forward'
  readonly params?: Readonly<Record<string, unknown>>
  readonly health?: RouteHealth
  readonly bufferBytes?: number
}

/** A route's `join` (schemas/gateway-config.schema.json `route.join`). */
export interface JoinSettings {
  /** The perspective of channel 0, then of channel 1. */
  readonly channels: readonly ['TX' | 'RX', 'TX' | 'RX']
  readonly waitSeconds: number
}

/** A route's own probe (schemas/gateway-config.schema.json `route.health`). */
export interface RouteHealth {
  readonly kind: 'mapping' | 'upgrade' | 'http' | 'protocol' | 'tcp' | 'none'
  readonly method?: 'GET' | 'HEAD' | 'POST' | 'OPTIONS'
  readonly path?: string
}

/** `audio.rebalance` (upstream/rebalance.ts). */
export interface RebalanceSettings {
  /** Streams per unit of weight by which the busiest replica may lead the least busy before calls move. */
  readonly spread: number
  /** Calls this instance moves per second at most (0: none). */
  readonly perSecond: number
  /** How long the replicas must stay more than `spread` apart before any call moves. */
  readonly settleSeconds: number
}

export interface AudioSettings {
  readonly handshakeTimeoutSeconds: number
  readonly connectTimeoutSeconds: number
  readonly readyTimeoutSeconds: number
  readonly holdBufferBytes: number
  readonly bufferBytes: number
  readonly vendorHighWaterBytes: number
  readonly backpressurePolicy: 'drop-oldest' | 'close'
  /** Absent: sized to cover detection (audio/connection/liveness.ts). */
  readonly replaySeconds?: number
  readonly failoverTimeoutSeconds: number
  readonly reattachGraceSeconds: number
  readonly vendorPingSeconds: number
  /** A pong missing this long after its ping: the vendor session is lost. */
  readonly vendorPongTimeoutSeconds: number
  /** Calls of `movable` mappings move to a less busy replica (upstream/rebalance.ts). */
  readonly rebalance: RebalanceSettings
  /** Ms of audio per vendor write where the mapping declares no `frames.chunkMs` (0: one write per platform frame). */
  readonly coalesceMs: number
  /** Replay and queued audio to a new vendor session: at most this × real time (0: unpaced). */
  readonly replayRate: number
  /** Session-open rate limit per replica (upstream/pool.ts). */
  readonly sessionBreaker: {
    readonly quickLossSeconds: number
    readonly quickLosses: number
    readonly windowSeconds: number
    readonly holdOffSeconds: number
  }
  /** Backoff between failover rounds and repeated failovers (audio/session/failover.ts). */
  readonly recoveryBackoff: { readonly baseMs: number; readonly maxMs: number; readonly stableSeconds: number }
}

export interface HealthSettings {
  readonly active: {
    /** Absent: each route probes as its mapping says. `ws` is the old name of `upgrade`. */
    readonly kind?: 'ws' | 'upgrade' | 'http' | 'tcp' | 'none'
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

/** TLS to Redis: `true`, or the CA file (as written, relative to the config file), server name, verification. */
export type StoreTls =
  | boolean
  | { readonly ca?: string; readonly servername?: string; readonly rejectUnauthorized?: boolean }

export interface StoreSettings {
  readonly keyPrefix: string
  readonly syncIntervalSeconds: number
  readonly leaseSeconds: number
  /** Credentials and TLS of the data nodes (URL, Sentinel's master, Cluster nodes); the password is a secret. */
  readonly username?: string
  readonly password?: string
  readonly tls?: StoreTls
  readonly sentinels?: readonly { readonly host: string; readonly port: number }[]
  readonly sentinelName: string
  /** Credentials and TLS of the Sentinel nodes themselves; the password is a secret. */
  readonly sentinelUsername?: string
  readonly sentinelPassword?: string
  readonly sentinelTls?: StoreTls
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

/** The drain on SIGTERM/SIGINT: readiness off at once, then stop accepting, then legs closed spread out. */
export interface ShutdownSettings {
  /** /readyz is 503 while the gateway still serves for this long (load balancers notice first). */
  readonly drainDelaySeconds: number
  /** Live legs are closed spread evenly over this long (no reconnect herd). */
  readonly legDrainSeconds: number
  /** Hard stop, counted from the signal. */
  readonly deadlineSeconds: number
  /** After the drain: the metrics listener waits this long at most for one more scrape. */
  readonly metricsLingerSeconds: number
}

/** The fleet listener (server/fleet-listener.ts) and the fleet's shared secret (auth/fleet-key.ts). */
export interface FleetSettings {
  readonly host: string
  readonly port: number
  /** Where other instances reach this one's fleet listener; absent: no fleet listener. */
  readonly advertiseUrl?: string
  readonly secret?: string
  /** Absolute paths (resolved beside the config). */
  readonly tls?: { readonly cert: string; readonly key: string; readonly ca?: string }
}

/** Abuse resistance of authentication (auth/failure-budget.ts). */
export interface AuthSettings {
  /** A failed authentication (audio or text) is answered no sooner than this (ms); 0: at once. */
  readonly failureDelayMs: number
  /** Per client address: at most `failures` failed authentications in a window of `windowSeconds` (0: no budget). */
  readonly failureBudget: { readonly failures: number; readonly windowSeconds: number }
}

/** Limits of the front door besides uws.maxPayloadBytes and text.maxBodyBytes (per instance). */
export interface LimitSettings {
  /** Largest request head (URL and headers) of the audio upgrade, text requests and the token endpoint, in bytes. */
  readonly headerBytes: number
  /** Largest audio init (open) message, in bytes. */
  readonly initMessageBytes: number
  /** Live audio legs per route on one instance (0: no limit). */
  readonly legsPerRoute: number
  /** Live audio legs per client (token subject or static credential) on one instance (0: no limit). */
  readonly legsPerClient: number
}

export interface Config {
  /** Absolute path of the file this came from. */
  readonly file: string
  readonly listen: {
    readonly host: string
    readonly port: number
    readonly tls: {
      readonly cert: string
      readonly key: string
      readonly passphrase?: string
      /** TLS 1.2 cipher list (OpenSSL syntax, as BoringSSL reads it); absent: the library's default. */
      readonly ciphers?: string
    } | null
  }
  /** The scrape listener: /metrics, /livez, /readyz. */
  readonly metrics: { readonly host: string; readonly port: number }
  /** The admin API: /admin/*; `token` required off loopback. */
  readonly admin: { readonly host: string; readonly port: number; readonly token?: string }
  /** The fleet listener (relayed legs from other instances) and the fleet's key. */
  readonly fleet: FleetSettings
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
  /** A demo config: secrets with inline defaults (public demo values) are accepted. */
  readonly demo: boolean
  readonly log: {
    readonly level: string
    readonly accessLog: 'info' | 'debug' | 'off'
    /** The cap on lines anyone can cause (telemetry/log-limit.ts), per instance. */
    readonly flood: { readonly lines: number; readonly windowSeconds: number }
  }
  readonly shutdown: ShutdownSettings
  /** Reloading without a restart: `watch` reloads when the files change (config/watch.ts). */
  readonly reload: { readonly watch: boolean; readonly watchIntervalSeconds: number }
  /** OpenTelemetry tracing, the file's keys with OTEL_* over them (config/tracing.ts). */
  readonly tracing: TracingSettings
  readonly auth: AuthSettings
  readonly limits: LimitSettings
  readonly emulators: readonly EmulatorConfig[]
  /** Customers by name (absent in configs built by hand: none); a route's own auth is a tenant of its own. */
  readonly tenants?: Readonly<Record<string, TenantConfig>>
  readonly routes: Readonly<Record<string, RouteConfig>>
  /** Token auth: the token endpoint's keys and clients, external issuers (absent: no bearer tokens). */
  readonly tokens?: Readonly<TokenSettings>
  /**
   * Every credential value in the config (auth lists, upstream credentials and headers, TLS
   * passphrase, Redis password, token keys and client secrets): redacted from every log line.
   */
  readonly secrets: readonly string[]
  /** Non-fatal findings, logged at start-up and printed by `check`. */
  readonly warnings: readonly string[]
}
