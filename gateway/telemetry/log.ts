import pino, { type DestinationStream, type Logger } from 'pino'

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
 * last-line scrub of every configured secret value (also in its JSON-escaped form), so a token that
 * lands in an unexpected field or message text is still never written.
 */
export function createLogger(opts: LogOptions): Logger {
  const needles: string[] = []
  addNeedles(needles, opts.secrets)
  const log = pino(
    {
      level: opts.level,
      base: { service: 'assist-gateway' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      formatters: { level: label => ({ level: label }) },
      hooks: {
        streamWrite(line: string): string {
          for (const n of needles) if (line.includes(n)) line = line.split(n).join('[REDACTED]')
          return line
        }
      }
    },
    opts.destination ?? pino.destination({ dest: 1, sync: false })
  )
  scrubbed.set(log, needles)
  return log
}

const scrubbed = new WeakMap<Logger, string[]>()

function addNeedles(needles: string[], secrets: readonly string[]): void {
  for (const s of secrets) {
    if (s === '' || needles.includes(s)) continue
    needles.push(s)
    const escaped = JSON.stringify(s).slice(1, -1)
    if (escaped !== s) needles.push(escaped)
  }
}

/** Scrub more credential values from every line of a logger made by createLogger (a reloaded config's). */
export function redactAlso(log: Logger, secrets: readonly string[]): void {
  const needles = scrubbed.get(log)
  if (needles !== undefined) addNeedles(needles, secrets)
}
