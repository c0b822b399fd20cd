import type { Test } from 'tap'
import { FakeClock } from '../../helpers/fake-clock'
import { ClientRegistry } from '../../../gateway/auth/client-auth'
import { loadKeyRing, type KeyRing } from '../../../gateway/auth/key-ring'
import { MemoryRevocationStore } from '../../../gateway/auth/revocation'
import type { RouteTokenSettings, TokenSettings } from '../../../gateway/auth/token-config'
import { TokenIssuer } from '../../../gateway/auth/token-issuer'
import { TokenVerifier, type ExternalIssuer } from '../../../gateway/auth/token-verify'
import { tokenEndpoint, type OAuthAnswer } from '../../../gateway/auth/token-endpoint'

export const KEY1 = 'key-one-secret-0123456789abcdefghijklmnop'
export const KEY2 = 'key-two-secret-0123456789abcdefghijklmnop'
export const CLIENT_A = 'client-a-secret-Zq7!x%+&=:9'
export const CLIENT_B = 'client-b-secret-Wr2$y'
export const START_MS = Date.UTC(2026, 0, 1)

export function tokenSettings(over: Partial<TokenSettings> = {}): TokenSettings {
  return {
    issuer: 'assist-gateway',
    ttlSeconds: 300,
    clockSkewSeconds: 30,
    keys: [{ kid: 'k1', secret: KEY1 }],
    clients: [
      { id: 'platform-a', secret: CLIENT_A, scope: 'demo:audio demo:text' },
      { id: 'platform-b', secret: CLIENT_B, scope: 'other:text' }
    ],
    ...over
  }
}

export const ROUTES: Record<string, RouteTokenSettings> = { demo: true, other: true, closed: false }

export interface World {
  clock: FakeClock
  tokens: TokenSettings
  ring: KeyRing
  issuer: TokenIssuer
  clients: ClientRegistry
  revocations: MemoryRevocationStore
  verifier: TokenVerifier
  /** Every answer produced through `post`, for the leak scan. */
  answers: OAuthAnswer[]
  post(headers: Record<string, string>, body: string): Promise<OAuthAnswer>
  /** A token for `platform-a` (full scope unless `scope` is given). */
  token(scope?: string): Promise<string>
}

export async function world(
  opts: {
    tokens?: TokenSettings
    clock?: FakeClock
    jwks?: ExternalIssuer[]
    routes?: Record<string, RouteTokenSettings>
  } = {}
): Promise<World> {
  const clock = opts.clock ?? new FakeClock(START_MS)
  const tokens = opts.tokens ?? tokenSettings()
  const ring = await loadKeyRing(tokens.keys ?? [])
  const issuer = new TokenIssuer(tokens, ring, clock.now)
  const clients = new ClientRegistry(tokens.clients ?? [])
  const revocations = new MemoryRevocationStore(clock.now)
  const verifier = new TokenVerifier(tokens, {
    ring,
    jwks: opts.jwks,
    routes: opts.routes ?? ROUTES,
    revocations,
    nowMs: clock.now
  })
  const answers: OAuthAnswer[] = []
  const post = async (headers: Record<string, string>, body: string) => {
    const a = await tokenEndpoint(
      { headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body },
      { clients, issuer }
    )
    answers.push(a)
    return a
  }
  const token = async (scope?: string) => {
    const body = `grant_type=client_credentials${scope === undefined ? '' : `&scope=${encodeURIComponent(scope)}`}`
    const a = await post({ authorization: basic('platform-a', CLIENT_A) }, body)
    if (a.status !== 200) throw new Error(`token request failed: ${a.status}`)
    return a.json.access_token as string
  }
  return { clock, tokens, ring, issuer, clients, revocations, verifier, answers, post, token }
}

/** `Authorization: Basic` per RFC 6749 2.3.1: id and secret form-urlencoded, then base64. */
export function basic(id: string, secret: string): string {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+')
  return `Basic ${Buffer.from(`${enc(id)}:${enc(secret)}`).toString('base64')}`
}

/** Asserts that none of `texts` contains any of `secrets` (nor their base64 forms). */
export function assertNoSecrets(t: Test, texts: readonly string[], secrets: readonly string[]): void {
  let found = 0
  for (const text of texts) {
    for (const s of secrets) {
      for (const form of [s, Buffer.from(s).toString('base64'), encodeURIComponent(s)]) if (text.includes(form)) found++
    }
  }
  t.equal(found, 0, `no secret or token appears in ${texts.length} answers and error messages`)
}
