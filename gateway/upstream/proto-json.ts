import type { ProtoField, ProtoSet } from './protos'

// The protobuf JSON form (https://protobuf.dev/programming-guides/json/) both ways, over the messages of a
// ProtoSet: what a mapping expression produced → the object proto-loader's serializer encodes (every key
// checked against the message: an unknown one is an error naming its path), and a decoded message → what
// the mapping's expressions read. Control path only: the audio path writes pre-framed bytes (`audioFrame`).

/** A value the message does not take: `path` is its JSON path in the produced value (`/streamingConfig/x`). */
export interface ProtoJsonError {
  readonly path: string
  /** The offending key when it is a field name the message does not have. */
  readonly field: string | null
  readonly message: string
}

export type ToMessage = { ok: true; value: Record<string, unknown> } | ({ ok: false } & ProtoJsonError)

const DURATION = 'google.protobuf.Duration'
const TIMESTAMP = 'google.protobuf.Timestamp'

const camel = (k: string): string => k.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase())

class Refusal extends Error {
  constructor(
    readonly path: string,
    readonly field: string | null,
    message: string
  ) {
    super(message)
  }
}

/** The JSON form of `type` → the object the method's serializer takes. */
export function toMessage(set: ProtoSet, type: string, value: unknown): ToMessage {
  try {
    return { ok: true, value: messageIn(set, type, value, '') as Record<string, unknown> }
  } catch (err) {
    if (!(err instanceof Refusal)) throw err
    return { ok: false, path: err.path, field: err.field, message: err.message }
  }
}

function messageIn(set: ProtoSet, type: string, value: unknown, path: string): unknown {
  if (type === DURATION && typeof value === 'string') return durationIn(value, path)
  if (type === TIMESTAMP && typeof value === 'string') return timestampIn(value, path)
  const fields = set.fields(type)
  if (fields === null) throw new Refusal(path, null, `no message type ${type} in the protos`)
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new Refusal(path, null, `must be an object (a ${type})`)
  const out: Record<string, unknown> = {}
  for (const [key, v] of Object.entries(value)) {
    const at = `${path}/${key}`
    const f = fields.get(camel(key))
    if (f === undefined) throw new Refusal(at, key, `${type} has no field "${key}"`)
    if (v === null || v === undefined) continue
    if (f.repeated && f.message !== null && set.isMapEntry(f.message)) out[f.name] = mapIn(set, f.message, v, at)
    else if (f.repeated) {
      if (!Array.isArray(v)) throw new Refusal(at, null, `${f.name} is a repeated field: must be an array`)
      out[f.name] = v.map((x, i) => fieldIn(set, f, x, `${at}/${i}`))
    } else out[f.name] = fieldIn(set, f, v, at)
  }
  return out
}

function mapIn(set: ProtoSet, entry: string, v: unknown, path: string): unknown {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Refusal(path, null, 'a map: must be an object')
  const valueField = set.fields(entry)?.get('value')
  if (valueField === undefined) return v
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fieldIn(set, valueField, x, `${path}/${k}`)]))
}

function fieldIn(set: ProtoSet, f: ProtoField, v: unknown, path: string): unknown {
  if (f.message !== null) return messageIn(set, f.message, v, path)
  if (f.enumValues !== null) {
    if (typeof v === 'number' || (typeof v === 'string' && f.enumValues.includes(v))) return v
    throw new Refusal(path, null, `${f.name} must be one of ${f.enumValues.join(', ')}`)
  }
  switch (f.type) {
    case 'TYPE_STRING':
    case 'TYPE_BYTES':
      if (typeof v !== 'string') throw new Refusal(path, null, `${f.name} must be a string`)
      return v
    case 'TYPE_BOOL':
      if (typeof v !== 'boolean') throw new Refusal(path, null, `${f.name} must be true or false`)
      return v
    default:
      // Numbers: 64-bit ones may come as strings (the JSON form writes them so).
      if (typeof v === 'number' || (typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v))) return v
      throw new Refusal(path, null, `${f.name} must be a number`)
  }
}

function durationIn(v: string, path: string): { seconds: string; nanos: number } {
  const m = /^(-?)(\d+)(?:\.(\d{1,9}))?s$/.exec(v)
  if (m === null) throw new Refusal(path, null, 'a Duration is written like "1.5s"')
  const nanos = Number((m[3] ?? '').padEnd(9, '0'))
  return { seconds: `${m[1]}${m[2]}`, nanos: m[1] === '-' ? -nanos : nanos }
}

function timestampIn(v: string, path: string): { seconds: string; nanos: number } {
  const ms = Date.parse(v)
  if (Number.isNaN(ms)) throw new Refusal(path, null, 'a Timestamp is written in RFC 3339 (2026-01-01T00:00:00Z)')
  const frac = /\.(\d{1,9})/.exec(v)?.[1] ?? ''
  return { seconds: String(Math.floor(ms / 1000)), nanos: Number(frac.padEnd(9, '0')) }
}

/** A decoded message (proto-loader's object form) → its JSON form: Durations and Timestamps as text. */
export function fromMessage(set: ProtoSet, type: string, value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value
  if (type === DURATION) return durationOut(value as { seconds?: string; nanos?: number })
  if (type === TIMESTAMP) return timestampOut(value as { seconds?: string; nanos?: number })
  const fields = set.fields(type)
  if (fields === null) return value
  const out: Record<string, unknown> = {}
  for (const [key, v] of Object.entries(value)) {
    const f = fields.get(key)
    const t = f?.message
    if (t === null || t === undefined || set.isMapEntry(t)) out[key] = v
    else out[key] = Array.isArray(v) ? v.map(x => fromMessage(set, t, x)) : fromMessage(set, t, v)
  }
  return out
}

function durationOut(d: { seconds?: string; nanos?: number }): string {
  const s = Number(d.seconds ?? 0)
  const n = Math.abs(d.nanos ?? 0)
  const sign = s < 0 || (d.nanos ?? 0) < 0 ? '-' : ''
  const frac = n === 0 ? '' : `.${String(n).padStart(9, '0').replace(/0+$/, '')}`
  return `${sign}${Math.abs(s)}${frac}s`
}

function timestampOut(t: { seconds?: string; nanos?: number }): string {
  return new Date(Number(t.seconds ?? 0) * 1000 + Math.floor((t.nanos ?? 0) / 1e6)).toISOString()
}

/**
 * The framing of a request holding only one bytes field (`field`): its tag and length, before the bytes.
 * Encoded here so the audio path never builds an object: a message of one length-delimited field is its
 * tag (field << 3 | 2) and length as varints, then the bytes (https://protobuf.dev/programming-guides/encoding/).
 */
export function audioFrame(field: number, data: Uint8Array, from: number, to: number): Buffer {
  const len = to - from
  const head = varintLength(field * 8 + 2) + varintLength(len)
  const out = Buffer.allocUnsafe(head + len)
  let at = writeVarint(out, 0, field * 8 + 2)
  at = writeVarint(out, at, len)
  out.set(data.subarray(from, to), at)
  return out
}

function varintLength(n: number): number {
  let bytes = 1
  for (let v = n; v >= 0x80; v = Math.floor(v / 128)) bytes++
  return bytes
}

function writeVarint(buf: Buffer, at: number, n: number): number {
  let v = n
  let i = at
  while (v >= 0x80) {
    buf[i++] = (v & 0x7f) | 0x80
    v = Math.floor(v / 128)
  }
  buf[i++] = v
  return i
}
