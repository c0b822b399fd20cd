/**
 * The `tokens` section of the gateway config and the token part of a route's `auth`, as the config
 * loader hands them over (validated by `schemas/fragments/tokens.schema.json`, `${ENV}` expanded,
 * paths resolved, frozen). Defaults live in the schema; `withTokenDefaults` repeats them for callers
 * (tests, tools) that build settings by hand.
 */

/** One signing/verification key. The FIRST key of `tokens.keys` signs; every listed key verifies. */
export type TokenKeySettings =
  /** HS256: a shared secret of at least 32 bytes (RFC 7518 3.2: a key as long as the hash). */
  | { kid: string; secret: string }
  /** ES256 (EC P-256) or RS256 (RSA, 2048 bits or more): a PKCS#8 or SEC1/PKCS#1 PEM private key file. */
  | { kid: string; privateKeyFile: string }

/** A client of the token endpoint (RFC 6749 client-credentials grant). */
export interface TokenClientSettings {
  id: string
  secret: string
  /** Space-separated `route:hook` scopes this client may ask for; its tokens carry them. */
  scope: string
}

/** An external issuer whose tokens a route may trust, with keys from its JWKS URL (RFC 7517). */
export interface JwksIssuerSettings {
  /** The name routes use in `auth.tokens.issuers`. */
  name: string
  url: string
  /** Expected `iss` of its tokens. */
  issuer: string
  /** Expected `aud` of its tokens (one of the token's audiences must equal it). */
  audience: string
  /** Accepted `alg` values; never HMAC (a JWKS publishes public keys). */
  algorithms?: Array<'RS256' | 'ES256'>
  /** Fewest seconds between two fetches of the URL, also when kids are unknown (default 30). */
  minRefreshIntervalSeconds?: number
  /** Seconds after which cached keys are refetched on next use (default 600). */
  maxAgeSeconds?: number
  /** Seconds a fetch may take (default 5). */
  timeoutSeconds?: number
  /** Longest lifetime of its tokens: exp − iat (or exp − now without iat); longer is refused (default 3600). */
  maxLifetimeSeconds?: number
}

export interface TokenSettings {
  /** `iss` of the gateway's own tokens. */
  issuer: string
  /** `aud` of the gateway's own tokens; default: the issuer (the gateway is its own audience). */
  audience?: string
  /** Lifetime of an issued token (default 300). */
  ttlSeconds?: number
  /** Tolerance for `exp`/`nbf` against the local clock (default 30, at most 300). */
  clockSkewSeconds?: number
  keys?: TokenKeySettings[]
  clients?: TokenClientSettings[]
  jwks?: JwksIssuerSettings[]
}

/**
 * `routes.<name>.auth.tokens`: `true` trusts the gateway's own tokens (same as `{ issuers: [self] }`);
 * a list names `self` and/or `tokens.jwks[].name` entries. A token opens a route's hook only if its
 * scope names `<route>:<hook>`.
 */
export type RouteTokenSettings = boolean | { issuers: string[] }

/** The name of the gateway's own issuer in `auth.tokens.issuers`. */
export const SELF_ISSUER = 'self'

export const TOKEN_DEFAULTS = {
  ttlSeconds: 300,
  clockSkewSeconds: 30,
  minRefreshIntervalSeconds: 30,
  maxAgeSeconds: 600,
  timeoutSeconds: 5,
  maxLifetimeSeconds: 3600
} as const

/** Minimum length of an HS256 secret in bytes. */
export const MIN_HS256_SECRET_BYTES = 32

/** The issuers a route trusts, or none when it takes no tokens. */
export function trustedIssuers(route: RouteTokenSettings | undefined): readonly string[] {
  if (route === undefined || route === false) return []
  if (route === true) return [SELF_ISSUER]
  return typeof route === 'object' && route !== null && Array.isArray(route.issuers) ? route.issuers : []
}

/**
 * Cross-field checks the schema cannot express, as `pointer: message` lines (empty when fine). Never
 * quotes a secret.
 */
export function checkTokenSettings(
  tokens: TokenSettings | undefined,
  routes: Record<string, { auth?: { tokens?: RouteTokenSettings } }>
): string[] {
  const problems: string[] = []
  const keys = tokens?.keys ?? []
  keys.forEach((k, i) => {
    if ('secret' in k && Buffer.byteLength(k.secret, 'utf8') < MIN_HS256_SECRET_BYTES) {
      problems.push(
        `/tokens/keys/${i}/secret: an HS256 secret must be at least ${MIN_HS256_SECRET_BYTES} bytes (key ${k.kid})`
      )
    }
  })
  const kids = new Set<string>()
  keys.forEach((k, i) => {
    if (kids.has(k.kid)) problems.push(`/tokens/keys/${i}/kid: duplicate kid ${k.kid}`)
    kids.add(k.kid)
  })
  const ids = new Set<string>()
  ;(tokens?.clients ?? []).forEach((c, i) => {
    if (ids.has(c.id)) problems.push(`/tokens/clients/${i}/id: duplicate client id`)
    ids.add(c.id)
  })
  if ((tokens?.clients?.length ?? 0) > 0 && keys.length === 0)
    problems.push('/tokens/keys: clients are configured but no key signs')
  // The unverified `iss` picks the key set, so no two trusted issuers may share an `iss`.
  const issuers = new Set(tokens === undefined ? [] : [tokens.issuer])
  ;(tokens?.jwks ?? []).forEach((j, i) => {
    if (issuers.has(j.issuer)) problems.push(`/tokens/jwks/${i}/issuer: another issuer already has this iss`)
    issuers.add(j.issuer)
  })
  const jwksNames = new Set((tokens?.jwks ?? []).map(j => j.name))
  for (const [name, route] of Object.entries(routes)) {
    for (const issuer of trustedIssuers(route.auth?.tokens)) {
      const at = `/routes/${name}/auth/tokens`
      if (issuer === SELF_ISSUER) {
        if (keys.length === 0)
          problems.push(`${at}: the route trusts the gateway's own tokens but tokens.keys is empty`)
      } else if (!jwksNames.has(issuer)) {
        problems.push(`${at}: no tokens.jwks entry is named ${issuer}`)
      }
    }
  }
  return problems
}
