import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { FleetKey } from './fleet-key'

/**
 * What a relaying process asserts about a leg it carries to the process that holds the leg's session
 * (audio/relay-link.ts), signed with the fleet's relay key (auth/fleet-key.ts) together with an expiry
 * of seconds and a nonce. The receiving fleet listener (server/fleet-listener.ts) takes a token once,
 * only when it is meant for that process, and the leg's init message must then name the same session.
 * So a captured token is worth nothing: replayed, it is refused; on another process, it is refused;
 * with another leg's init message, it is refused.
 */
export interface RelayClaims {
  /** `worker`: to a worker of the same gateway (loopback); `instance`: to another instance of the fleet. */
  readonly hop: 'instance' | 'worker'
  /** The process it is meant for: the instance's id (`instance`), or the worker's own id (`worker`). */
  readonly to: string
  /** The session the leg belongs to (audio/placement.ts `sessionKeyOf`). */
  readonly key: string
  /** The platform's address as the first gateway process saw it: the failure budget's key on the owner. */
  readonly address: string
  /** The relaying process (logged by the owner). */
  readonly from: string
}

/** The request header that carries a relay token (read on the fleet listener only; the public one ignores it). */
export const RELAY_TOKEN_HEADER = 'x-assist-gateway-relay'

/** How long a token is good for, and how far the clocks of two hosts may disagree. */
export const RELAY_TOKEN_TTL_MS = 30_000
export const RELAY_CLOCK_SKEW_MS = 30_000

/** Most nonces kept at once; past it (after expired ones are swept) tokens are refused, not remembered less. */
const MAX_NONCES = 200_000

export type RelayRefusal = 'missing' | 'malformed' | 'signature' | 'expired' | 'not_for_me' | 'replayed' | 'busy'

interface Payload extends RelayClaims {
  /** Expiry, epoch ms. */
  readonly e: number
  /** 16 random bytes, base64url. */
  readonly n: string
}

export class RelayTokens {
  /** Nonce → epoch ms until which it is kept (its token's expiry plus the skew). */
  private readonly seen = new Map<string, number>()

  constructor(
    private readonly key: FleetKey,
    private readonly nowMs: () => number = Date.now
  ) {}

  sign(claims: RelayClaims): string {
    const payload: Payload = {
      ...claims,
      e: this.nowMs() + RELAY_TOKEN_TTL_MS,
      n: randomBytes(16).toString('base64url')
    }
    const body = Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url')
    return `v1.${body}.${this.mac(body).toString('base64url')}`
  }

  /**
   * A token's claims, once: refused when absent, not signed with this fleet's key, expired (or dated
   * too far ahead), not meant for this process (`isMe(claims)`), or seen before.
   */
  verify(
    header: string,
    isMe: (claims: RelayClaims) => boolean
  ): { ok: true; claims: RelayClaims } | { ok: false; reason: RelayRefusal } {
    if (header === '') return { ok: false, reason: 'missing' }
    const parts = header.split('.')
    if (parts.length !== 3 || parts[0] !== 'v1') return { ok: false, reason: 'malformed' }
    const got = Buffer.from(parts[2], 'base64url')
    const want = this.mac(parts[1])
    if (got.length !== want.length || !timingSafeEqual(got, want)) return { ok: false, reason: 'signature' }
    let p: Payload
    try {
      p = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as Payload
    } catch {
      return { ok: false, reason: 'malformed' }
    }
    if (!wellFormed(p)) return { ok: false, reason: 'malformed' }
    const now = this.nowMs()
    if (p.e + RELAY_CLOCK_SKEW_MS <= now || p.e > now + RELAY_TOKEN_TTL_MS + RELAY_CLOCK_SKEW_MS)
      return { ok: false, reason: 'expired' }
    const claims: RelayClaims = { hop: p.hop, to: p.to, key: p.key, address: p.address, from: p.from }
    if (!isMe(claims)) return { ok: false, reason: 'not_for_me' }
    if (this.seen.has(p.n)) return { ok: false, reason: 'replayed' }
    if (this.seen.size >= MAX_NONCES) {
      for (const [n, until] of this.seen) if (until <= now) this.seen.delete(n)
      if (this.seen.size >= MAX_NONCES) return { ok: false, reason: 'busy' }
    }
    this.seen.set(p.n, p.e + RELAY_CLOCK_SKEW_MS)
    return { ok: true, claims }
  }

  /** Nonces kept now (tests). */
  get remembered(): number {
    return this.seen.size
  }

  private mac(body: string): Buffer {
    return createHmac('sha256', this.key.relayKey).update(body, 'utf8').digest()
  }
}

function wellFormed(p: unknown): p is Payload {
  if (p === null || typeof p !== 'object') return false
  const o = p as Record<string, unknown>
  return (
    (o.hop === 'instance' || o.hop === 'worker') &&
    typeof o.to === 'string' &&
    typeof o.key === 'string' &&
    typeof o.address === 'string' &&
    typeof o.from === 'string' &&
    typeof o.e === 'number' &&
    typeof o.n === 'string' &&
    o.n.length >= 16
  )
}
