import type { ControlStage } from '../audio/connection/control-frames'
import type { VendorFailure } from '../audio/connection/connection-contract'
import { CLOSE_OUTCOME, type PlatformCut } from '../audio/leg/leg-contract'
import type { LegLimit } from '../auth/leg-limits'
import { QUOTA_LIMITS } from '../auth/quotas'
import { UNKNOWN_TENANT } from '../auth/tenant-credentials'
import { hasOwnAuth } from '../config/tenants'
import type { RelayRefusal } from '../auth/relay-token'
import { TOKEN_FAILURES } from '../auth/token-verify'
import { CODES } from '../errors'
import { STORE_OPS } from '../store/redis-options'
import type { ClosedLabels, LabelSpace } from '../telemetry/seeds'
import type { UpstreamResult } from '../upstream/http-exchange'
import { FRONT_DOOR_REASONS } from './front-door'
import type { AdminRefusal } from './admin'

/**
 * The closed label values of the catalogue's metrics (telemetry/seeds.ts): what each counting site can
 * count, taken from the module that counts it. Where that module has a runtime list (the error catalogue,
 * the token failures, the store operations, the front door's reasons) it is used as it is; where it has
 * only a type, the list here is checked against that type both ways by the compiler (`every`), so a new
 * reason does not compile until it is seeded.
 */

/** `list`, which the compiler checks names every member of `T` and nothing else. */
function every<T extends string>() {
  return <const A extends readonly T[]>(list: A & ([T] extends [A[number]] ? unknown : never)): readonly string[] =>
    list
}

/** Every error code as an outcome label (`handshake_timeout`, `internal`, …). */
const ERROR_OUTCOMES: readonly string[] = Object.keys(CODES).map(c => c.toLowerCase())
/** Every HTTP status the text hook can answer: 200, 202 and those of the error catalogue. */
const TEXT_STATUSES: readonly string[] = [
  ...new Set(['200', '202', ...Object.values(CODES).map(c => String(c.status))])
].sort()
const CREDENTIAL_REASONS: readonly string[] = ['missing', 'invalid', ...TOKEN_FAILURES]
/** `auth_failures_total{hook="token"}`: the OAuth errors of POST /oauth/token (server/token-routes.ts). */
const TOKEN_ENDPOINT_ERRORS = ['invalid_request', 'invalid_client', 'unsupported_grant_type', 'invalid_scope']
const RELAY_REASONS = [
  ...every<RelayRefusal>()(['missing', 'malformed', 'signature', 'expired', 'not_for_me', 'replayed', 'busy']),
  // audio/leg/leg-handshake.ts: a relayed leg whose session is not the one its token names.
  'session_mismatch'
]
const LEG_LIMITS = every<LegLimit>()(['legs_per_route', 'legs_per_client'])
const LEG_QUOTAS = QUOTA_LIMITS.filter(l => !l.endsWith('_utterances_per_second'))
const UTTERANCE_QUOTAS = QUOTA_LIMITS.filter(l => l.endsWith('_utterances_per_second'))
type MappingFailure = Extract<VendorFailure, { kind: 'mapping' }>['stage']
const MAPPING_STAGES: readonly string[] = [
  'text_request',
  'text_response',
  'frame',
  'ready',
  ...every<MappingFailure>()(['url', 'headers', 'template', 'open']),
  // The control frames sent at a stage (its `open` expression fails the connection instead: url…open above).
  ...every<Exclude<ControlStage, 'open'>>()(['keepalive', 'pause', 'resume', 'close']),
  ...['when', 'set', 'reply', 'emit'].map(s => `control_${s}`),
  ...['when', 'emit'].map(s => `result_${s}`)
]
const LEG_OUTCOMES: readonly string[] = [
  ...new Set(Object.values(CLOSE_OUTCOME).filter(o => o !== null)),
  ...every<PlatformCut>()(['too_large_cut', 'invalid_utf8']),
  ...ERROR_OUTCOMES
]
const RELAY_RESULTS = ['relayed', 'relay_failed']
/** tenant_refusals_total's limits: those that refuse a caller whose credential was accepted (its tenant known). */
const TENANT_REFUSALS: readonly string[] = [...LEG_LIMITS, ...QUOTA_LIMITS]

