import type { ClientRegistry } from './client-auth'
import { clientCredentials } from './client-auth'
import { parseScope } from './scope'
import type { TokenIssuer } from './token-issuer'

/** A finished answer of the token endpoint: the server writes status, headers and JSON body as they are. */
export interface OAuthAnswer {
  status: number
  headers: Record<string, string>
  json: Record<string, unknown>
}

export type OAuthError = 'invalid_request' | 'invalid_client' | 'unsupported_grant_type' | 'invalid_scope'

/** The realm named in `WWW-Authenticate` on a 401. */
export const TOKEN_REALM = 'assist-gateway'

/** A token request body larger than this is refused (a valid one is a few hundred bytes). */
const MAX_BODY_CHARS = 4096

const NO_STORE = {
  'content-type': 'application/json;charset=UTF-8',
  'cache-control': 'no-store',
  pragma: 'no-cache'
}

/**
 * `POST /oauth/token`, the RFC 6749 client-credentials grant (4.4), as a pure function of the request.
 * Header names are matched in lower case. Error descriptions are fixed texts: nothing the client sent
 * is echoed (no id, no secret). The caller applies the failure delay and counts failures by `error`.
 */
export async function tokenEndpoint(
  request: { headers: Record<string, string>; body: string },
  deps: { clients: ClientRegistry; issuer: TokenIssuer }
): Promise<OAuthAnswer> {
  const headers = lowerCase(request.headers)
  const basicUsed = headers.authorization !== undefined
  const type = (headers['content-type'] ?? '').split(';')[0].trim().toLowerCase()
  if (type !== 'application/x-www-form-urlencoded') {
    return fail('invalid_request', 'the body must be application/x-www-form-urlencoded', basicUsed)
  }
  if (request.body.length > MAX_BODY_CHARS) return fail('invalid_request', 'the body is too large', basicUsed)
  const form = new URLSearchParams(request.body)
  const seen = new Set<string>()
  for (const name of form.keys()) {
    // RFC 6749 3.2: parameters MUST NOT be included more than once.
    if (seen.has(name)) return fail('invalid_request', 'a parameter is repeated', basicUsed)
    seen.add(name)
  }
  const creds = clientCredentials(headers.authorization, form)
  if (!creds.ok) {
    switch (creds.problem) {
      case 'both_methods':
        return fail('invalid_request', 'use one client authentication method: HTTP Basic or the body, not both', true)
      case 'incomplete_body':
        return fail('invalid_client', 'client authentication failed', false)
      default:
        return fail('invalid_client', 'client authentication failed', true)
    }
  }
  const grantType = form.get('grant_type')
  if (grantType === null || grantType === '') return fail('invalid_request', 'grant_type is missing', basicUsed)
  const client = deps.clients.authenticate(creds.credentials.id, creds.credentials.secret)
  if (client === undefined) return fail('invalid_client', 'client authentication failed', basicUsed)
  if (grantType !== 'client_credentials') {
    return fail('unsupported_grant_type', 'only the client_credentials grant is supported', basicUsed)
  }
  const allowed = parseScope(client.scope) ?? []
  const asked = form.get('scope')
  const scope = asked === null ? allowed : parseScope(asked)
  if (scope === null) return fail('invalid_scope', 'scope is malformed', basicUsed)
  if (scope.length === 0 || !scope.every(s => allowed.includes(s))) {
    return fail('invalid_scope', 'the requested scope exceeds the scope granted to this client', basicUsed)
  }
  const token = await deps.issuer.issue(client.id, scope)
  return {
    status: 200,
    headers: { ...NO_STORE },
    json: { access_token: token.accessToken, token_type: 'Bearer', expires_in: token.expiresIn, scope: token.scope }
  }
}

function fail(error: OAuthError, description: string, challenge: boolean): OAuthAnswer {
  const status = error === 'invalid_client' ? 401 : 400
  const headers: Record<string, string> = { ...NO_STORE }
  // RFC 6749 5.2: a 401 for a client that used the Authorization header MUST carry WWW-Authenticate.
  if (status === 401 && challenge) headers['www-authenticate'] = `Basic realm="${TOKEN_REALM}"`
  return { status, headers, json: { error, error_description: description } }
}

function lowerCase(h: Record<string, string>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = Object.create(null)
  for (const [k, v] of Object.entries(h)) out[k.toLowerCase()] = v
  return out
}
