import { timingSafeEqual } from 'node:crypto'
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { RawData } from 'ws'

/** Helpers every emulator shares: JSON, raw frames, HTTP answers, credentials and redaction. */

export type Json = Record<string, unknown>

export const DIGITS_RE = /^(?:0|[1-9]\d*)$/
export const REDACTED = '[REDACTED]'

const SECRET_HEADERS = new Set([
  'authorization',
  'x-api-key',
  'signature',
  'signature-input',
  'x-twilio-signature',
  'cookie',
  'proxy-authorization'
])
const SECRET_QUERY = new Set([
  'token',
  'key',
  'api_key',
  'apikey',
  'access_token',
  'jwt',
  'x-amz-signature',
  'x-amz-security-token',
  'x-amz-credential'
])

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

export function parseJson(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch {
    return { ok: false }
  }
}

export function rawToBuffer(data: RawData): Buffer {
  if (Array.isArray(data)) return Buffer.concat(data)
  if (data instanceof ArrayBuffer) return Buffer.from(data)
  return data
}

export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

export function header(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name]
  return Array.isArray(v) ? v[0] : v
}

/** Upgrade request headers, lower-cased; credential values replaced by "[REDACTED]". */
export function redactHeaders(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined) continue
    const value = Array.isArray(v) ? v.join(', ') : v
    const secret = SECRET_HEADERS.has(k) || (k === 'sec-websocket-protocol' && /(^|,)\s*token\s*,/i.test(value))
    out[k] = secret ? REDACTED : value
  }
  return out
}

export function redactQuery(params: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [k, v] of params) out[k] = SECRET_QUERY.has(k.toLowerCase()) ? REDACTED : v
  return out
}

/** A JSON answer on the HTTP side of an emulator (reports, health, text endpoints). */
export function reply(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
  res.end(text)
}

/** Refuses a WebSocket upgrade with an HTTP answer written on the raw socket. */
export function refuse(socket: Duplex, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body)
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Connection: close',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(text)}`,
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v.replace(/[\r\n]+/g, ' ')}`)
  ]
  socket.end(`${lines.join('\r\n')}\r\n\r\n${text}`)
}
