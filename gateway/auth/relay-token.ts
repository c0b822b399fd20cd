import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'
import type { FleetKey } from './fleet-key'

/**
 * What a relaying process asserts about a leg it carries to the process that holds the leg's session
 * (audio/placement/relay-link.ts), signed with the fleet's relay key (auth/fleet-key.ts) together with an expiry
 * of seconds and a nonce. The receiving fleet listener (server/fleet-listener.ts) takes a token once,
 * only when it is meant for that process, and the leg's init message must then name the same session.
 * So a captured token is worth nothing: replayed, it is refused; on another process, it is refused;
 * with another leg's init message, it is refused. "Once" holds for the instance, whichever of its workers a
 * token reaches (they share the fleet port): the nonces taken are kept in one record per instance
 * (`UsedNonces`), the process's own, or its main process's for a worker of `serve --workers N`.
 */
export interface RelayClaims {
  /** `worker`: to a worker of the same gateway (loopback); `instance`: to another instance of the fleet. */
  readonly hop: 'instance' | 'worker'
  /** The process it is meant for: the instance's id (`instance`), or the worker's own id (`worker`). */
  readonly to: string
  /** The session the leg belongs to (audio/placement/placement.ts `sessionKeyOf`). */
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

export type RelayVerdict = { ok: true; claims: RelayClaims } | { ok: false; reason: RelayRefusal }

/** What taking a nonce came to: the first time, seen before, or the record is full. */
export type NonceTaken = 'taken' | 'replayed' | 'busy'

/** Where the nonces of the tokens an instance took are kept until the tokens expire. */
export interface UsedNonces {
  /** Take `nonce`, kept until `untilMs` (epoch ms): 'taken' the first time, then 'replayed'. */
  take: (nonce: string, untilMs: number) => NonceTaken | Promise<NonceTaken>
}

/**
 * The nonces taken, in this process (a lone gateway's, or the main process's for its workers): each kept
 * until its token's expiry plus the skew; past `max` (after expired ones are swept) tokens are refused
 * ('busy'), not remembered less.
 */
export class NonceRecord implements UsedNonces {
  /** Nonce → epoch ms until which it is kept. */
  private readonly seen = new Map<string, number>()

  constructor(
    private readonly nowMs: () => number = Date.now,
    private readonly max = MAX_NONCES
  ) {}

  take(nonce: string, untilMs: number): NonceTaken {
    if (this.seen.has(nonce)) return 'replayed'
    if (this.seen.size >= this.max) {
      const now = this.nowMs()
      for (const [n, until] of this.seen) if (until <= now) this.seen.delete(n)
      if (this.seen.size >= this.max) return 'busy'
    }
    this.seen.set(nonce, untilMs)
    return 'taken'
  }

  /** Nonces kept now (tests). */
  get size(): number {
    return this.seen.size
  }
}

interface Payload extends RelayClaims {
  /** Expiry, epoch ms. */
  readonly e: number
  /** 16 random bytes, base64url. */
  readonly n: string
}

export class RelayTokens {
  constructor(
    private readonly key: FleetKey,
    private readonly nowMs: () => number = Date.now,
    /** The instance's record of the nonces taken (a worker's asks its main process). */
    private readonly used: UsedNonces = new NonceRecord(nowMs)
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
   * too far ahead), not meant for this process (`isMe(claims)`), or taken before by its instance. A
   * promise when the instance's record is in another process (a worker's is its main process's).
   */
  verify(header: string, isMe: (claims: RelayClaims) => boolean): RelayVerdict | Promise<RelayVerdict> {
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
    const taken = this.used.take(p.n, p.e + RELAY_CLOCK_SKEW_MS)
    return taken instanceof Promise ? taken.then(t => verdictOf(t, claims)) : verdictOf(taken, claims)
  }

  private mac(body: string): Buffer {
    return createHmac('sha256', this.key.relayKey).update(body, 'utf8').digest()
  }
}

function verdictOf(taken: NonceTaken, claims: RelayClaims): RelayVerdict {
  return taken === 'taken' ? { ok: true, claims } : { ok: false, reason: taken }
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
