/**
 * What the generated reference pages (scripts/docs-reference.ts) say beyond the schemas' descriptions and
 * the catalogues' texts: when each error happens, and notes for the keys and metrics whose own text says
 * less than a user needs. Each map is checked: ERROR_WHEN must name every code (the type says so), and a
 * note naming a key or a metric that does not exist stops the script.
 */
import type { ErrorCode } from '../gateway/errors'
import type { MetricName } from '../gateway/telemetry/catalogue'

/** The failure table's "when" column: every code of gateway/errors.ts. */
export const ERROR_WHEN: Record<ErrorCode, string> = {
  AUTH_MISSING: 'the route requires a credential and none came',
  AUTH_INVALID: "the credential is not in the route's list for this hook",
  TOO_MANY_FAILURES:
    'the client address spent its `auth.failureBudget` (failed authentications only: valid traffic never spends it): every check refused, right credential or not, until the window ends (text and token endpoint: `retry-after`; audio: `parameters.retryAfterSeconds`)',
  CALLER_MISMATCH:
    'a leg of a session another caller opened (another token client or static credential): the same identity (route, busNo, contactId, perspective) as a live or parked session, or, on a `join` route, the same call (route, busNo, contactId) as a joined call, on any worker or instance of the fleet; the session and its legs are untouched',
  TOKEN_REVOKED:
    'the bearer token a live leg was opened with was revoked (`POST /admin/tokens/revoke`, unless it says `"endLegs": false`): the leg ends on every instance within `store.syncIntervalSeconds`',
  RELAY_INVALID:
    "a relayed leg on the fleet listener whose relay token is missing, not signed with this fleet's key, expired, used before or meant for another process (refused at the upgrade, HTTP 403), or whose init message names another session than its token",
  ADMIN_UNAUTHORIZED: 'an admin API request without `Authorization: Bearer <admin.token>` when `admin.token` is set',
  ADMIN_FORBIDDEN:
    "an admin API without `admin.token` (loopback) and a request a web page could send: an `Origin` other than the listener's own, a `Host` that is not a loopback address or `localhost` (DNS rebinding), or a request other than GET without both `content-type: application/json` and `x-requested-with: assist-gateway`",
  MESSAGE_NOT_JSON: 'the message is not JSON',
  MESSAGE_INVALID: 'the message does not match the interface schema; `pointers` name every bad field',
  FIRST_FRAME_NOT_TEXT: 'audio arrived before the init message',
  MESSAGE_TOO_LARGE:
    'a body, init message or frame over its limit (`text.maxBodyBytes`, `limits.initMessageBytes`, `uws.maxPayloadBytes`)',
  HEADERS_TOO_LARGE:
    'a request head (URL and headers) over `limits.headerBytes` (audio upgrade, text hook, token endpoint), with `connection: close`',
  HANDSHAKE_TIMEOUT: 'no init message within `audio.handshakeTimeoutSeconds`',
  UNSUPPORTED_MEDIA_TYPE: 'a body that is not `application/json`',
  ROUTE_NOT_FOUND: 'no such route (audio: refused before the upgrade)',
  NOT_FOUND: 'no such path',
  METHOD_NOT_ALLOWED: 'wrong HTTP method on a known path',
  QUERY_INVALID:
    'an admin API query without a required parameter or with a malformed one (`GET /admin/calls` without a numeric `contactId`); `pointers` name it',
  BAD_REQUEST:
    'the request is not valid HTTP/1.1: two `Content-Length` or `Host` fields, or a `Content-Length` that is not 1\u20139 digits; the connection is closed',
  UPGRADE_INVALID:
    'an audio upgrade without `Upgrade: websocket` or `Connection: upgrade`, or whose `Sec-WebSocket-Key` is not base64 of 16 bytes, or a plain GET of an audio path; the connection is closed',
  UPGRADE_VERSION:
    '`Sec-WebSocket-Version` is not 13; the answer carries `Sec-WebSocket-Version: 13`; the connection is closed',
  NO_HEALTHY_UPSTREAM: 'no replica of the route can take the leg or request',
  UPSTREAM_UNREACHABLE: 'every replica tried failed to connect (TCP, TLS, upgrade \u2260 101, connect timeout)',
  UPSTREAM_NOT_READY: 'the vendor did not say ready within `audio.readyTimeoutSeconds`',
  UPSTREAM_REFUSED:
    'the vendor refused the session (its reason in `parameters.vendorMessage`), closed before ready, or closed with a code the mapping classes `auth`/`bad-request` (`vendorCloseCode`, `vendorCloseClass`, `vendorCloseReason`)',
  UPSTREAM_CLOSED: 'the vendor session ended during the call (`vendorCloseCode` in parameters)',
  UPSTREAM_TIMEOUT: 'the vendor did not answer in time',
  UPSTREAM_BAD_ANSWER: "the vendor's answer could not be used",
  UPSTREAM_ANSWER_NOT_JSON:
    'the mapping reads JSON (`text.answer: json`) and a 2xx answer was not JSON: another content type (`text/event-stream`, a proxy\'s HTML page), an empty body, or JSON that does not parse (`detail` names which; `vendorStatus` the status); counted `upstream_requests_total{result="bad_answer"}` and as a passive-health failure of the replica; not retried',
  HOLD_BUFFER_OVERFLOW:
    'more audio arrived before CONNECTED than `audio.holdBufferBytes` and no other replica is left to try; every held frame is counted as dropped',
  BACKPRESSURE_OVERFLOW: "`audio.backpressurePolicy: close` and the leg's queue is full",
  LEG_LIMIT:
    '`limits.legsPerRoute` or `limits.legsPerClient` reached on this instance (`parameters.limit`: `legs_per_route` or `legs_per_client`)',
  QUOTA_EXCEEDED:
    "a tenant's or a route's quota (`tenants.<t>.limits`, `routes.<r>.limits`) is reached, fleet-wide " +
    '(`parameters.limit`: `tenant_legs`, `tenant_legs_per_second`, `route_legs`, …; `parameters.retryAfterSeconds`; ' +
    'the text hook answers 429 with `Retry-After`)',
  QUEUE_FULL: "an asynchronous route's delivery queue is full",
  MAPPING_FAILED: 'a mapping expression failed where the leg cannot go on without it (the open frame)',
  LEG_REPLACED:
    "a newer connection with the same busNo, contactId and perspective took over this leg's vendor session (the old socket was presumably dead)",
  SHUTTING_DOWN: 'the gateway is stopping; the platform reconnects (to another instance)',
  INTERNAL: 'a bug; logged with its stack'
}

