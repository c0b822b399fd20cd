import { createHmac } from 'node:crypto'
import type { TenantCredentials } from './tenant-credentials'
import type { AuthReason, Principal, RouteAuthOutcome } from './route-auth'

/**
 * The `auth_failures_total{reason}` label of a refused credential: a bounded set. A value that is
 * neither a listed credential nor a token the route takes is `invalid`; token failures keep their own
 * name (expired, revoked, scope, …); `caller_mismatch` is a re-attach by another caller.
 */
export function failureLabel(reason: AuthReason | 'caller_mismatch'): string {
  return reason === 'not_accepted' ? 'invalid' : reason
}

/**
 * Who opened a leg, as every later leg of its session is compared with it (re-attach, the other leg of a
 * joined call, on any worker or instance): a token's issuer and subject (its client: every token issued
 * to one client is the same caller), a hash of the static credential presented keyed with the fleet's
 * caller key (auth/fleet-key.ts; `Bearer x` and `x` alike; the credential itself is never kept), or
 * `anonymous` on a route that asks for none.
 */
export function callerTag(principal: Principal, presented: unknown, key: Buffer): string {
  if (principal.kind === 'token') return `token:${principal.iss}\n${principal.sub}`
  if (principal.kind === 'anonymous' || typeof presented !== 'string') return 'anonymous'
  const value = presented.trim().replace(/^bearer +/i, '')
  return `static:${createHmac('sha256', key).update(value, 'utf8').digest('base64url')}`
}

/**
 * `authenticate` (route-auth.ts) for a hook that takes no bearer tokens, settled at once: its static
 * list alone (constant time, raw or `Bearer <value>`). Keeps such a hook's handshake synchronous.
 */
export function authenticateStatic(
  presented: readonly unknown[],
  list: TenantCredentials,
  /** The route's outcome for an anonymous caller (its own tenant), made once per route. */
  anonymous: RouteAuthOutcome
): RouteAuthOutcome {
  if (!list.required) return anonymous
  let any = false
  for (const v of presented) {
    if (typeof v !== 'string' || v === '') continue
    any = true
    const accepted = list.outcomeOf(v)
    if (accepted !== undefined) return accepted
  }
  return any ? NOT_ACCEPTED : MISSING
}

/** The outcome of an anonymous caller of `route` (a route that asks for no credential): its own tenant. */
export function anonymousOutcome(route: string): RouteAuthOutcome {
  return { ok: true, principal: { kind: 'anonymous', tenant: route } }
}

// The outcomes are values without per-call state: made once (the text hook checks a credential per request).
const MISSING: RouteAuthOutcome = { ok: false, code: 'AUTH_MISSING', reason: 'missing' }
const NOT_ACCEPTED: RouteAuthOutcome = { ok: false, code: 'AUTH_INVALID', reason: 'not_accepted' }
