/**
 * The one metric catalogue. Names are prefixed `assist_gateway_`, in base units; labels are route,
 * upstream, reason-like enums only, never a contact id. The dashboard, the alert rules and the docs
 * use names from CATALOGUE only (tests/unit/telemetry/metrics.test.ts checks that); docs/reference/metrics.md
 * is generated from it (npm run docs).
 */
export const PREFIX = 'assist_gateway_'

export const CATALOGUE = {
  build_info: { type: 'gauge', help: 'Build information; value 1.', labels: ['version', 'uws_native'] },
  draining: { type: 'gauge', help: '1 while the gateway drains before shutdown.', labels: [] },
  config_reloads_total: {
    type: 'counter',
    help: 'Config reloads (SIGHUP, POST /admin/reload), by result (ok, failed: nothing changed).',
    labels: ['result']
  },
  audio_sessions_active: { type: 'gauge', help: 'Audio legs past the upgrade and not yet ended.', labels: ['route'] },
  audio_sessions_total: {
    type: 'counter',
    help: 'Audio legs ended, by outcome (ok, or the lower-case error code).',
    labels: ['route', 'outcome']
  },
  audio_handshake_duration_seconds: {
    type: 'histogram',
    help: 'From the init message to CONNECTED (vendor connect and ready included).',
    labels: ['route']
  },
  audio_frames_total: {
    type: 'counter',
    help:
      'WebSocket frames relayed, by direction (from_platform, to_vendor, from_vendor, to_platform); to_vendor counts ' +
      'audio writes, several platform frames each when coalesced (audio.coalesceMs): compare bytes for loss.',
    labels: ['route', 'direction']
  },
  audio_bytes_total: { type: 'counter', help: 'Payload bytes relayed, by direction.', labels: ['route', 'direction'] },
  audio_dropped_frames_total: {
    type: 'counter',
    help:
      'Audio frames not delivered, by reason (hold_overflow, backpressure, vendor_binary, after_close: read after ' +
      'the leg ended or still held when it ended, failover, failover_unreplayed: a lost or retired vendor session ' +
      'had not read it, or with result times no final covered it, and no replay covered it, vendor_paused); ' +
      'platform frames, failover_unreplayed estimated from bytes.',
    labels: ['route', 'reason']
  },
  audio_tee_dropped_frames_total: {
    type: 'counter',
    help:
      'Audio frames a tee vendor did not get, by route, tee and reason (backpressure: its queue was full; ' +
      'hold_overflow, failover, failover_unreplayed: as for legs; ended: its vendor session had ended or was refused).',
    labels: ['route', 'tee', 'reason']
  },
  audio_tee_sessions_total: {
    type: 'counter',
    help: 'Tee vendor sessions ended, by route, tee and outcome (ok, or the lower-case error code that ended the tee).',
    labels: ['route', 'tee', 'outcome']
  },
  audio_tee_messages_total: {
    type: 'counter',
    help:
      'Tee vendor results, by result (forwarded to the platform tagged parameters.tee, dropped: results drop, ' +
      'platform_backpressure: dropped while the platform socket was backed up).',
    labels: ['route', 'tee', 'result']
  },
  text_tee_deliveries_total: {
    type: 'counter',
    help:
      'Utterances delivered to a tee vendor in the background, by result (ok, queue_full, or the lower-case ' +
      'error code of a failed delivery).',
    labels: ['route', 'tee', 'result']
  },
  audio_buffered_bytes: {
    type: 'gauge',
    help: 'Audio bytes held in leg buffers (before CONNECTED or while the vendor is backed up).',
    labels: ['route']
  },
  audio_vendor_messages_total: {
    type: 'counter',
    help: 'Vendor text messages, by result (emitted, unmatched, error, parked, dropped_before_connected, before_delivered).',
    labels: ['route', 'result']
  },
  ws_closes_total: {
    type: 'counter',
    help: 'WebSocket closes by side (platform, vendor) and close code.',
    labels: ['side', 'code']
  },
  auth_failures_total: {
    type: 'counter',
    help:
      'Refused credentials, by hook (audio, text, token, dry_run, relay, admin) and reason: missing, invalid, malformed, ' +
      'unknown_kid, bad_signature, wrong_issuer, wrong_audience, expired, not_yet_valid, revoked, scope, lifetime, ' +
      'caller_mismatch (a leg of a session or call another caller opened); hook token (POST /oauth/token): ' +
      'invalid_request, invalid_client, unsupported_grant_type, invalid_scope; hook relay (the fleet listener): ' +
      'missing, malformed, signature, expired, not_for_me, replayed, busy, session_mismatch; hook admin: missing, ' +
      'invalid, cross_origin (a tokenless admin API refusing what a web page could send).',
    labels: ['hook', 'reason']
  },
  front_door_refusals_total: {
    type: 'counter',
    help:
      'Requests the front door refused or dropped, by reason: content_length (malformed or repeated), host ' +
      '(repeated), upgrade (no websocket Upgrade or no upgrade Connection), upgrade_version (not 13), upgrade_key ' +
      '(not base64 of 16 bytes), aborted_before_dispatch (the connection ended before a text request was sent on).',
    labels: ['reason']
  },
  validation_failures_total: {
    type: 'counter',
    help: 'Platform messages refused as not JSON or not matching the interface schema.',
    labels: ['hook']
  },
  mapping_errors_total: {
    type: 'counter',
    help: 'Mapping expressions that failed or produced an unusable value, by stage.',
    labels: ['route', 'stage']
  },
  text_requests_total: {
    type: 'counter',
    help: 'Text hook requests answered, by route and HTTP status code (route is empty when the path named no known route).',
    labels: ['route', 'code']
  },
  text_request_duration_seconds: {
    type: 'histogram',
    help: 'Text hook requests: from the request line to the answer written (202 for asynchronous routes).',
    labels: ['route']
  },
  upstream_requests_total: {
    type: 'counter',
    help: 'Vendor HTTP calls, by result (ok, status_4xx, status_5xx, timeout, connect_failed, bad_answer, no_replica).',
    labels: ['route', 'upstream', 'result']
  },
  upstream_request_duration_seconds: {
    type: 'histogram',
    help: 'Vendor HTTP calls: from sending the mapped request to the whole answer read, per replica tried.',
    labels: ['route', 'upstream']
  },
  audio_failovers_total: {
    type: 'counter',
    help:
      'Mid-call vendor session replacements, by result (ok, failed); backoff: incidents that waited before their ' +
      'first attempt (lost again soon after the last ready).',
    labels: ['route', 'result']
  },
  audio_gap_seconds: {
    type: 'histogram',
    help: 'Per failover incident: time from losing the vendor session to audio flowing on the new one.',
    labels: ['route']
  },
  audio_reattach_total: {
    type: 'counter',
    help:
      'Platform legs that came back with the same busNo, contactId and perspective, by result ' +
      '(same_session: this instance kept it; same_replica: it lived on another instance).',
    labels: ['route', 'result']
  },
  audio_moves_total: {
    type: 'counter',
    help:
      'Calls moved to a less busy replica, make-before-break (audio.rebalance: load that comes back to a ' +
      'recovered or new replica), by route and the replica they moved from and to.',
    labels: ['route', 'from', 'to']
  },
  audio_joins_total: {
    type: 'counter',
    help:
      'Joined (stereo) vendor sessions by how they opened (paired: both legs within join.waitSeconds; alone: the ' +
      'wait ran out and the partner joins later or never) and legs that joined one already open (late_partner).',
    labels: ['route', 'result']
  },
  audio_join_silence_samples_total: {
    type: 'counter',
    help:
      'Samples of a joined session filled with silence because that channel had no audio in its 20 ms tick ' +
      '(missing, late, held, parked or ended leg), by channel (0, 1); counted when the joined session ends.',
    labels: ['route', 'channel']
  },
  upstream_healthy: {
    type: 'gauge',
    help: '1 when the replica can take new work (probed up and not ejected).',
    labels: ['route', 'upstream']
  },
  upstream_ejections_total: {
    type: 'counter',
    help:
      'Passive ejections of a replica after gateway-side failures, and benchings by its session-open breaker ' +
      '(vendor sessions lost soon after they opened).',
    labels: ['route', 'upstream']
  },
  upstream_health_checks_total: {
    type: 'counter',
    help: 'Active probes, by result (ok, failed, credential_refused: the vendor refused the credential, a misconfiguration).',
    labels: ['route', 'upstream', 'result']
  },
  upstream_retries_total: {
    type: 'counter',
    help:
      'Text requests sent again, by reason (connect_failed, status_5xx, timeout; rate_limited: a 429 after its retry-after), ' +
      'and retries refused by the retry budget (budget_exhausted).',
    labels: ['route', 'reason']
  },
  store_up: {
    type: 'gauge',
    help: '1 when the shared store (Redis) is reachable and its commands succeed, or the store is in-memory.',
    labels: []
  },
  store_errors_total: {
    type: 'counter',
    help:
      'Failed shared-store (Redis) commands and connection attempts, by op (connect, sync, write_health, ' +
      'set_affinity, get_affinity, delete_affinity, revoke_token, read_revocation, count_failure, claim_owner, ' +
      'refresh_owners, release_owner, publish_calls, remove_call, find_calls, close).',
    labels: ['op']
  },
  limit_refusals_total: {
    type: 'counter',
    help:
      'Requests and legs refused by a limit, by limit (failure_budget, header_size, init_size, frame_size, body_size, ' +
      'legs_per_route, legs_per_client, and the quotas tenant_legs, tenant_legs_per_second, tenant_utterances_per_second, ' +
      'route_legs, route_legs_per_second, route_utterances_per_second) and hook (audio, text, token, dry_run).',
    labels: ['limit', 'hook']
  },
  tenant_legs_active: {
    type: 'gauge',
    help:
      'Audio legs past the upgrade and not yet ended, by tenant: a configured tenant, a route named after itself ' +
      '(its own auth or anonymous callers), or unknown (no credential accepted yet, or a refused one). Per-tenant ' +
      'series are their own families rather than a tenant label on audio_sessions_active, audio_sessions_total, ' +
      'text_requests_total and limit_refusals_total: the label sets the shipped alerts, dashboard and seeding read ' +
      'stay as they are, and the tenant series stay small (tenant × outcome, never tenant × route).',
    labels: ['tenant']
  },
  tenant_legs_total: {
    type: 'counter',
    help: 'Audio legs ended, by tenant (as tenant_legs_active) and outcome (as audio_sessions_total).',
    labels: ['tenant', 'outcome']
  },
  tenant_utterances_total: {
    type: 'counter',
    help:
      'Text hook requests answered, by tenant (as tenant_legs_active; unknown: no credential accepted, or no ' +
      'known route) and HTTP status code (as text_requests_total).',
    labels: ['tenant', 'code']
  },
  tenant_refusals_total: {
    type: 'counter',
    help:
      'Legs and utterances refused after their credential was accepted, by tenant and limit: the quotas ' +
      '(tenant_legs, tenant_legs_per_second, tenant_utterances_per_second, route_legs, route_legs_per_second, ' +
      'route_utterances_per_second) and the leg limits (legs_per_route, legs_per_client). Each is counted in ' +
      'limit_refusals_total too; refusals before a credential is accepted (failure_budget, sizes) are there only.',
    labels: ['tenant', 'limit']
  },
  workers: {
    type: 'gauge',
    help: 'Worker processes serving the public port (serve --workers N; 1: a single process).',
    labels: []
  },
  worker_restarts_total: {
    type: 'counter',
    help: 'Worker processes restarted after they exited unexpectedly (a crash or a kill), by worker index.',
    labels: ['worker']
  },
  worker_legs_active: {
    type: 'gauge',
    help: 'Audio legs past the upgrade on each worker process, by worker index (their sum is audio_sessions_active).',
    labels: ['worker']
  }
} as const

export type MetricName = keyof typeof CATALOGUE
