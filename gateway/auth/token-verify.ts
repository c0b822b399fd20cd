import { compactVerify, decodeJwt, decodeProtectedHeader } from 'jose'
import type { KeyRing } from './key-ring'
import type { RevocationStore } from './revocation'
import { scopeAllows } from './scope'
import { ACCESS_TOKEN_TYP } from './token-issuer'
import {
  SELF_ISSUER,
  TOKEN_DEFAULTS,
  trustedIssuers,
  type JwksIssuerSettings,
  type RouteTokenSettings,
  type TokenSettings
} from './token-config'

/** Why a token was refused: stable values for logs and the `auth_failures_total{reason}` label. */
export type TokenFailure =
  | 'malformed'
  | 'unknown_kid'
  | 'bad_signature'
  | 'wrong_issuer'
  | 'wrong_audience'
  | 'expired'
  | 'not_yet_valid'
  | 'revoked'
  | 'scope'
  | 'lifetime'

export const TOKEN_FAILURES: readonly TokenFailure[] = [
  'malformed',
  'unknown_kid',
  'bad_signature',
  'wrong_issuer',
  'wrong_audience',
  'expired',
  'not_yet_valid',
  'revoked',
  'scope',
  'lifetime'
]

/** The verified claims the gateway uses. */
export interface TokenClaims {
  readonly sub: string
  readonly iss: string
  /** Name of the trusted issuer: `self` or a `tokens.jwks[].name`. */
  readonly issuerName: string
  readonly jti: string | undefined
  /** Epoch seconds. */
  readonly exp: number
  readonly scope: string
}

export type TokenCheck = { ok: true; claims: TokenClaims } | { ok: false; reason: TokenFailure }

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/
const MAX_TOKEN_CHARS = 8192
const MAX_SKEW_SECONDS = 300

type VerifyKey = Parameters<typeof compactVerify>[1]

/** An external issuer's keys by kid, each with its pinned alg (`RemoteJwks` is the implementation). */
export interface ExternalIssuer {
  readonly settings: Pick<JwksIssuerSettings, 'name' | 'issuer' | 'audience' | 'maxLifetimeSeconds'>
  key(kid: string): Promise<{ alg: string; key: VerifyKey } | undefined>
}

interface Trusted {
  name: string
  issuer: string
  audience: string
  /** Own tokens must say `typ: at+jwt`; an external issuer's may not. */
  requireTyp: boolean
  /** Own tokens always carry a jti. */
  requireJti: boolean
  /** Longest lifetime of a token (seconds); own tokens are bounded by tokens.ttlSeconds when issued. */
  maxLifetimeSeconds: number
  key(kid: string): Promise<{ alg: string; key: VerifyKey } | undefined>
}

/**
 * Verifies bearer tokens: the gateway's own (key ring) and those of external issuers (JWKS). Every
 * outcome is a value; no error text, and never the token, leaves this module.
 */
export class TokenVerifier {
  private readonly trusted = new Map<string, Trusted>()
  private readonly skewSeconds: number

  constructor(
    tokens: TokenSettings,
    private readonly opts: {
      ring: KeyRing
      jwks?: readonly ExternalIssuer[]
      routes: Record<string, RouteTokenSettings | undefined>
      revocations: RevocationStore
      /** Epoch milliseconds (wall clock); tests pass a fake. */
      nowMs?: () => number
    }
  ) {
    this.skewSeconds = Math.min(
      MAX_SKEW_SECONDS,
      Math.max(0, tokens.clockSkewSeconds ?? TOKEN_DEFAULTS.clockSkewSeconds)
    )
    const ring = opts.ring
    this.trusted.set(SELF_ISSUER, {
      name: SELF_ISSUER,
      issuer: tokens.issuer,
      audience: tokens.audience ?? tokens.issuer,
      requireTyp: true,
      requireJti: true,
      maxLifetimeSeconds: Number.POSITIVE_INFINITY,
      key: async kid => {
        const k = ring.byKid(kid)
        return k && { alg: k.alg, key: k.verifyKey }
      }
    })
    for (const remote of opts.jwks ?? []) {
      const s = remote.settings
      this.trusted.set(s.name, {
        name: s.name,
        issuer: s.issuer,
        audience: s.audience,
        requireTyp: false,
        requireJti: false,
        maxLifetimeSeconds: s.maxLifetimeSeconds ?? TOKEN_DEFAULTS.maxLifetimeSeconds,
        key: kid => remote.key(kid)
      })
    }
  }

  /** The tolerance applied to `exp` and `nbf`, in seconds. */
  get clockSkewSeconds(): number {
    return this.skewSeconds
  }

