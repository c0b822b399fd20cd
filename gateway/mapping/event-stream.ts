import { crc32 } from 'node:zlib'

/**
 * AWS event-stream framing (`application/vnd.amazon.eventstream`), as the Amazon Transcribe developer
 * guide describes it ("Event stream encoding"): a 12-byte prelude (total length, headers length, both
 * 32-bit big-endian, then the CRC32 of those 8 bytes), the headers, the payload, and the CRC32 of
 * everything before it. A header is a 1-byte name length, the UTF-8 name, a 1-byte value type and the
 * value: 0 true, 1 false (no value), 2 byte, 3 short, 4 integer, 5 long (signed, big-endian), 6 bytes
 * and 7 string (16-bit length first), 8 timestamp (64-bit ms since the epoch), 9 UUID (16 bytes).
 *
 * Two layers: typed messages (`encodeMessage` / `decodeMessages`, what the tests hold against the AWS
 * SDK's own codec byte for byte), and the plain shape mapping expressions read and write
 * (`toMappingMessage`, `messageFromMapping`): `{headers: {name: value}, body}`.
 */

export type HeaderType = 'boolean' | 'byte' | 'short' | 'integer' | 'long' | 'binary' | 'string' | 'timestamp' | 'uuid'

/** A header value with its wire type (longs as bigint, timestamps as Date, bytes as Uint8Array, UUIDs as text). */
export type TypedHeader =
  | { type: 'boolean'; value: boolean }
  | { type: 'byte' | 'short' | 'integer'; value: number }
  | { type: 'long'; value: bigint }
  | { type: 'binary'; value: Uint8Array }
  | { type: 'string' | 'uuid'; value: string }
  | { type: 'timestamp'; value: Date }

export interface EventMessage {
  headers: Record<string, TypedHeader>
  body: Uint8Array
}

const PRELUDE = 12
const OVERHEAD = 16
/** Longest header value (bytes and strings carry a 16-bit length; the SDK refuses more than 32767 bytes). */
const MAX_HEADER_VALUE = 32767
/** Largest message this codec reads or writes (the service sends far smaller ones; a guard against a bad length). */
export const MAX_EVENT_MESSAGE_BYTES = 16 * 1024 * 1024
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** A frame that is not a well-formed event-stream message (the reason says which rule it broke). */
export class EventStreamError extends Error {
  override readonly name = 'EventStreamError'
}

/** The headers section of a message, as bytes (computed once per socket for the audio messages). */
export function encodeHeaders(headers: Record<string, TypedHeader>): Uint8Array {
  const parts: Buffer[] = []
  for (const [name, h] of Object.entries(headers)) {
    const n = Buffer.from(name, 'utf8')
    if (n.length === 0 || n.length > 255) throw new EventStreamError(`header name "${name}" must be 1-255 bytes`)
    parts.push(Buffer.from([n.length]), n, headerValue(name, h))
  }
  return Buffer.concat(parts)
}

function headerValue(name: string, h: TypedHeader): Buffer {
  switch (h.type) {
    case 'boolean':
      return Buffer.from([h.value ? 0 : 1])
    case 'byte':
      return fixed(2, 1, b => b.writeInt8(intIn(name, h.value, 8), 1))
    case 'short':
      return fixed(3, 2, b => b.writeInt16BE(intIn(name, h.value, 16), 1))
    case 'integer':
      return fixed(4, 4, b => b.writeInt32BE(intIn(name, h.value, 32), 1))
    case 'long':
      return fixed(5, 8, b => b.writeBigInt64BE(h.value, 1))
    case 'timestamp':
      return fixed(8, 8, b => b.writeBigInt64BE(BigInt(h.value.getTime()), 1))
    case 'uuid': {
      if (!UUID_RE.test(h.value)) throw new EventStreamError(`header ${name}: "${h.value}" is not a lower-case UUID`)
      return Buffer.concat([Buffer.from([9]), Buffer.from(h.value.replace(/-/g, ''), 'hex')])
    }
    case 'binary':
    case 'string': {
      const v = h.type === 'string' ? Buffer.from(h.value, 'utf8') : Buffer.from(h.value)
      if (v.length > MAX_HEADER_VALUE)
        throw new EventStreamError(`header ${name}: value longer than ${MAX_HEADER_VALUE} bytes`)
      const b = Buffer.alloc(3 + v.length)
      b[0] = h.type === 'string' ? 7 : 6
      b.writeUInt16BE(v.length, 1)
      v.copy(b, 3)
      return b
    }
  }
}

function fixed(type: number, size: number, write: (b: Buffer) => void): Buffer {
  const b = Buffer.alloc(1 + size)
  b[0] = type
  write(b)
  return b
}

function intIn(name: string, v: number, bits: number): number {
  const max = 2 ** (bits - 1)
  if (!Number.isInteger(v) || v < -max || v >= max)
    throw new EventStreamError(`header ${name}: ${v} is not a ${bits}-bit integer`)
  return v
}

