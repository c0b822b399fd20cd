import { authenticateStatic, callerTag, failureLabel } from '../../auth/hook-auth'
import { authenticate, type RouteAuthOutcome } from '../../auth/route-auth'
import { CODES, GatewayError } from '../../errors'
import type { Problem } from '../../validate/compile'
import { checkInit, parseJson, type LegIdentity } from '../../validate/messages'
import { hookAuth, type RouteRuntime } from '../../route'

export type HandshakeCheck =
  /**
   * `caller`: who opened the leg (auth/hook-auth.ts `callerTag`), compared on re-attach. `jti`: the id of
   * the bearer token it was opened with, if any (revoking that token ends the leg).
   */
  /** `tenant`: whose call it is (auth/route-auth.ts `Principal`): its namespace and quotas. */
  | { ok: true; init: Record<string, unknown>; identity: LegIdentity; caller: string; tenant: string; jti?: string }
  /** `reason`: the `auth_failures_total` label when `stage` is `auth`. */
  | { ok: false; error: GatewayError; problems: Problem[]; stage: 'json' | 'auth' | 'schema'; reason?: string }

/**
 * The checks of an init message, in order: JSON, credentials, schema. Credentials come before the
 * schema so an unauthenticated caller learns nothing about the message format. Shared by the audio
 * hook and the handshake dry-run endpoint, so both always answer alike. Synchronous unless the route
 * takes bearer tokens: then a Promise (a token is verified: signature, JWKS keys).
 */
export function checkHandshake(
  route: RouteRuntime,
  text: string,
  /** The fleet's caller-tag key (auth/fleet-key.ts). */
  callerKey: Buffer
): HandshakeCheck | Promise<HandshakeCheck> {
  const parsed = parseJson(text)
  if (!parsed.ok) return { ok: false, error: parsed.error, problems: [], stage: 'json' }
  const value = parsed.value
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {
      ok: false,
      error: new GatewayError('MESSAGE_INVALID', { pointers: ['/'] }),
      problems: [{ pointer: '/', message: 'must be object' }],
      stage: 'schema'
    }
  }
  const presented = (value as Record<string, unknown>).authenticationToken
  const hook = hookAuth(route, 'audio')
  if (!hook.tokens)
    return afterAuth(value, presented, authenticateStatic([presented], hook.list, route.anonymous), callerKey)
  return authenticate([presented], hook, route.verifier).then(auth => afterAuth(value, presented, auth, callerKey))
}

function afterAuth(value: object, presented: unknown, auth: RouteAuthOutcome, callerKey: Buffer): HandshakeCheck {
  if (!auth.ok) {
    const reason = failureLabel(auth.reason)
    return { ok: false, error: new GatewayError(auth.code), problems: [], stage: 'auth', reason }
  }
  const checked = checkInit(value)
  if (!checked.ok) return { ...checked, stage: 'schema' }
  const jti = auth.principal.kind === 'token' ? auth.principal.jti : undefined
  const caller = callerTag(auth.principal, presented, callerKey)
  return { ...checked, caller, tenant: auth.principal.tenant, ...(jti !== undefined ? { jti } : {}) }
}

/** The ERROR frame for a failure: code as messageType, human text, pointers (never values) in parameters. */
export function errorFrame(
  error: GatewayError,
  problems: readonly Problem[] = [],
  extra: Record<string, unknown> = {}
): string {
  const parameters: Record<string, unknown> = { code: error.code, flag: CODES[error.code].flag, ...extra }
  if (error.pointers.length > 0) parameters.pointers = error.pointers
  if (problems.length > 0) parameters.problems = problems
  return JSON.stringify({ command: 'ERROR', messageType: error.code, message: error.message, parameters })
}

export function connectedFrame(parameters: Record<string, unknown>): string {
  return JSON.stringify({ command: 'CONNECTED', messageType: 'COMMAND', message: 'BEGIN AUDIO STREAM', parameters })
}
