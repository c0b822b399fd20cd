import { existsSync, readFileSync } from 'node:fs'
import { JWT } from 'google-auth-library'

// Google Cloud credentials of a gRPC replica (mapping `audio.grpc.auth: google`), with google-auth-library:
// a service account key signs its own short-lived access tokens (self-signed JWTs, RS256, one hour, made
// anew five minutes before they expire: Google's "Service account authorization without OAuth" for
// gRPC APIs, no token endpoint round trip), sent as `authorization: Bearer …`; anything else is an API key,
// sent as `x-goog-api-key`. Neither is ever logged: they go only into the call's metadata.

/** Makes the call-credential headers of one replica. */
export type AuthHeaders = () => Promise<Record<string, string>>

interface ServiceAccountKey {
  type?: string
  client_email: string
  private_key: string
  private_key_id?: string
}

const cache = new Map<string, AuthHeaders>()

/**
 * The audience of a self-signed token: the API's own address, `https://speech.googleapis.com/` for the
 * endpoint speech.googleapis.com and for its regional ones (us-central1-speech.googleapis.com).
 */
export function audienceOf(address: string): string {
  const host = address.replace(/:\d+$/, '')
  return `https://${host.replace(/^[a-z]+-[a-z]+\d+-(?=[a-z0-9-]+\.googleapis\.com$)/, '')}/`
}

/**
 * The headers for `credential` (a service account key's JSON, the path of its JSON file, or an API key)
 * on calls to `address`; one token cache per credential and address. Throws (at the first call) a
 * TypeError naming what is wrong with a key, never quoting it.
 */
export function googleAuthHeaders(credential: string, address: string): AuthHeaders {
  const key = `${address}\n${credential}`
  const hit = cache.get(key)
  if (hit !== undefined) return hit
  const account = serviceAccount(credential)
  let made: AuthHeaders
  if (account === null) made = async () => ({ 'x-goog-api-key': credential })
  else {
    const jwt = new JWT({ email: account.client_email, key: account.private_key, keyId: account.private_key_id })
    const audience = audienceOf(address)
    made = async () => {
      const headers = await jwt.getRequestHeaders(audience)
      const out: Record<string, string> = {}
      headers.forEach((v, k) => {
        out[k] = v
      })
      return out
    }
  }
  cache.set(key, made)
  return made
}

/** The service account key `credential` holds or names; null: it is an API key. */
function serviceAccount(credential: string): ServiceAccountKey | null {
  const text = credential.trim()
  let json: string
  if (text.startsWith('{')) json = text
  else if (text.endsWith('.json') && existsSync(text)) json = readFileSync(text, 'utf8')
  else return null
  let parsed: Partial<ServiceAccountKey>
  try {
    parsed = JSON.parse(json) as Partial<ServiceAccountKey>
  } catch {
    throw new TypeError('the replica credential looks like a service account key but is not JSON')
  }
  if (typeof parsed.client_email !== 'string' || typeof parsed.private_key !== 'string')
    throw new TypeError('the service account key has no client_email or private_key')
  return parsed as ServiceAccountKey
}