  /** Verifies `token` (the bare JWT, see `extractJwt`) for one hook of one route. */
  async verify(token: string, target: { route: string; hook: 'audio' | 'text' }): Promise<TokenCheck> {
    // MUST read own keys only: a route name comes from the URL (`/audio/constructor`).
    const routes = this.opts.routes
    const names = trustedIssuers(Object.hasOwn(routes, target.route) ? routes[target.route] : undefined)
    const checked = await this.check(token, names)
    if (!checked.ok) return checked
    const c = checked.claims
    const now = this.opts.nowMs?.() ?? Date.now()
    if (now / 1000 >= c.exp + this.skewSeconds) return { ok: false, reason: 'expired' }
    if (checked.nbf !== undefined && now / 1000 + this.skewSeconds < checked.nbf)
      return { ok: false, reason: 'not_yet_valid' }
    // An external issuer's token lives no longer than its maxLifetimeSeconds (a token without jti cannot be revoked).
    if (c.exp - (checked.iat ?? now / 1000) > checked.maxLifetimeSeconds) return { ok: false, reason: 'lifetime' }
    if (c.jti !== undefined && (await this.opts.revocations.isRevoked(c.jti))) return { ok: false, reason: 'revoked' }
    if (!scopeAllows(c.scope, target.route, target.hook)) return { ok: false, reason: 'scope' }
    return { ok: true, claims: c }
  }

  /**
   * Signature, issuer and audience only, against every trusted issuer (not a route's): for the revoke
   * endpoint, which must also take tokens that are expired or of another route.
   */
  async inspect(token: string): Promise<TokenCheck> {
    const checked = await this.check(token, [...this.trusted.keys()])
    return checked.ok ? { ok: true, claims: checked.claims } : checked
  }

  private async check(
    token: string,
    issuerNames: readonly string[]
  ): Promise<
    | { ok: true; claims: TokenClaims; nbf: number | undefined; iat: number | undefined; maxLifetimeSeconds: number }
    | { ok: false; reason: TokenFailure }
  > {
    if (typeof token !== 'string' || token.length > MAX_TOKEN_CHARS || !COMPACT_JWS.test(token)) {
      return { ok: false, reason: 'malformed' }
    }
    let header: ReturnType<typeof decodeProtectedHeader>
    let unverified: ReturnType<typeof decodeJwt>
    try {
      header = decodeProtectedHeader(token)
      unverified = decodeJwt(token)
    } catch {
      return { ok: false, reason: 'malformed' }
    }
    // The unverified `iss` only picks which key set to try; the signature then binds it.
    const source = issuerNames.map(n => this.trusted.get(n)).find(t => t !== undefined && t.issuer === unverified.iss)
    if (source === undefined) return { ok: false, reason: 'wrong_issuer' }
    if (typeof header.kid !== 'string' || header.kid === '') return { ok: false, reason: 'unknown_kid' }
    const key = await source.key(header.kid)
    if (key === undefined) return { ok: false, reason: 'unknown_kid' }
    let payload: Uint8Array
    try {
      // MUST pin the algorithm to the key's own: no `none`, no HMAC with a public key.
      payload = (await compactVerify(token, key.key, { algorithms: [key.alg] })).payload
    } catch {
      return { ok: false, reason: 'bad_signature' }
    }
    let claims: Record<string, unknown>
    try {
      claims = JSON.parse(Buffer.from(payload).toString('utf8'))
    } catch {
      return { ok: false, reason: 'malformed' }
    }
    if (claims === null || typeof claims !== 'object' || Array.isArray(claims))
      return { ok: false, reason: 'malformed' }
    if (source.requireTyp && header.typ !== ACCESS_TOKEN_TYP) return { ok: false, reason: 'malformed' }
    if (claims.iss !== source.issuer) return { ok: false, reason: 'wrong_issuer' }
    const aud = claims.aud
    if (!(aud === source.audience || (Array.isArray(aud) && aud.includes(source.audience)))) {
      return { ok: false, reason: 'wrong_audience' }
    }
    const { sub, exp, nbf, iat, jti, scope } = claims
    if (typeof sub !== 'string' || sub === '' || typeof exp !== 'number' || !Number.isFinite(exp)) {
      return { ok: false, reason: 'malformed' }
    }
    if (nbf !== undefined && (typeof nbf !== 'number' || !Number.isFinite(nbf)))
      return { ok: false, reason: 'malformed' }
    if (iat !== undefined && (typeof iat !== 'number' || !Number.isFinite(iat)))
      return { ok: false, reason: 'malformed' }
    if (jti !== undefined && (typeof jti !== 'string' || jti === '')) return { ok: false, reason: 'malformed' }
    if (source.requireJti && jti === undefined) return { ok: false, reason: 'malformed' }
    return {
      ok: true,
      nbf: nbf as number | undefined,
      iat: iat as number | undefined,
      maxLifetimeSeconds: source.maxLifetimeSeconds,
      claims: {
        sub,
        iss: source.issuer,
        issuerName: source.name,
        jti: jti as string | undefined,
        exp,
        scope: typeof scope === 'string' ? scope : ''
      }
    }
  }
}
