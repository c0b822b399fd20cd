import { type AdminGate, guarded } from './admin'
import type { HttpResponse, TemplatedApp } from 'uWebSockets.js'
import { createTokenAuth, type TokenAuth } from '../auth/token-auth'
import { StoreRevocations } from '../auth/revocation'
import type { Config } from '../config/types'
import type { Store } from '../store/port'
import { headerBytesOver } from './header-limit'
import { problemBody, readBody, send, sendProblem } from './http'
import { checkUnderBudget } from '../auth/admission'
import { afterFailureDelay } from '../auth/failure-budget'
import { systemClock } from '../clock'
import { GatewayError } from '../errors'
import { endLegsOf } from './revoked-legs'
import type { ServerState } from './state'

/** A token request is a few hundred bytes; the library refuses more than 4096 characters anyway. */
const TOKEN_BODY_LIMIT = 4096
const REVOKE_BODY_LIMIT = 16384

/**
 * Token auth of a config snapshot, or undefined when the config has no `tokens` section. `nowMs`
 * (epoch milliseconds) is the clock of issuing, expiry and revocation; tests pass their own.
 */
export async function startTokenAuth(
  config: Config,
  nowMs?: () => number,
  store?: Pick<Store, 'revokeToken' | 'isTokenRevoked'>
): Promise<TokenAuth | undefined> {
  if (config.tokens === undefined) return undefined
  const routes = Object.fromEntries(Object.values(config.routes).map(r => [r.name, r.auth.tokens]))
  // The revocation list lives in the store: memory, or Redis shared by every instance of the fleet.
  const revocations = store === undefined ? undefined : new StoreRevocations(store, nowMs)
  return await createTokenAuth(config.tokens, routes, { nowMs, revocations })
}

/**
 * Reads a bounded body, then answers from `answer`. MUST: onAborted first; copy out of req before this
 * is called. Past the limit: 413 with `connection: close` and nothing more is buffered.
 */
function withBody(
  res: HttpResponse,
  state: ServerState,
  limit: number,
  event: string,
  answer: (body: string) => Promise<{ status: number; headers?: Record<string, string>; json: unknown }>
): void {
  let aborted = false
  res.onAborted(() => {
    aborted = true
  })
  readBody(res, limit, body => {
    if (aborted) return
    if (body === null) return sendProblem(res, 'MESSAGE_TOO_LARGE', [], { connection: 'close' })
    answer(body.toString('utf8')).then(
      a => {
        if (aborted) return
        const { 'content-type': type = 'application/json', ...headers } = a.headers ?? {}
        send(res, a.status, type, JSON.stringify(a.json), headers)
      },
      (err: unknown) => {
        state.log.error({ event, err }, 'unexpected error in a token endpoint')
        if (!aborted) sendProblem(res, 'INTERNAL')
      }
    )
  })
}

/**
 * `POST /oauth/token` on the public listener (RFC 6749 client-credentials grant), only when
 * `tokens.clients` is not empty. Answers exactly as the library says (`auth.token`); failures are
 * counted as `auth_failures_total{hook="token",reason=<OAuth error>}` and logged without the client id
 * or any credential.
 */
export function mountTokenEndpoint(app: TemplatedApp, state: ServerState, auth: TokenAuth | undefined): void {
  if (auth === undefined || (state.config.tokens?.clients?.length ?? 0) === 0) return
  app.post('/oauth/token', (res, req) => {
    // MUST copy out of req now (uWS): it is gone after this handler returns.
    const headers: Record<string, string> = { 'content-type': req.getHeader('content-type') }
    const authorization = req.getHeader('authorization')
    if (authorization !== '') headers.authorization = authorization
    if (headerBytesOver(req, state, 'token')) {
      return sendProblem(res, 'HEADERS_TOO_LARGE', [], { connection: 'close' })
    }
    if (Number(req.getHeader('content-length') || '0') > TOKEN_BODY_LIMIT) {
      return sendProblem(res, 'MESSAGE_TOO_LARGE', [], { connection: 'close' })
    }
    const address = Buffer.from(res.getRemoteAddressAsText()).toString('utf8')
    withBody(res, state, TOKEN_BODY_LIMIT, 'token_endpoint_bug', async body => {
      // A wrong client secret is a failed authentication: budgeted and delayed like the hooks'.
      const checked = await checkUnderBudget(
        state.admission,
        address,
        async () => await auth.token({ headers, body }),
        a => a.json.error === 'invalid_client'
      )
      if (!checked.ok) {
        state.metrics.limitRefusals.inc({ limit: 'failure_budget', hook: 'token' })
        return {
          status: 429,
          headers: { 'content-type': 'application/problem+json', 'retry-after': String(checked.retryAfterSeconds) },
          json: JSON.parse(problemBody(new GatewayError('TOO_MANY_FAILURES')))
        }
      }
      const a = checked.result
      const error = typeof a.json.error === 'string' ? a.json.error : undefined
      if (error !== undefined) state.metrics.authFailures.inc({ hook: 'token', reason: error })
      if (error === 'invalid_client')
        await new Promise<void>(resolve => afterFailureDelay(state.config.auth, systemClock, resolve))
      // A refusal anyone can cause: under the flood cap, by its OAuth error (telemetry/log-limit.ts).
      if (error === undefined || state.logLimit.allow(`oauth_${error}`))
        state.log.info({ event: 'token_request', status: a.status, error }, error ? 'token refused' : 'token issued')
      return a
    })
  })
  app.any('/oauth/token', res => sendProblem(res, 'METHOD_NOT_ALLOWED', [], { allow: 'POST' }))
}

/**
 * `POST /admin/tokens/revoke` on the admin listener: `{"token": …}` or `{"jti": …, "exp"?: …}`; effective
 * on the next request, and the live legs opened with that token end (ERROR TOKEN_REVOKED) unless the body
 * says `"endLegs": false` (server/revoked-legs.ts). Logged with the jti (an id, not a credential), never
 * the token.
 */
export function mountTokenAdmin(
  admin: TemplatedApp,
  state: ServerState,
  auth: TokenAuth | undefined,
  token: AdminGate
): void {
  if (auth === undefined) return
  admin.post(
    '/admin/tokens/revoke',
    guarded(token, res => {
      withBody(res, state, REVOKE_BODY_LIMIT, 'token_revoke_bug', async body => {
        const a = await auth.revoke(body)
        const { jti, revoked, error } = a.json
        const ended = a.status === 200 && typeof jti === 'string' && endLegs(body) ? endLegsOf(state, jti) : 0
        state.log.info(
          { event: 'token_revoke', status: a.status, jti, revoked, error, ended },
          'token revocation asked'
        )
        return a.status === 200 ? { ...a, json: { ...a.json, legsEnded: ended } } : a
      })
    })
  )
  admin.any('/admin/tokens/revoke', res => sendProblem(res, 'METHOD_NOT_ALLOWED', [], { allow: 'POST' }))
}

/** The revoke body's `endLegs` (default true); the body itself was checked by the revocation. */
function endLegs(body: string): boolean {
  try {
    return (JSON.parse(body) as { endLegs?: unknown }).endLegs !== false
  } catch {
    return true
  }
}