/**
 * One message from its headers section (`encodeHeaders`) and payload: one allocation, the framing.
 * The audio path calls this once per vendor chunk with headers encoded once per socket.
 */
export function frameMessage(headers: Uint8Array, body: Uint8Array): Buffer {
  const total = OVERHEAD + headers.length + body.length
  if (total > MAX_EVENT_MESSAGE_BYTES) throw new EventStreamError(`message of ${total} bytes is too large`)
  const out = Buffer.allocUnsafe(total)
  out.writeUInt32BE(total, 0)
  out.writeUInt32BE(headers.length, 4)
  out.writeUInt32BE(crc32(out.subarray(0, 8)), 8)
  out.set(headers, PRELUDE)
  out.set(body, PRELUDE + headers.length)
  out.writeUInt32BE(crc32(out.subarray(0, total - 4)), total - 4)
  return out
}

export function encodeMessage(m: EventMessage): Buffer {
  return frameMessage(encodeHeaders(m.headers), m.body)
}

/**
 * Every message in `data` (a WebSocket frame may hold one or several, back to back). Throws
 * EventStreamError on a length, CRC or header that breaks the format.
 */
export function decodeMessages(data: Uint8Array): EventMessage[] {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  const out: EventMessage[] = []
  let at = 0
  while (at < buf.length) {
    if (buf.length - at < OVERHEAD) throw new EventStreamError('frame shorter than the 16-byte message overhead')
    const total = buf.readUInt32BE(at)
    const headersLength = buf.readUInt32BE(at + 4)
    if (crc32(buf.subarray(at, at + 8)) !== buf.readUInt32BE(at + 8))
      throw new EventStreamError('prelude CRC does not match')
    if (total < OVERHEAD || total > buf.length - at || total > MAX_EVENT_MESSAGE_BYTES)
      throw new EventStreamError(`message length ${total} does not fit the frame (${buf.length - at} bytes left)`)
    if (headersLength > total - OVERHEAD)
      throw new EventStreamError(`headers length ${headersLength} exceeds the message`)
    if (crc32(buf.subarray(at, at + total - 4)) !== buf.readUInt32BE(at + total - 4))
      throw new EventStreamError('message CRC does not match')
    const headers = decodeHeaders(buf.subarray(at + PRELUDE, at + PRELUDE + headersLength))
    out.push({ headers, body: buf.subarray(at + PRELUDE + headersLength, at + total - 4) })
    at += total
  }
  return out
}

/** The fixed-size integer header types: name, size and reader, by wire type. */
const INTS: Record<number, ['byte' | 'short' | 'integer', number, (b: Buffer, at: number) => number]> = {
  2: ['byte', 1, (b, at) => b.readInt8(at)],
  3: ['short', 2, (b, at) => b.readInt16BE(at)],
  4: ['integer', 4, (b, at) => b.readInt32BE(at)]
}

function decodeHeaders(b: Buffer): Record<string, TypedHeader> {
  const out: Record<string, TypedHeader> = {}
  let i = 0
  const need = (n: number): void => {
    if (i + n > b.length) throw new EventStreamError('a header runs past the headers section')
  }
  // The next n bytes: where they start (they must be there).
  const take = (n: number): number => {
    need(n)
    i += n
    return i - n
  }
  while (i < b.length) {
    need(1)
    const nameLength = b[i++]
    need(nameLength + 1)
    const name = b.toString('utf8', i, i + nameLength)
    i += nameLength
    const type = b[i++]
    if (Object.hasOwn(out, name)) throw new EventStreamError(`header ${name} appears twice`)
    let h: TypedHeader
    switch (type) {
      case 0:
      case 1:
        h = { type: 'boolean', value: type === 0 }
        break
      case 2:
      case 3:
      case 4: {
        const [kind, size, read] = INTS[type]
        h = { type: kind, value: read(b, take(size)) }
        break
      }
      case 5:
      case 8: {
        const v = b.readBigInt64BE(take(8))
        h = type === 5 ? { type: 'long', value: v } : { type: 'timestamp', value: new Date(Number(v)) }
        break
      }
      case 6:
      case 7: {
        const n = b.readUInt16BE(take(2))
        const at = take(n)
        h =
          type === 7
            ? { type: 'string', value: b.toString('utf8', at, at + n) }
            : { type: 'binary', value: new Uint8Array(b.subarray(at, at + n)) }
        break
      }
      case 9: {
        const at = take(16)
        const x = b.toString('hex', at, at + 16)
        h = {
          type: 'uuid',
          value: `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`
        }
        break
      }
      default:
        throw new EventStreamError(`header ${name} has unknown value type ${type}`)
    }
    out[name] = h
  }
  return out
}

// ---- the shape mapping expressions see --------------------------------------------------------------

/**
 * A decoded message as `msg`: `{headers: {name: value}, body}`. Strings, booleans and numbers stay as
 * they are (a long past 2^53 as its decimal text), timestamps as ISO-8601 text, bytes as base64; the
 * body is its JSON when it parses, else its UTF-8 text (null when empty).
 */