/** Notes on configuration keys (dotted paths as the tables show them), appended to the schema's description. */
export const CONFIG_NOTES: Record<string, string> = {
  listen:
    'The public listener: the audio and text hooks, the example endpoints, /livez, /readyz and the token endpoint.',
  uws: 'The uWebSockets.js front door: platform sockets.',
  audio: 'The audio hook: handshake, vendor sessions, buffering, failover and re-attach.',
  'audio.sessionBreaker.windowSeconds': 'The window the quick losses are counted in.',
  'audio.recoveryBackoff.baseMs': 'The first wait: a round waits baseMs \u00d7 2\u207f (at most maxMs), with jitter.',
  'audio.recoveryBackoff.maxMs': 'The longest wait between rounds.',
  log: 'Logging (pino JSON on stdout).',
  'emulators[].kind':
    'The bundled emulator: passthrough (speaks the platform interface) or json-events (the demo vendor of mappings/json-events.yaml). The other kinds run with `assist-gateway vendor --kind`.',
  'emulators[].port': 'Its port (a ${VAR} may fill it: ops/gateway.yaml reads ${DEMO_VENDOR_PORT:-9101}).',
  'emulators[].host': 'Its address.',
  'emulators[].resultEveryFrames': 'A result every this many 20 ms frames of audio received (0: none).',
  'store.sentinels[].host': "A Sentinel's host.",
  'store.sentinels[].port': "A Sentinel's port.",
  'store.sentinelName': 'The master name the Sentinels watch.',
  'store.clusterNodes[].host': "A seed node's host.",
  'store.clusterNodes[].port': "A seed node's port.",
  health:
    'How replicas are found healthy: active probes and passive ejection (see docs/concepts/replicas-and-failover.md).',
  'health.active':
    'Active probes. With Redis, one instance has the prober lease and probes for the fleet; the others read its verdicts on their next sync.',
  'health.active.intervalSeconds': 'Time between two probes of a replica.',
  'health.active.timeoutSeconds': 'Time one probe may take.',
  'health.active.unhealthyThreshold': 'Failed probes in a row that mark a replica down.',
  'health.active.healthyThreshold': 'Successful probes in a row that mark it up again.',
  'health.passive':
    'Passive ejection on failures the gateway itself sees; never the last healthy replica of a route, and local to the instance that saw them.',
  'health.passive.maxEjectionSeconds': 'The longest ejection.',
  'tokens.clients[].id': 'The client id (HTTP Basic user name, or client_id in the form body).',
  'tokens.jwks[].timeoutSeconds': 'Time a JWKS fetch may take.',
  routes: 'The routes, by name: route R is served at /audio/R and /text/R.',
  'routes.<name>.auth':
    'Accepted platform credentials, per hook: kept apart (the interface wants one header per interaction type); absent: none required.',
  'routes.<name>.auth.tokens.issuers': "Whose tokens: `self` (the gateway's own) and names of tokens.jwks.",
  'routes.<name>.upstreams': "The replicas of the route's vendor; each needs an audio or a text URL (or both).",
  'routes.<name>.upstreams[].weight':
    'Balancing weight: a new leg goes to the replica with the fewest streams relative to its weight.',
  'routes.<name>.tee[].health.kind': "As routes.<name>.health.kind (mapping: the tee mapping's own probe).",
  'routes.<name>.tee[].health.method': 'As routes.<name>.health.method.',
  'routes.<name>.tee[].health.path': 'As routes.<name>.health.path.',
  'listen.tls.ciphers':
    'uWebSockets.js uses BoringSSL: `check` builds the TLS context with the list and refuses one BoringSSL cannot use (TLS 1.3 suite names among them).',
  'fleet.advertiseUrl': '`check` warns in a fleet with join routes and no advertiseUrl.',
  'fleet.secret': '`check` warns in a fleet that advertises a fleet listener without it.',
  'routes.<name>.join.waitSeconds':
    '`check` refuses a wait the hold buffer cannot cover: audio.holdBufferBytes must be at least (waitSeconds + 1) \u00d7 16000.'
}

