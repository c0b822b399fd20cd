/**
 * Configured secret values (config.secrets) kept out of everything the gateway writes: log lines and
 * every answer to the platform (CONNECTED, MESSAGE and ERROR frames, text answers, problem+json).
 * One matcher per secrets list, compiled once and shared (the list is frozen with its config); it is
 * never on the per-frame audio path, which carries binary audio only.
 */

export const SCRUBBED = '[REDACTED]'

export interface Scrubber {
  /** False when there is nothing to scrub: callers may skip the call entirely. */
  readonly active: boolean
  /** Any text (a log line): every form of every secret replaced by [REDACTED]. */
  text: (s: string) => string
  /**
   * JSON text for the platform: unchanged (the same string) unless a secret occurs in it; then every
   * string and key holding one is scrubbed and the value is serialized again, so the answer stays
   * valid JSON whatever characters the secret has.
   */
  json: (s: string) => string
}

const IDENTITY: Scrubber = { active: false, text: s => s, json: s => s }
const cache = new WeakMap<readonly string[], Scrubber>()

function escapeJson(s: string): string {
  return JSON.stringify(s).slice(1, -1)
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}

/** One alternation, longest first, so a longer form (the JSON-escaped one) wins where both match. */
function matcher(forms: Iterable<string>): RegExp {
  const sorted = [...new Set(forms)].filter(f => f !== '').sort((a, b) => b.length - a.length)
  return new RegExp(sorted.map(escapeRegExp).join('|'), 'g')
}

/**
 * The scrubber of a secrets list (cached by the list's identity: one per config). Each secret is matched
 * as written, JSON-escaped once and twice (inside a JSON string, and inside JSON text a vendor put in a
 * string) and URL-encoded (as a vendor echoing its upgrade URL would show a query credential).
 */
export function scrubberFor(secrets: readonly string[]): Scrubber {
  if (secrets.length === 0) return IDENTITY
  const hit = cache.get(secrets)
  if (hit !== undefined) return hit
  const plain: string[] = []
  const inJson: string[] = []
  for (const s of secrets) {
    const url = encodeURIComponent(s)
    const escaped = escapeJson(s)
    // A parsed string may still hold JSON text (a vendor reflecting a message as a string): escaped once more.
    plain.push(s, escaped, url)
    inJson.push(s, escaped, escapeJson(escaped), url)
  }
  const plainRe = matcher(plain)
  const textRe = matcher(inJson)
  const text = (s: string): string => {
    textRe.lastIndex = 0
    return textRe.test(s) ? s.replace(textRe, SCRUBBED) : s
  }
  const clean = (v: unknown): unknown => {
    if (typeof v === 'string') return v.replace(plainRe, SCRUBBED)
    if (v === null || typeof v !== 'object') return v
    if (Array.isArray(v)) return v.map(clean)
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(v)) out[k.replace(plainRe, SCRUBBED)] = clean(x)
    return out
  }
  const json = (s: string): string => {
    textRe.lastIndex = 0
    if (!textRe.test(s)) return s
    try {
      return JSON.stringify(clean(JSON.parse(s)))
    } catch {
      return s.replace(textRe, SCRUBBED)
    }
  }
  const scrubber: Scrubber = { active: true, text, json }
  cache.set(secrets, scrubber)
  return scrubber
}
