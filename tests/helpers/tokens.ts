import { ADMIN_WRITE } from './gateway'
import { utterance } from './tls'

// The gateway's token endpoint, revocation and text hook as a platform and an operator call them, for the
// tests of bearer tokens (token-auth, auth-fleet). Each answer's body is returned, so a test can check that
// no answer echoes a credential.

/** A gateway as these calls reach it: a serve process or one in this process. */
export interface Doors {
  url(path: string): string
  adminUrl(path: string): string
}

/** POST /oauth/token with client credentials (HTTP Basic), for `scope` if given. */
export async function issueToken(
  gw: Doors,
  id: string,
  secret: string,
  scope?: string
): Promise<{ status: number; json: Record<string, unknown> }> {
  const form = new URLSearchParams({ grant_type: 'client_credentials', ...(scope ? { scope } : {}) })
  const r = await fetch(gw.url('/oauth/token'), {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded'
    },
    body: form.toString()
  })
  return { status: r.status, json: (await r.json()) as Record<string, unknown> }
}

/** POST /admin/tokens/revoke with `body` (an object, or the text as it is sent). */
export async function revoke(
  gw: Doors,
  body: Record<string, unknown> | string
): Promise<{ status: number; body: string }> {
  const r = await fetch(gw.adminUrl('/admin/tokens/revoke'), {
    method: 'POST',
    headers: ADMIN_WRITE,
    body: typeof body === 'string' ? body : JSON.stringify(body)
  })
  return { status: r.status, body: await r.text() }
}

/** One utterance to /text/<route> with `authorization`. */
export async function postUtterance(
  gw: Doors,
  route: string,
  authorization: string
): Promise<{ status: number; body: string }> {
  const r = await fetch(gw.url(`/text/${route}`), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization },
    body: JSON.stringify(utterance())
  })
  return { status: r.status, body: await r.text() }
}

/** Revoke `token` and check the answer (200, revoked: true); its body is kept in `answers`, for the check that none echoes a credential. */
export async function revokeOk(
  t: { equal: (found: unknown, wanted: unknown) => unknown; match: (found: unknown, pattern: unknown) => unknown },
  gw: Doors,
  token: string,
  answers: string[]
): Promise<void> {
  const r = await revoke(gw, { token })
  answers.push(r.body)
  t.equal(r.status, 200)
  t.match(JSON.parse(r.body), { revoked: true })
}