export const CLOSED_LABELS: ClosedLabels = {
  config_reloads_total: [{ values: { result: ['ok', 'failed'] } }],
  audio_sessions_total: [{ values: { outcome: LEG_OUTCOMES } }],
  audio_tee_sessions_total: [{ values: { outcome: ['ok', ...ERROR_OUTCOMES] } }],
  audio_tee_messages_total: [{ values: { result: ['forwarded', 'dropped', 'platform_backpressure'] } }],
  text_tee_deliveries_total: [{ values: { result: ['ok', 'queue_full', ...ERROR_OUTCOMES] } }],
  audio_vendor_messages_total: [
    { values: { result: ['emitted', 'unmatched', 'error', 'parked', 'dropped_before_connected', 'before_delivered'] } }
  ],
  auth_failures_total: [
    { values: { hook: ['audio', 'text', 'dry_run'], reason: CREDENTIAL_REASONS } },
    { values: { hook: ['audio', 'text'], reason: ['caller_mismatch'] } },
    { values: { hook: ['admin'], reason: every<AdminRefusal>()(['missing', 'invalid', 'cross_origin']) } },
    { values: { hook: ['token'], reason: TOKEN_ENDPOINT_ERRORS } },
    { values: { hook: ['relay'], reason: RELAY_REASONS } }
  ],
  front_door_refusals_total: [{ values: { reason: FRONT_DOOR_REASONS } }],
  validation_failures_total: [{ values: { hook: ['audio', 'text'] } }],
  mapping_errors_total: [{ values: { stage: MAPPING_STAGES } }],
  text_requests_total: [{ values: { code: TEXT_STATUSES } }, { values: { route: [''], code: TEXT_STATUSES } }],
  upstream_requests_total: [
    {
      values: {
        result: every<Exclude<UpstreamResult, 'no_replica'>>()([
          'ok',
          'status_4xx',
          'status_5xx',
          'timeout',
          'connect_failed',
          'bad_answer'
        ])
      }
    },
    // No replica to pick: counted under the route with an empty upstream (upstream/http-call.ts).
    { values: { upstream: [''], result: ['no_replica'] } }
  ],
  audio_failovers_total: [{ values: { result: ['ok', 'failed', 'backoff'] } }],
  audio_reattach_total: [{ values: { result: ['same_session', 'same_replica', ...RELAY_RESULTS] } }],
  audio_joins_total: [{ values: { result: ['paired', 'alone', 'late_partner', ...RELAY_RESULTS] }, routes: 'join' }],
  audio_join_silence_samples_total: [{ values: { channel: ['0', '1'] }, routes: 'join' }],
  upstream_health_checks_total: [{ values: { result: ['ok', 'failed', 'credential_refused'] } }],
  upstream_retries_total: [
    { values: { reason: ['connect_failed', 'status_5xx', 'timeout', 'rate_limited', 'budget_exhausted'] } }
  ],
  store_errors_total: [{ values: { op: STORE_OPS } }],
  tenant_legs_total: [{ values: { outcome: LEG_OUTCOMES } }],
  tenant_utterances_total: [{ values: { code: TEXT_STATUSES } }],
  tenant_refusals_total: [{ values: { limit: TENANT_REFUSALS } }],
  limit_refusals_total: [
    { values: { limit: ['failure_budget'], hook: ['audio', 'text', 'token', 'dry_run'] } },
    { values: { limit: ['header_size'], hook: ['audio', 'text', 'token'] } },
    { values: { limit: ['init_size', 'frame_size', ...LEG_LIMITS, ...LEG_QUOTAS], hook: ['audio'] } },
    { values: { limit: ['body_size', ...UTTERANCE_QUOTAS], hook: ['text'] } }
  ]
}

/**
 * The tenant label's values for one generation of routes: every configured tenant, each route that is a
 * tenant of its own (its own `auth`, config/tenants.ts `hasOwnAuth`, or a route that admits no configured
 * tenant and so takes anonymous callers as its own: auth/route-auth.ts), and `unknown`. Bounded by the config.
 */
export function tenantsOf(
  routes: Iterable<{ name: string; config: { tenants?: readonly string[] }; tenants?: readonly { name: string }[] }>,
  configured: Iterable<string>
): string[] {
  const out = new Set(configured)
  for (const r of routes)
    if (hasOwnAuth(r.config) || (r.config.tenants === undefined && (r.tenants ?? []).length === 0)) out.add(r.name)
  out.add(UNKNOWN_TENANT)
  return [...out]
}

/** The open label values of one generation of routes: its routes, every pool's replicas, its tees, its tenants. */
export function labelSpaceOf(
  routes: Iterable<{
    name: string
    config: { join?: unknown; tenants?: readonly string[] }
    tenants?: readonly { name: string }[]
    pool: { replicas: readonly { route: string; name: string }[] }
    tees?: readonly {
      name: string
      route: string
      runtime: { pool: { replicas: readonly { route: string; name: string }[] } }
    }[]
  }>,
  /** The configured tenants (`tenants:`). */
  configured: Iterable<string> = []
): LabelSpace {
  const list = [...routes]
  const pools = list.flatMap(r => [r.pool, ...(r.tees ?? []).map(t => t.runtime.pool)])
  return {
    routes: list.map(r => ({ name: r.name, join: r.config.join !== undefined })),
    replicas: pools.flatMap(p => p.replicas.map(x => ({ route: x.route, upstream: x.name }))),
    tees: list.flatMap(r => (r.tees ?? []).map(t => ({ route: t.route, tee: t.name }))),
    workers: [],
    tenants: tenantsOf(list, configured)
  }
}