export function toMappingMessage(m: EventMessage): { headers: Record<string, unknown>; body: unknown } {
  const headers: Record<string, unknown> = {}
  for (const [name, h] of Object.entries(m.headers)) headers[name] = plainValue(h)
  let body: unknown = null
  if (m.body.length > 0) {
    const text = Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength).toString('utf8')
    try {
      body = JSON.parse(text)
    } catch {
      body = text
    }
  }
  return { headers, body }
}

function plainValue(h: TypedHeader): unknown {
  switch (h.type) {
    case 'long':
      return h.value >= BigInt(Number.MIN_SAFE_INTEGER) && h.value <= BigInt(Number.MAX_SAFE_INTEGER)
        ? Number(h.value)
        : h.value.toString()
    case 'timestamp':
      return h.value.toISOString()
    case 'binary':
      return Buffer.from(h.value).toString('base64')
    default:
      return h.value
  }
}

/**
 * A message from what a mapping expression produced: `{headers, body}` or `{headers, bodyBase64}`.
 * Header values: a string is a string header, a boolean a boolean, an integer an `integer` (a `long`
 * past 32 bits); `{type, value}` names the type (long as a number or decimal text, timestamp as ISO text
 * or ms, binary as base64). Body: a string goes as UTF-8, an object or array as JSON, null/absent empty.
 * Throws EventStreamError (with the reason) on anything else.
 */
export function messageFromMapping(value: unknown): EventMessage {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new EventStreamError('an event-stream frame must be an object {headers, body}')
  const v = value as Record<string, unknown>
  const rawHeaders = v.headers ?? {}
  if (rawHeaders === null || typeof rawHeaders !== 'object' || Array.isArray(rawHeaders))
    throw new EventStreamError('headers must be an object')
  const headers: Record<string, TypedHeader> = {}
  for (const [name, h] of Object.entries(rawHeaders as Record<string, unknown>)) {
    if (h === undefined || h === null) continue
    headers[name] = typedValue(name, h)
  }
  let body: Uint8Array
  if (v.bodyBase64 !== undefined && v.bodyBase64 !== null) {
    if (typeof v.bodyBase64 !== 'string') throw new EventStreamError('bodyBase64 must be a string')
    body = Buffer.from(v.bodyBase64, 'base64')
  } else if (v.body === undefined || v.body === null) body = new Uint8Array(0)
  else body = Buffer.from(typeof v.body === 'string' ? v.body : JSON.stringify(v.body), 'utf8')
  return { headers, body }
}

function typedValue(name: string, h: unknown): TypedHeader {
  if (typeof h === 'string') return { type: 'string', value: h }
  if (typeof h === 'boolean') return { type: 'boolean', value: h }
  if (typeof h === 'number') {
    if (!Number.isSafeInteger(h)) throw new EventStreamError(`header ${name}: ${h} is not an integer`)
    return h >= -(2 ** 31) && h < 2 ** 31 ? { type: 'integer', value: h } : { type: 'long', value: BigInt(h) }
  }
  if (h === null || typeof h !== 'object' || Array.isArray(h))
    throw new EventStreamError(`header ${name}: a value must be a string, a boolean, an integer or {type, value}`)
  const { type, value } = h as { type?: unknown; value?: unknown }
  switch (type) {
    case 'string':
    case 'uuid':
      if (typeof value !== 'string') break
      return { type, value }
    case 'boolean':
      if (typeof value !== 'boolean') break
      return { type, value }
    case 'byte':
    case 'short':
    case 'integer':
      if (typeof value !== 'number') break
      return { type, value }
    case 'long':
      if (typeof value !== 'number' && typeof value !== 'string') break
      try {
        return { type, value: BigInt(value) }
      } catch {
        break
      }
    case 'timestamp': {
      const d = new Date(typeof value === 'number' || typeof value === 'string' ? value : Number.NaN)
      if (Number.isNaN(d.getTime())) break
      return { type, value: d }
    }
    case 'binary':
      if (typeof value !== 'string') break
      return { type, value: Buffer.from(value, 'base64') }
    default:
      // Any other type (it is the caller's data, not a union): refused below.
      break
  }
  throw new EventStreamError(
    `header ${name}: {type: ${JSON.stringify(type)}} with that value is not an event-stream header`
  )
}

/**
 * A frame a mapping expression produced, for a socket that speaks event-stream: an object is one
 * event-stream message (its placeholders filled through `fill`, on its JSON text), a string a text frame,
 * null nothing. Control path only. Throws EventStreamError when the object is not a message.
 */
export function eventStreamFrame(value: unknown, fill: (json: string) => string): Uint8Array | string | null {
  if (value === undefined || value === null) return null
  if (typeof value === 'string') return fill(value)
  const json = JSON.stringify(value)
  const filled = json.includes('{{') ? (JSON.parse(fill(json)) as unknown) : value
  return encodeMessage(messageFromMapping(filled))
}
