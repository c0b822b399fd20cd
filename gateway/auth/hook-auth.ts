import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { CredentialList } from './credentials'
import type { AuthReason, Principal, RouteAuthOutcome } from './route-auth'

/**
 * The `auth_failures_total{reason}` label of a refused credential: a bounded set. A value that is
 * neither a listed credential nor a token the route takes is `invalid`; token failures keep their own
 * name (expired, revoked, scope, …); `caller_mismatch` is a re-attach by another caller.
 */
export function failureLabel(reason: AuthReason | 'caller_mismatch'): string {
  return reason === 'not_accepted' ? 'invalid' : reason
}

/**
 * Key of the caller tags: process-local (the worker processes of one `serve --workers N` share their main
 * process's key, from the environment) until `useCallerKey` derives the fleet's one from the config.
 */
let tagKey: Buffer = /^[0-9a-f]{64}$/.test(process.env.ASSIST_GATEWAY_TAG_KEY ?? '')
  ? Buffer.from(process.env.ASSIST_GATEWAY_TAG_KEY!, 'hex')
  : randomBytes(32)

/**
 * Derive the caller-tag key from the config's secrets (every credential, token key and client secret),
 * so every instance of a fleet with the same config tags a static credential alike (the tag goes into
 * the shared affinity record) while nobody without the config can test a guess against a tag. Called
 * once at start-up; a reload keeps the key the process started with.
 */
export function useCallerKey(secrets: readonly string[]): void {
  if (secrets.length === 0) return
  const h = createHash('sha256').update('assist-gateway caller tag v1')
  for (const s of [...secrets].sort()) h.update(`\n${s.length}:${s}`)
  tagKey = h.digest()
}

/**
 * Who opened a leg, as re-attach binding compares it (issue 11 item 3): a token's issuer and subject
 * (its client), a keyed hash of the static credential presented (`Bearer x` and `x` alike; the
 * credential itself is never kept), or `anonymous` on a route that asks for none.
 */
export function callerTag(principal: Principal, presented: unknown): string {
  if (principal.kind === 'token') return `token:${principal.iss}\n${principal.sub}`
  if (principal.kind === 'anonymous' || typeof presented !== 'string') return 'anonymous'
  const value = presented.trim().replace(/^bearer +/i, '')
  return `static:${createHmac('sha256', tagKey).update(value, 'utf8').digest('base64url')}`
}

/**
 * A relayed join leg's platform address (audio/join-relay.ts), signed with the same fleet key: the
 * owner keys the leg's failure budget by it, not by the relaying instance's address, and a platform
 * client cannot make up one (the header without a valid signature is ignored).
 */
export function signRelayedAddress(address: string): string {
  return `${address};${createHmac('sha256', tagKey).update(`relayed-for\n${address}`, 'utf8').digest('base64url')}`
}

/** The address of a signed `signRelayedAddress` value; null when absent or not signed with this fleet's key. */
export function relayedAddress(header: string): string | null {
  const cut = header.lastIndexOf(';')
  if (cut <= 0) return null
  const address = header.slice(0, cut)
  const want = Buffer.from(signRelayedAddress(address))
  const got = Buffer.from(header)
  return want.length === got.length && timingSafeEqual(want, got) ? address : null
}

/**
 * `authenticate` (route-auth.ts) for a hook that takes no bearer tokens, settled at once: its static
 * list alone (constant time, raw or `Bearer <value>`). Keeps such a hook's handshake synchronous.
 */
export function authenticateStatic(presented: readonly unknown[], list: CredentialList): RouteAuthOutcome {
  if (!list.required) return { ok: true, principal: { kind: 'anonymous' } }
  const values = presented.filter((v): v is string => typeof v === 'string' && v !== '')
  if (values.length === 0) return { ok: false, code: 'AUTH_MISSING', reason: 'missing' }
  for (const v of values) {
    if (list.accepts(v)) return { ok: true, principal: { kind: 'static' } }
  }
  return { ok: false, code: 'AUTH_INVALID', reason: 'not_accepted' }
}
