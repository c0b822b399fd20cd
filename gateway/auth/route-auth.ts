import type { ErrorCode } from '../errors'
import { extractJwt } from './bearer'
import type { TenantCredentials } from './tenant-credentials'
import type { TokenFailure, TokenVerifier } from './token-verify'
import { SELF_ISSUER } from '../config/tokens'

/**
 * Who opened a leg or sent an utterance: what re-attach binding (issue 11 item 3) compares, and the tenant
 * it belongs to (its namespace and quotas: a configured tenant, or the route's own auth, a tenant named after
 * the route; an anonymous caller of a route that asks for no credential is the route's tenant too).
 */
export type Principal =
  | { kind: 'anonymous'; tenant: string }
  | { kind: 'static'; tenant: string }
  | { kind: 'token'; sub: string; iss: string; jti: string | undefined; exp: number; tenant: string }

/** Why a credential was refused: a token failure, nothing presented, or a value neither list nor token. */
export type AuthReason = TokenFailure | 'missing' | 'not_accepted'

export type RouteAuthOutcome =
  | { ok: true; principal: Principal }
  | { ok: false; code: Extract<ErrorCode, 'AUTH_MISSING' | 'AUTH_INVALID'>; reason: AuthReason }

/**
 * One hook of one route: its static lists by tenant, whether it takes bearer tokens (`auth.tokens`), and
 * which tenant a token of the gateway's own clients belongs to (`clients`: client id → tenant, null for a
 * tenant the route does not admit; a token of another client is the route's own tenant).
 */
export interface HookAuth {
  route: string
  hook: 'audio' | 'text'
  list: TenantCredentials
  tokens: boolean
  clients: ReadonlyMap<string, string | null>
}

/**
 * A hook's whole credential check: the static list (constant time, raw or `Bearer <value>`), then
 * bearer tokens when the route takes them. `presented`: audio passes `[authenticationToken]`; text
 * passes `[body.authorizationHeader, headers.authorization]`. A hook that takes tokens demands a
 * credential even when its static list is empty (`CredentialList.required` alone would let it open).
 */
export async function authenticate(
  presented: readonly unknown[],
  hook: HookAuth,
  verifier: TokenVerifier | undefined
): Promise<RouteAuthOutcome> {
  const tokens = hook.tokens && verifier !== undefined
  if (!hook.list.required && !hook.tokens) return { ok: true, principal: { kind: 'anonymous', tenant: hook.route } }
  const values = presented.filter((v): v is string => typeof v === 'string' && v !== '')
  if (values.length === 0) return { ok: false, code: 'AUTH_MISSING', reason: 'missing' }
  if (hook.list.required) {
    for (const v of values) {
      const accepted = hook.list.outcomeOf(v)
      if (accepted !== undefined) return accepted
    }
  }
  let reason: AuthReason = 'not_accepted'
  if (tokens) {
    for (const v of values) {
      const jwt = extractJwt(v)
      if (jwt === null) continue
      const r = await verifier.verify(jwt, { route: hook.route, hook: hook.hook })
      if (r.ok) {
        const { sub, iss, jti, exp, issuerName } = r.claims
        const client = issuerName === SELF_ISSUER ? hook.clients.get(sub) : undefined
        // A client of a tenant this route does not admit: its token opens nothing here.
        if (client === null) return { ok: false, code: 'AUTH_INVALID', reason: 'not_accepted' }
        return { ok: true, principal: { kind: 'token', sub, iss, jti, exp, tenant: client ?? hook.route } }
      }
      if (reason === 'not_accepted') reason = r.reason
    }
  }
  return { ok: false, code: 'AUTH_INVALID', reason }
}
