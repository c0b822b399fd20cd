import pino, { type DestinationStream, type Logger } from 'pino'
import { scrubberFor } from './scrub'

export type { Logger }

/** Field names that hold credentials wherever they appear (one level of nesting is covered by `*.`). */
const REDACT_KEYS = [
  'authenticationToken',
  'authorizationHeader',
  'authorization',
  'Authorization',
  'credential',
  'password',
  'token'
]
const REDACT_PATHS = [
  ...REDACT_KEYS,
  ...REDACT_KEYS.map(k => `*.${k}`),
  'headers.authorization',
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'headers["x-api-key"]'
]

export interface LogOptions {
  level: string
  /** Literal credential values (config.secrets): replaced by [REDACTED] in every line, whatever field holds them. */
  secrets: readonly string[]
  /** Where lines go; default stdout. Tests pass a stream to assert on parsed lines. */
  destination?: DestinationStream
}

/**
 * pino JSON logger. Two layers keep credentials out: path redaction for the known field names, and a
 * last-line scrub of every configured secret value (telemetry/scrub.ts: as written, JSON-escaped and
 * URL-encoded; the same matcher scrubs answers to the platform), so a token that lands in an unexpected
 * field or message text is still never written.
 */
export function createLogger(opts: LogOptions): Logger {
  const scrub = scrubberFor(opts.secrets)
  return pino(
    {
      level: opts.level,
      base: { service: 'assist-gateway' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      formatters: { level: label => ({ level: label }) },
      hooks: scrub.active ? { streamWrite: scrub.text } : {}
    },
    opts.destination ?? pino.destination({ dest: 1, sync: false })
  )
}
