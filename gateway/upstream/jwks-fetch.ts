import { request } from 'undici'

/** Largest JWKS document accepted: a few dozen keys fit in far less. */
const MAX_JWKS_BYTES = 256 * 1024

/**
 * Fetches a JWKS document and parses it as JSON. Throws on a non-200 status, a body over 256 KiB, a
 * timeout or invalid JSON; the thrown message names what went wrong, never the URL (it may carry a
 * credential in its query) nor the body. Redirects are not followed.
 */
export type JwksFetch = (url: string, timeoutMs: number) => Promise<unknown>

export const fetchJwks: JwksFetch = async (url, timeoutMs) => {
  const res = await request(url, {
    method: 'GET',
    headers: { accept: 'application/jwk-set+json, application/json' },
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    signal: AbortSignal.timeout(timeoutMs)
  })
  if (res.statusCode !== 200) {
    await res.body.dump()
    throw new Error(`JWKS answered HTTP ${res.statusCode}`)
  }
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of res.body) {
    size += (chunk as Buffer).length
    if (size > MAX_JWKS_BYTES) {
      res.body.destroy()
      throw new Error(`JWKS document over ${MAX_JWKS_BYTES} bytes`)
    }
    chunks.push(chunk as Buffer)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    throw new Error('JWKS document is not JSON')
  }
}
