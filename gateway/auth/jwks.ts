import { importJWK, type JWK } from 'jose'
import { TOKEN_DEFAULTS, type JwksIssuerSettings } from '../config/tokens'
import { fetchJwks, type JwksFetch } from '../upstream/jwks-fetch'

export type JwksAlg = 'RS256' | 'ES256'

/** A public key from an issuer's JWKS, its `alg` pinned when the document was read. */
export interface RemoteKey {
  readonly kid: string
  readonly alg: JwksAlg
  readonly key: Awaited<ReturnType<typeof importJWK>>
}

const MAX_KEYS = 100

/**
 * The keys of one external issuer, cached from its JWKS URL (RFC 7517). A kid not in the cache, or a
 * cache older than `maxAgeSeconds`, triggers a refetch, but at most one fetch starts per
 * `minRefreshIntervalSeconds` and concurrent misses share the fetch in flight: a storm of invented
 * kids costs the issuer one request per interval. A failed fetch keeps the keys already held.
 */
export class RemoteJwks {
  private keys = new Map<string, RemoteKey>()
  private lastAttempt = Number.NEGATIVE_INFINITY
  private lastSuccess = Number.NEGATIVE_INFINITY
  private inflight: Promise<void> | null = null
  private readonly minIntervalMs: number
  private readonly maxAgeMs: number
  private readonly timeoutMs: number
  private readonly algorithms: readonly JwksAlg[]
  /** Fetches started, and the last failure's short text (for metrics and logs). */
  fetches = 0
  lastError: string | undefined

  constructor(
    readonly settings: JwksIssuerSettings,
    private readonly opts: { nowMs?: () => number; fetch?: JwksFetch } = {}
  ) {
    this.minIntervalMs = (settings.minRefreshIntervalSeconds ?? TOKEN_DEFAULTS.minRefreshIntervalSeconds) * 1000
    this.maxAgeMs = (settings.maxAgeSeconds ?? TOKEN_DEFAULTS.maxAgeSeconds) * 1000
    this.timeoutMs = (settings.timeoutSeconds ?? TOKEN_DEFAULTS.timeoutSeconds) * 1000
    this.algorithms = settings.algorithms ?? ['RS256', 'ES256']
  }

  /** The key named `kid`, fetching the JWKS first when the kid is unknown or the cache is old (rate-bounded). */
  async key(kid: string): Promise<RemoteKey | undefined> {
    const now = this.now()
    if (!this.keys.has(kid) || now - this.lastSuccess >= this.maxAgeMs) await this.refresh(now)
    return this.keys.get(kid)
  }

  private now(): number {
    return (this.opts.nowMs ?? Date.now)()
  }

  private refresh(now: number): Promise<void> {
    if (this.inflight !== null) return this.inflight
    if (now - this.lastAttempt < this.minIntervalMs) return Promise.resolve()
    this.lastAttempt = now
    this.fetches++
    this.inflight = this.load().finally(() => {
      this.inflight = null
    })
    return this.inflight
  }

  private async load(): Promise<void> {
    try {
      const doc = await (this.opts.fetch ?? fetchJwks)(this.settings.url, this.timeoutMs)
      this.keys = await readJwks(doc, this.algorithms)
      this.lastSuccess = this.now()
      this.lastError = undefined
    } catch (err) {
      this.lastError = err instanceof Error ? err.message : 'JWKS fetch failed'
    }
  }
}

/**
 * The usable signing keys of a JWKS document: public RSA or EC P-256 keys with a kid, `use` absent or
 * `sig`, an `alg` (given or implied by the key type) among `algorithms`. Symmetric (`oct`) keys and
 * keys with private parts are skipped, so an issuer's document can never make us accept HMAC tokens.
 */
export async function readJwks(doc: unknown, algorithms: readonly JwksAlg[]): Promise<Map<string, RemoteKey>> {
  const list = (doc as { keys?: unknown } | null)?.keys
  if (!Array.isArray(list)) throw new Error('JWKS document has no keys array')
  const out = new Map<string, RemoteKey>()
  for (const jwk of list.slice(0, MAX_KEYS) as JWK[]) {
    if (jwk === null || typeof jwk !== 'object' || typeof jwk.kid !== 'string' || jwk.kid === '') continue
    if (jwk.use !== undefined && jwk.use !== 'sig') continue
    if ('d' in jwk || out.has(jwk.kid)) continue
    const implied = jwk.kty === 'RSA' ? 'RS256' : jwk.kty === 'EC' && jwk.crv === 'P-256' ? 'ES256' : undefined
    if (implied === undefined || (jwk.alg !== undefined && jwk.alg !== implied)) continue
    if (!algorithms.includes(implied)) continue
    try {
      out.set(jwk.kid, { kid: jwk.kid, alg: implied, key: await importJWK(jwk, implied) })
    } catch {
      // An unusable key is skipped; the others stay usable.
    }
  }
  return out
}
