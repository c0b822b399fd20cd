import type { JwksFetch } from '../upstream/jwks-fetch'
import { ClientRegistry } from './client-auth'
import { RemoteJwks } from './jwks'
import { loadKeyRing } from './key-ring'
import { MemoryRevocationStore, type RevocationStore } from './revocation'
import { revokeEndpoint, type RevokeAnswer } from './revoke-endpoint'
import { checkTokenSettings, type RouteTokenSettings, type TokenSettings } from '../config/tokens'
import { tokenEndpoint, type OAuthAnswer } from './token-endpoint'
import { TokenIssuer } from './token-issuer'
import { TokenVerifier } from './token-verify'

/** Token auth of one config snapshot: built once at start-up (and on reload), then only called. */
export interface TokenAuth {
  readonly verifier: TokenVerifier
  readonly issuer: TokenIssuer
  readonly revocations: RevocationStore
  readonly jwks: readonly RemoteJwks[]
  /** `POST /oauth/token` on the public listener. */
  token(request: { headers: Record<string, string>; body: string }): Promise<OAuthAnswer>
  /** `POST /admin/tokens/revoke` on the admin listener. */
  revoke(body: string): Promise<RevokeAnswer>
}

/**
 * Builds token auth from the `tokens` section and every route's `auth.tokens`. Throws a `TypeError`
 * listing every problem (kids and pointers, never secrets) when the settings cannot work.
 * `revocations`: the store's implementation (Redis when configured); default in memory.
 */
export async function createTokenAuth(
  tokens: TokenSettings,
  routes: Record<string, RouteTokenSettings | undefined>,
  opts: {
    revocations?: RevocationStore
    /** Epoch milliseconds (wall clock). */
    nowMs?: () => number
    readFile?: (path: string) => Promise<string>
    fetch?: JwksFetch
  } = {}
): Promise<TokenAuth> {
  const byRoute = Object.fromEntries(Object.entries(routes).map(([name, t]) => [name, { auth: { tokens: t } }]))
  const problems = checkTokenSettings(tokens, byRoute)
  if (problems.length > 0) throw new TypeError(`token settings cannot work:\n${problems.join('\n')}`)
  const nowMs = opts.nowMs ?? Date.now
  const ring = await loadKeyRing(tokens.keys ?? [], opts.readFile)
  const revocations = opts.revocations ?? new MemoryRevocationStore(nowMs)
  const jwks = (tokens.jwks ?? []).map(s => new RemoteJwks(s, { nowMs, fetch: opts.fetch }))
  const issuer = new TokenIssuer(tokens, ring, nowMs)
  const clients = new ClientRegistry(tokens.clients ?? [])
  const verifier = new TokenVerifier(tokens, { ring, jwks, routes, revocations, nowMs })
  return {
    verifier,
    issuer,
    revocations,
    jwks,
    token: request => tokenEndpoint(request, { clients, issuer }),
    revoke: body => revokeEndpoint(body, { verifier, revocations, ttlSeconds: issuer.ttlSeconds, nowMs })
  }
}
