/**
 * Configured secret values kept out of what the gateway writes: every log line (all of the config's
 * secrets) and every answer to the platform (the route's own secrets: its credentials, its vendors'
 * credentials, headers and URL references; never another route's, so a value sent through one route
 * cannot be tested against another tenant's secrets). A secret the caller itself sent (`keep`) is left
 * as it is in that caller's answers: replacing it would confirm a guess. One matcher per secrets list,
 * compiled once and shared (the list is frozen with its config); never on the per-frame audio path.
 */

export const SCRUBBED = '[REDACTED]'

/** `keep(secret)`: true for a secret that stays as it is (the caller sent it itself). */
export type Keep = (secret: string) => boolean

export interface Scrubber {
  /** False when there is nothing to scrub: callers may skip the call entirely. */
  readonly active: boolean
  /** Any text (a log line): every form of every secret replaced by [REDACTED]. */
  text: (s: string, keep?: Keep) => string
  /**
   * JSON text for the platform: unchanged (the same string) unless a secret occurs in it; then every
   * string and key holding one is scrubbed and the value is serialized again, so the answer stays
   * valid JSON whatever characters the secret has.
   */
  json: (s: string, keep?: Keep) => string
}

/**
 * `keep` for a caller's answers: a secret the caller sent in `input` (as written, JSON-escaped or
 * URL-encoded), so the answer never confirms a guess.
 */
export function sentIn(input: () => string): Keep {
  return secret => {
    const text = input()
    return text.includes(secret) || text.includes(escapeJson(secret)) || text.includes(encodeURIComponent(secret))
  }
}

const IDENTITY: Scrubber = { active: false, text: s => s, json: s => s }
const KEEP_NONE: Keep = () => false
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
  /** Every form of every secret → the secret it is a form of. */
  const secretOf = new Map<string, string>()
  for (const s of secrets) {
    const url = encodeURIComponent(s)
    const escaped = escapeJson(s)
    const twice = escapeJson(escaped)
    for (const f of [s, escaped, twice, url]) if (!secretOf.has(f)) secretOf.set(f, s)
    // A parsed string may still hold JSON text (a vendor reflecting a message as a string): escaped once more.
    plain.push(s, escaped, url)
    inJson.push(s, escaped, twice, url)
  }
  const plainRe = matcher(plain)
  const textRe = matcher(inJson)
  const replacer =
    (keep: Keep) =>
    (form: string): string =>
      keep(secretOf.get(form) ?? form) ? form : SCRUBBED
  const text = (s: string, keep: Keep = KEEP_NONE): string => {
    textRe.lastIndex = 0
    return textRe.test(s) ? s.replace(textRe, replacer(keep)) : s
  }
  const clean = (v: unknown, r: (form: string) => string): unknown => {
    if (typeof v === 'string') return v.replace(plainRe, r)
    if (v === null || typeof v !== 'object') return v
    if (Array.isArray(v)) return v.map(x => clean(x, r))
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(v)) out[k.replace(plainRe, r)] = clean(x, r)
    return out
  }
  const json = (s: string, keep: Keep = KEEP_NONE): string => {
    textRe.lastIndex = 0
    if (!textRe.test(s)) return s
    const r = replacer(keep)
    try {
      return JSON.stringify(clean(JSON.parse(s), r))
    } catch {
      return s.replace(textRe, r)
    }
  }
  const scrubber: Scrubber = { active: true, text, json }
  cache.set(secrets, scrubber)
  return scrubber
}
