import pino, { type DestinationStream, type Logger } from 'pino'
import { scrubberFor, type Scrubber } from './scrub'

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
  const scrubbing = { secrets: [...opts.secrets], scrub: scrubberFor(opts.secrets) }
  const log = pino(
    {
      level: opts.level,
      base: { service: 'assist-gateway' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      formatters: { level: label => ({ level: label }) },
      hooks: { streamWrite: line => (scrubbing.scrub.active ? scrubbing.scrub.text(line) : line) }
    },
    opts.destination ?? pino.destination({ dest: 1, sync: false })
  )
  scrubbed.set(log, scrubbing)
  return log
}

const scrubbed = new WeakMap<Logger, { secrets: string[]; scrub: Scrubber }>()

/** Scrub more credential values from every line of a logger made by createLogger (a reloaded config's). */
export function redactAlso(log: Logger, secrets: readonly string[]): void {
  const st = scrubbed.get(log)
  if (st === undefined) return
  const added = secrets.filter(x => x !== '' && !st.secrets.includes(x))
  if (added.length === 0) return
  st.secrets = [...st.secrets, ...added]
  st.scrub = scrubberFor(st.secrets)
}
