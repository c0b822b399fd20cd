import { hash, timingSafeEqual } from 'node:crypto'
import type { ErrorCode } from '../errors'

export type AuthResult = { ok: true } | { ok: false; code: Extract<ErrorCode, 'AUTH_MISSING' | 'AUTH_INVALID'> }

/**
 * An accepted-credential list, compared in constant time: every candidate is hashed to a fixed
 * length and compared against every accepted value, with no early exit, so neither the position of
 * a match nor the length of an accepted value leaks through timing.
 */
export class CredentialList {
  private readonly digests: Buffer[]
  constructor(accepted: readonly string[] | undefined) {
    this.digests = (accepted ?? []).map(digest)
  }

  /** True when this list demands a credential (it was configured). */
  get required(): boolean {
    return this.digests.length > 0
  }

  /**
   * One presented value, raw or as `Bearer <value>`: true when it is an accepted credential. The bearer
   * form first: it is the usual one, and then one hash settles it.
   */
  accepts(value: string): boolean {
    const bearer = value.length > 7 && value.slice(0, 7).toLowerCase() === 'bearer '
    return (bearer && this.check(value.slice(7).trim()).ok) || this.check(value).ok
  }

  check(presented: unknown): AuthResult {
    if (!this.required) return { ok: true }
    if (typeof presented !== 'string' || presented === '') return { ok: false, code: 'AUTH_MISSING' }
    const d = digest(presented)
    let match = 0
    for (const accepted of this.digests) match |= timingSafeEqual(d, accepted) ? 1 : 0
    return match === 1 ? { ok: true } : { ok: false, code: 'AUTH_INVALID' }
  }
}

/** One-shot hash (no Hash object per request, unlike createHash; Node ≥ 20.12). */
function digest(s: string): Buffer {
  return hash('sha256', s, 'buffer')
}