/** Notes on mapping keys. */
export const MAPPING_NOTES: Record<string, string> = {
  description: 'Free text about the mapping (what vendor, which documents it follows).',
  audio:
    "The audio hook: how a leg's vendor session opens, what goes to the vendor per chunk of audio, what comes back, and how the session ends. Absent: the mapping serves text only.",
  'audio.sign.scheme': 'The signing scheme: aws-sigv4 only.',
  'audio.frames': "How the platform's audio goes to the vendor. Absent: binary \u00b5-law at 8000 Hz, unchanged.",
  'audio.results[].when': 'Predicate over the vendor message (msg): true means this rule emits.',
  'audio.keepalive.everySeconds': "The timer's period.",
  'audio.keepalive.frame':
    'The frame to send (as audio.open: an object as JSON text, a string as text); placeholders are filled.',
  'audio.closeTimeoutSeconds': 'Longest wait for closeWhen after the close frame; then the socket is closed anyway.',
  'text.request': 'The HTTP request an utterance becomes.',
  'health.http': 'http probes: the request.',
  'health.http.method': 'HTTP method of the probe request.',
  'samples.audio':
    'Sample vendor messages (parsed JSON, as the vendor sends them) `check` runs audio.ready, audio.control and audio.results on.',
  'samples.text[].status': "The vendor answer's status.",
  'samples.text[].headers': 'Its headers.',
  'samples.text[].body': 'Its body (JSON).',
  'audio.headers': "Vendor keys live in the gateway's config as ${VAR}, never in the platform's.",
  'audio.frames.sampleRate': 'The filter has 32 Kaiser-windowed taps per phase and keeps its state across frames.',
  'audio.frames.chunkMs': 'At the end of the leg the last chunk is padded with silence.',
  'audio.rotateAfterSeconds': 'Audio switches when the new one is ready; the old one gets its close sequence.'
}

/** Notes on metrics, appended to the catalogue's help. */
export const METRIC_NOTES: Partial<Record<MetricName, string>> = {
  build_info:
    'version: the package version; uws_native: whether the native uWebSockets.js build loaded (see docs/concepts/runtime.md).',
  audio_sessions_active:
    'Every configured route has a sample, at 0 when idle, so an idle instance shows 0, not nothing.',
  audio_sessions_total:
    'Other outcomes: abandoned (the platform left before CONNECTED), too_large_cut and invalid_utf8 (uWS cut the socket for a frame), relayed (a leg this process relayed to the process owning its session, which counts its outcome).',
  audio_buffered_bytes: 'Every configured route has a sample, at 0 when nothing is held.',
  audio_dropped_frames_total:
    "failover_unreplayed: written since the lost vendor's last sign of life, or left unread, or (with result times) after the last delivered final, and not covered by the replay; vendor_paused: discarded while the vendor paused the session.",
  audio_vendor_messages_total:
    'parked: arrived while the platform leg was away (kept, up to 64 messages and 64 KiB, for the leg that re-attaches); dropped_before_connected: arrived before ready and over the hold bound (64 messages, 64 KiB), or the leg ended first.',
  mapping_errors_total:
    'Stages include control_when, control_set, control_reply and control_emit (audio.control rules).',
  audio_failovers_total: 'Summing over result counts incidents more than once.',
  audio_gap_seconds: 'Or until the leg gave up.',
  audio_reattach_total:
    'same_session also counts a leg relayed here; relayed: relayed to the process keeping its session; relay_failed: that process was out of reach, the leg was served here.',
  upstream_health_checks_total: 'Probes this instance ran (with Redis one instance probes for the fleet).',
  limit_refusals_total:
    'failure_budget on hooks audio, text, token and dry_run; header_size on audio, text and token; init_size and frame_size on audio; body_size on text; legs_per_route and legs_per_client on audio.',
  front_door_refusals_total: 'aborted_before_dispatch: e.g. uWS cut a pipelined connection.',
  audio_joins_total:
    'relayed: a leg relayed to the instance or worker owning its call; relay_failed: its call is owned elsewhere out of reach (no fleet.advertiseUrl there, or the owner did not answer), so it joined here alone and the call is split.'
}
