import { randomBytes } from 'node:crypto'
import { CredentialList } from './credentials'
import type { TokenClientSettings } from '../config/tokens'

/** How the client presented its credentials (RFC 6749 2.3.1). */
export type ClientCredentials =
  | { method: 'basic'; id: string; secret: string }
  | { method: 'body'; id: string; secret: string }

export type ClientCredentialsResult =
  | { ok: true; credentials: ClientCredentials }
  /** `malformed_basic`: an Authorization header that is not well-formed Basic; `none`: no credentials at all. */
  | { ok: false; problem: 'both_methods' | 'malformed_basic' | 'unsupported_scheme' | 'none' | 'incomplete_body' }

/**
 * The client's credentials from the `Authorization: Basic` header or the form body, never both
 * (RFC 6749 2.3.1: "MUST NOT use more than one authentication method in each request").
 */
export function clientCredentials(authorization: string | undefined, form: URLSearchParams): ClientCredentialsResult {
  const inBody = form.has('client_id') || form.has('client_secret')
  if (authorization !== undefined) {
    if (inBody) return { ok: false, problem: 'both_methods' }
    const m = /^basic +([A-Za-z0-9+/]+={0,2}) *$/i.exec(authorization)
    if (m === null)
      return { ok: false, problem: /^basic\b/i.test(authorization) ? 'malformed_basic' : 'unsupported_scheme' }
    const decoded = Buffer.from(m[1], 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    if (colon < 1) return { ok: false, problem: 'malformed_basic' }
    // RFC 6749 2.3.1: id and secret are form-urlencoded before they are joined and base64-encoded.
    const id = formDecode(decoded.slice(0, colon))
    const secret = formDecode(decoded.slice(colon + 1))
    if (id === null || secret === null || id === '') return { ok: false, problem: 'malformed_basic' }
    return { ok: true, credentials: { method: 'basic', id, secret } }
  }
  if (!inBody) return { ok: false, problem: 'none' }
  const id = form.get('client_id')
  const secret = form.get('client_secret')
  if (id === null || id === '' || secret === null) return { ok: false, problem: 'incomplete_body' }
  return { ok: true, credentials: { method: 'body', id, secret } }
}

function formDecode(s: string): string | null {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '))
  } catch {
    return null
  }
}

/**
 * The configured clients. `authenticate` compares the secret in constant time (`CredentialList`:
 * fixed-length digests, no early exit) and does the same work for an unknown client id as for a known
 * one, so timing tells neither whether an id exists nor how close a secret was.
 */
export class ClientRegistry {
  private readonly clients = new Map<string, { settings: TokenClientSettings; secret: CredentialList }>()
  private readonly decoy = new CredentialList([randomBytes(32).toString('base64url')])

  constructor(clients: readonly TokenClientSettings[]) {
    for (const c of clients) this.clients.set(c.id, { settings: c, secret: new CredentialList([c.secret]) })
  }

  /** The client's settings when id and secret match, else undefined. */
  authenticate(id: string, secret: string): TokenClientSettings | undefined {
    const entry = this.clients.get(id)
    const ok = (entry?.secret ?? this.decoy).check(secret === '' ? '\u0000' : secret).ok
    return entry !== undefined && ok ? entry.settings : undefined
  }
}
