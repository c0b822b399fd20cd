import type { ErrorCode } from '../errors'
import { extractJwt } from './bearer'
import type { CredentialList } from './credentials'
import type { TokenFailure, TokenVerifier } from './token-verify'

/** Who opened a leg or sent an utterance: what re-attach binding (issue 11 item 3) compares. */
export type Principal =
  | { kind: 'anonymous' }
  | { kind: 'static' }
  | { kind: 'token'; sub: string; iss: string; jti: string | undefined; exp: number }

/** Why a credential was refused: a token failure, nothing presented, or a value neither list nor token. */
export type AuthReason = TokenFailure | 'missing' | 'not_accepted'

export type RouteAuthOutcome =
  | { ok: true; principal: Principal }
  | { ok: false; code: Extract<ErrorCode, 'AUTH_MISSING' | 'AUTH_INVALID'>; reason: AuthReason }

/** One hook of one route: its static list and whether it takes bearer tokens (`auth.tokens`). */
export interface HookAuth {
  route: string
  hook: 'audio' | 'text'
  list: CredentialList
  tokens: boolean
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
  if (!hook.list.required && !hook.tokens) return { ok: true, principal: { kind: 'anonymous' } }
  const values = presented.filter((v): v is string => typeof v === 'string' && v !== '')
  if (values.length === 0) return { ok: false, code: 'AUTH_MISSING', reason: 'missing' }
  if (hook.list.required) {
    for (const v of values) if (hook.list.accepts(v)) return { ok: true, principal: { kind: 'static' } }
  }
  let reason: AuthReason = 'not_accepted'
  if (tokens) {
    for (const v of values) {
      const jwt = extractJwt(v)
      if (jwt === null) continue
      const r = await verifier.verify(jwt, { route: hook.route, hook: hook.hook })
      if (r.ok) {
        const { sub, iss, jti, exp } = r.claims
        return { ok: true, principal: { kind: 'token', sub, iss, jti, exp } }
      }
      if (reason === 'not_accepted') reason = r.reason
    }
  }
  return { ok: false, code: 'AUTH_INVALID', reason }
}
