/**
 * The shared-state port: everything gateway instances share goes through this one small interface,
 * with an in-memory implementation (one instance, nothing else installed) and a Redis one (a fleet).
 * Reads the per-leg and per-pick paths make are synchronous, from a cache the store refreshes on its
 * own timer; writes are fire-and-forget. A store that loses its backend keeps answering from local
 * state (`up()` false) and resumes sharing when the backend returns.
 */
export interface HealthRecord {
  state: 'up' | 'down'
  reason: string
  /** ms since the epoch of the last state change. */
  since: number
  /** Instance that wrote it. */
  by: string
}

/**
 * What a drained leg's vendor socket had reached when its instance handed it off: the socket's mapping
 * session id and its frame counters. The instance that takes the leg back gives it to the mapping as
 * `continued` (AudioHook: `continuedSessions`). Counters of a new socket still start afresh, as vendors require.
 */
export interface ContinuedSession {
  id: string
  seq: number
  serverseq: number
  chunk: number
  audioMs: number
}

/** Where a platform leg's vendor session lives, by `{busNo}:{contactId}:{perspective}` (and route). */
export interface Affinity {
  route: string
  replica: string
  instance: string
  legId: string
  /** Set when a drain handed the leg off (see ContinuedSession). */
  continued?: ContinuedSession
  /**
   * Who opened the leg (auth/hook-auth.ts `callerTag`: a token's issuer and subject, or a keyed hash of
   * the static credential, never the credential): a leg of another caller may not take the session over.
   */
  caller?: string
}

/** One fixed window of failed authentications of one key (a client address): its count so far and when it ends. */
export interface FailureWindow {
  count: number
  /** ms until the window ends and the count starts again from 0. */
  resetInMs: number
}

/**
 * Who owns a session that a leg landing on another process must reach (audio/placement/placement.ts): a plain
 * leg's vendor session (live or parked, for a re-attach) or a joined call's stereo session. A leg of
 * that session landing elsewhere is relayed to its owner, if the same caller opened it.
 */
export interface OwnerRecord {
  /** The owning process: an instance's id, or a worker's (`<group>/w<n>`). */
  instance: string
  /** Its process group: the workers of one `serve` share their main process's id; one process: its own id. */
  group: string
  /** Where other instances reach its fleet listener (`fleet.advertiseUrl`, port filled in); '' when not set. */
  url: string
  /** Where the other workers of its group reach it (its loopback fleet listener); '' for one process. */
  local: string
  /** Who opened the session (auth/hook-auth.ts `callerTag`): a leg of another caller is refused. */
  caller: string
}

/**
 * One live or parked platform leg as its process publishes it (audio/leg/call-book.ts), keyed by contact, for
 * `GET /admin/calls`. Small, refreshed every few seconds with the owner records, gone with its leg (or its
 * parked session), and expired when its process dies. Never a credential, never a URL.
 */
export interface CallRecord {
  contactId: string
  busNo: string
  /** The platform connection's id (unique per connection). */
  legId: string
  /** The gateway instance (the main process's id for a worker). */
  instance: string
  /** The process serving it: the instance, or one of its workers (`<instance>/w<n>.<pid>`). */
  process: string
  /** The worker's index in `serve --workers N`; null for a one-process gateway. */
  worker: number | null
  route: string
  /** Whose call it is (a configured tenant, or the route's own); absent in records of older gateways. */
  tenant?: string
  perspective: string
  /** The leg's state (audio/leg/leg-contract.ts LegState), or PARKED: its leg is gone, its session waits for a re-attach. */
  state: string
  /** The replica (its config name) audio goes to now; '' when none (not yet, failing over, relayed). */
  replica: string
  /** Every replica that carried its audio. */
  replicas: string[]
  /** When the leg connected (ISO 8601). */
  startedAt: string
  framesFromPlatform: number
  bytesFromPlatform: number
  /** ms since a platform frame last arrived, to within the publish interval; null before the first. */
  lastFrameAgeMs: number | null
  failovers: number
  gapMs: number
  /** Vendor results sent to the platform on this leg (absent on a leg relayed elsewhere: see its owner's record). */
  resultsSent?: number
  /** Relayed: the process that owns its session (this leg carries its audio there). */
  relayedTo?: string
  /** Relayed here from this process. */
  relayedFrom?: string
  /** When the record was written (epoch ms, the store's clock); answers add its age to lastFrameAgeMs. */
  at: number
}

/**
 * The fleet's count of the quotas (auth/quotas.ts), in Redis: live legs as leases (a sorted set per quota
 * whose members expire unless their owner refreshes them, so a dead instance's legs go by themselves), and
 * per-second rates through rate-limiter-flexible. `null` answers: Redis did not answer; the caller's own
 * count stands in.
 */
export interface QuotaStore {
  up: () => boolean
  /** Take a lease `id` under `key` if fewer than `limit` live (0: always): true, false (full), or null. */
  takeLease: (key: string, limit: number, id: string, ttlMs: number) => Promise<boolean | null>
  refreshLeases: (leases: readonly { key: string; id: string }[], ttlMs: number) => void
  releaseLease: (key: string, id: string) => void
  /** Spend one unit of `key`'s window of `perSecond`: 0, else the ms until it has room; null: no answer. */
  consumeRate: (key: string, perSecond: number) => Promise<number | null>
  /** Give back a unit spent for work that was refused after all. */
  refundRate: (key: string, perSecond: number) => void
}

