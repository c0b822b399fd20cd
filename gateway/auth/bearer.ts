/** Three base64url segments: the shape of a JWS compact serialization (RFC 7515 7.1). */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/
const MAX_TOKEN_CHARS = 8192

/**
 * The JWT in a presented credential, or null when it holds none. Accepts `Bearer <jwt>` (scheme in any
 * case, RFC 7235 2.1; RFC 6750 2.1) and, for the audio hook's `authenticationToken`, the bare JWT.
 * Audio passes `authenticationToken`; text passes the `Authorization` header, else the body's
 * `authorizationHeader`. A value that is not JWT-shaped (a static header credential) gives null, so
 * the caller can go on to the route's static list.
 */
export function extractJwt(presented: unknown): string | null {
  if (typeof presented !== 'string' || presented.length > MAX_TOKEN_CHARS) return null
  let s = presented.trim()
  const m = /^bearer +(.*)$/i.exec(s)
  if (m) s = m[1].trim()
  return COMPACT_JWS.test(s) ? s : null
}

/** The text hook's credential: the `Authorization` header when present, else the body's `authorizationHeader`. */
export function textCredential(headers: Record<string, string | undefined>, body: unknown): string | undefined {
  const h = headers.authorization
  if (typeof h === 'string' && h !== '') return h
  if (body !== null && typeof body === 'object') {
    const a = (body as Record<string, unknown>).authorizationHeader
    if (typeof a === 'string' && a !== '') return a
  }
  return undefined
}
