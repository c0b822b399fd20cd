import { randomBytes } from 'node:crypto'
import { SignJWT } from 'jose'
import type { KeyRing } from './key-ring'
import { TOKEN_DEFAULTS, type TokenSettings } from '../config/tokens'

/** The JOSE `typ` of the gateway's access tokens (RFC 9068 2.1); verification insists on it. */
export const ACCESS_TOKEN_TYP = 'at+jwt'

export interface IssuedToken {
  readonly accessToken: string
  readonly jti: string
  readonly expiresIn: number
  readonly scope: string
}

/**
 * Signs the gateway's access tokens with the FIRST key of the ring. Claims: `iss`, `sub` (client id),
 * `aud` (`tokens.audience`, default the issuer: the gateway is the audience of its own tokens, so a
 * token minted for another service by a shared key or issuer never opens the gateway), `scope`,
 * `iat`, `nbf` (= iat), `exp`, `jti` (128 random bits); header `alg`, `kid`, `typ: at+jwt`.
 */
export class TokenIssuer {
  readonly ttlSeconds: number
  constructor(
    private readonly tokens: TokenSettings,
    private readonly ring: KeyRing,
    /** Epoch milliseconds (wall clock). */
    private readonly nowMs: () => number = Date.now
  ) {
    this.ttlSeconds = tokens.ttlSeconds ?? TOKEN_DEFAULTS.ttlSeconds
  }

  /** True when a key is there to sign with. */
  get canIssue(): boolean {
    return this.ring.signer !== undefined
  }

  async issue(sub: string, scope: readonly string[]): Promise<IssuedToken> {
    const signer = this.ring.signer
    if (signer === undefined) throw new TypeError('tokens.keys is empty: there is no key to sign tokens with')
    const iat = Math.floor(this.nowMs() / 1000)
    const jti = randomBytes(16).toString('base64url')
    const joined = scope.join(' ')
    const accessToken = await new SignJWT({ scope: joined })
      .setProtectedHeader({ alg: signer.alg, kid: signer.kid, typ: ACCESS_TOKEN_TYP })
      .setIssuer(this.tokens.issuer)
      .setSubject(sub)
      .setAudience(this.tokens.audience ?? this.tokens.issuer)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(iat + this.ttlSeconds)
      .setJti(jti)
      .sign(signer.signKey)
    return { accessToken, jti, expiresIn: this.ttlSeconds, scope: joined }
  }
}