/** True when `store` counts quotas for the fleet (Redis). */
export function isQuotaStore(store: object): store is QuotaStore {
  return 'takeLease' in store && 'consumeRate' in store
}

export interface Store {
  readonly kind: 'memory' | 'redis'
  /**
   * Other processes share this store: Redis, or the main process's memory that the workers of one
   * `serve --workers N` reach. False: a lone process; nothing it records is read by anyone else.
   */
  readonly shared: boolean
  readonly instanceId: string
  /** The backend is reachable (memory: always). */
  up: () => boolean
  /** This instance's live streams per `route/replica`; published with a lease so a dead instance's counts expire. */
  reportStreams: (counts: ReadonlyMap<string, number>) => void
  /** Streams other live instances report for `route/replica` (cached; 0 when unknown). */
  otherStreams: (key: string) => number
  /** Record an active-probe verdict for the fleet. */
  writeHealth: (key: string, record: HealthRecord) => void
  /** The fleet's health verdicts (cached). */
  sharedHealth: () => ReadonlyMap<string, HealthRecord>
  setAffinity: (key: string, affinity: Affinity, ttlSeconds: number) => void
  getAffinity: (key: string) => Promise<Affinity | null>
  deleteAffinity: (key: string, legId: string) => void
  /**
   * Revoke a token id until `untilEpochMs` (wall clock, the token's `exp`); a later call only extends it.
   * `nowMs`: the caller's wall clock. Redis: shared with the fleet at once; rejects when Redis did not take it.
   */
  revokeToken: (jti: string, untilEpochMs: number, nowMs: number) => Promise<void>
  /** True while `jti` is revoked. Redis: asks Redis (the fleet's list); when Redis is away, what this instance knows. */
  isTokenRevoked: (jti: string, nowMs: number) => Promise<boolean>
  /**
   * Count one failed authentication of `key` in its fixed window of `windowMs` (the first failure opens
   * it). `nowMs`: the caller's clock (memory uses it; Redis keeps the window with a key expiry).
   * Redis away: counted locally.
   */
  countFailure: (key: string, windowMs: number, nowMs: number) => Promise<FailureWindow>
  /**
   * Make `owner` the owner of session `key` (with a TTL of `ttlMs`) unless another live owner has it;
   * `replacing`: a owner found unreachable, whose record `owner` may take over. Resolves to the record
   * in force. Redis away: `owner` (the session is served here).
   */
  claimOwner: (key: string, owner: OwnerRecord, ttlMs: number, replacing?: string) => Promise<OwnerRecord>
  /** Renew the TTL of the records of `keys` that `instance` still owns (one batch, fire-and-forget). */
  refreshOwners: (keys: readonly string[], instance: string, ttlMs: number) => void
  /** Session `key` ended (or was handed off) on `instance`: its record goes, if `instance` still holds it. */
  releaseOwner: (key: string, instance: string) => void
  /**
   * Publish this process's call records (every live or parked leg it serves), each for `ttlMs` unless
   * published again; fire-and-forget.
   */
  publishCalls: (records: readonly CallRecord[], ttlMs: number) => void
  /** Leg `legId` of contact `contactId` is over: its record goes. */
  removeCall: (contactId: string, legId: string) => void
  /** Every unexpired record of `contactId`, fleet-wide; `lastFrameAgeMs` aged to now. */
  findCalls: (contactId: string) => Promise<CallRecord[]>
  /**
   * Every unexpired record of the first `contacts` contacts with live records, fleet-wide (`GET /admin/calls?all`,
   * the status page); `more`: other contacts were left out.
   */
  listCalls: (contacts: number) => Promise<{ calls: CallRecord[]; more: boolean }>
  /**
   * One of a contact's shared values (a mapping's shared setup steps: mapping/steps-run.ts), compare-and-set:
   * when `field`'s value in force is `expect` (null: none), it becomes `value` (null: gone); the contact's
   * values live `ttlMs` past their last change. Resolves to the value in force afterwards. Redis away: this
   * process's own values answer.
   */
  swapShared: (
    key: string,
    field: string,
    expect: string | null,
    value: string | null,
    ttlMs: number
  ) => Promise<string | null>
  /** Every shared value of `key` goes (its call is over). */
  dropShared: (key: string) => Promise<void>
  /**
   * The members of a contact's group (the legs that ran a mapping's setup): `member` joins (`present`) or
   * leaves; the group lives `ttlMs` past its last change. Resolves to how many members are left, or null when
   * that cannot be known (Redis away: this process never saw the other instances' legs); rejects when the
   * store failed a command.
   */
  countMembers: (key: string, member: string, present: boolean, ttlMs: number) => Promise<number | null>
  /** True while this instance holds the prober lease (memory, or backend down: always true). */
  isLeader: () => boolean
  /** Called after each refresh of the cache (health may have changed). */
  onSync: (fn: () => void) => void
  start: () => Promise<void>
  close: () => Promise<void>
}
