import type { RevocationStore } from './revocation'
import type { TokenVerifier } from './token-verify'

export interface RevokeAnswer {
  status: number
  json: Record<string, unknown>
}

/** Longest a `{jti, exp}` revocation may be asked to last: no token the gateway trusts should live longer. */
const MAX_EXTERNAL_LIFE_SECONDS = 7 * 24 * 3600
const MAX_BODY_CHARS = 16384

/**
 * `POST /admin/tokens/revoke` on the admin listener. Body (JSON): `{"token": "<jwt>"}`, or
 * `{"jti": "…"}` with an optional `"exp"` (epoch seconds). A revocation lasts until the token expires
 * (plus the clock skew): from the verified token's own `exp`; for a bare jti, from `exp` when given,
 * else for the gateway's own token lifetime. A token is verified (signature, issuer, audience) before
 * its jti is trusted; an expired one needs no revocation. The answer never contains the token.
 */
export async function revokeEndpoint(
  body: string,
  deps: { verifier: TokenVerifier; revocations: RevocationStore; ttlSeconds: number; nowMs?: () => number }
): Promise<RevokeAnswer> {
  const now = deps.nowMs?.() ?? Date.now()
  const skewMs = deps.verifier.clockSkewSeconds * 1000
  if (body.length > MAX_BODY_CHARS) return invalid('the body is too large')
  let req: unknown
  try {
    req = JSON.parse(body)
  } catch {
    return invalid('the body must be JSON: {"token": …} or {"jti": …}')
  }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) return invalid('the body must be a JSON object')
  const { token, jti, exp } = req as Record<string, unknown>
  if ((token === undefined) === (jti === undefined)) return invalid('give exactly one of token and jti')
  if (token !== undefined) {
    if (typeof token !== 'string') return invalid('token must be a string')
    const checked = await deps.verifier.inspect(token)
    if (!checked.ok) return { status: 400, json: { error: 'invalid_token', reason: checked.reason } }
    const c = checked.claims
    if (c.jti === undefined) return { status: 400, json: { error: 'invalid_token', reason: 'no_jti' } }
    const until = c.exp * 1000 + skewMs
    if (until <= now) return { status: 200, json: { jti: c.jti, revoked: false, reason: 'expired' } }
    return await record(deps.revocations, c.jti, until)
  }
  if (typeof jti !== 'string' || jti === '' || jti.length > 256) return invalid('jti must be a non-empty string')
  let until = now + deps.ttlSeconds * 1000 + skewMs
  if (exp !== undefined) {
    if (typeof exp !== 'number' || !Number.isFinite(exp)) return invalid('exp must be epoch seconds')
    if (exp - now / 1000 > MAX_EXTERNAL_LIFE_SECONDS) return invalid('exp is too far in the future')
    until = Math.max(until, exp * 1000 + skewMs)
  }
  return await record(deps.revocations, jti, until)
}

/** Store the revocation; a shared store (Redis) that did not take it is a 503: it holds on this instance only. */
async function record(revocations: RevocationStore, jti: string, until: number): Promise<RevokeAnswer> {
  try {
    await revocations.revoke(jti, until)
  } catch {
    return {
      status: 503,
      json: {
        error: 'temporarily_unavailable',
        error_description: 'the shared store did not take the revocation: it holds on this instance only; retry',
        jti
      }
    }
  }
  return { status: 200, json: { jti, revoked: true, untilEpochSeconds: Math.ceil(until / 1000) } }
}

function invalid(description: string): RevokeAnswer {
  return { status: 400, json: { error: 'invalid_request', error_description: description } }
}
