import { randomFillSync, randomUUID } from 'node:crypto'

/** What a caller may send as x-request-id: printable, no spaces or quotes, at most 128 characters. */
const REQUEST_ID = /^[A-Za-z0-9._:@/+=-]{1,128}$/

/** A well-formed incoming x-request-id is kept (so the caller's logs and ours share it); else a new one. */
export function requestIdFrom(header: string): string {
  return REQUEST_ID.test(header) ? header : randomUUID()
}

/** W3C trace context, level 1: version-traceid-parentid-flags, lower-case hex. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-|$)/

/** Random bytes drawn from a pool refilled 4 KiB at a time: one system call per 512 span ids, not one each. */
const pool = Buffer.alloc(4096)
let poolAt = pool.length

function randomHex(bytes: number): string {
  if (poolAt + bytes > pool.length) {
    randomFillSync(pool)
    poolAt = 0
  }
  const hex = pool.toString('hex', poolAt, poolAt + bytes)
  poolAt += bytes
  return hex
}

export interface Trace {
  /** The trace this request belongs to (the caller's, or a new one). */
  traceId: string
  /** What the vendor call carries: the same trace, this hop as its parent. */
  traceparent: string
}

/**
 * The trace for one request: the caller's `traceparent` continued with a span id of our own (its
 * sampled flag kept), or a new trace, not sampled, when none or a malformed one came (version ff,
 * all-zero ids and anything unparsable are malformed, as the W3C recommendation says).
 */
export function traceFrom(header: string): Trace {
  const m = TRACEPARENT.exec(header)
  const span = randomHex(8)
  if (
    m !== null &&
    m[1] !== 'ff' &&
    !/^0+$/.test(m[2]) &&
    !/^0+$/.test(m[3]) &&
    (m[1] !== '00' || header.length === 55)
  ) {
    return { traceId: m[2], traceparent: `00-${m[2]}-${span}-${m[4]}` }
  }
  const traceId = randomHex(16)
  return { traceId, traceparent: `00-${traceId}-${span}-00` }
}
