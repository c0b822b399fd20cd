import { SCRUBBED, scrubberFor } from '../telemetry/scrub'
import { escapePointer } from '../validate/compile'
import { SECRET_POINTERS } from './references'

/** Keys the loader adds that hold secrets or nothing an operator wrote: left out of the view. */
const LEFT_OUT = new Set(['/secrets', '/warnings'])
const ROUTE_SECRETS = /^\/routes\/[^/]+\/secrets$/
/** A URL with credentials in it (`redis://user:pass@host`, `wss://key@vendor`). */
const URL_WITH_USER = /^[a-z][a-z\d+.-]*:\/\/[^/?#]*@/i

/**
 * A config as an operator may see it (`GET /admin/config`): every secret replaced by [REDACTED]. Secrets are
 * known (config/references.ts `SECRET_POINTERS`: credentials, tokens, passwords, key secrets), and every other
 * value is scrubbed of each of `secrets` (what a ${VAR} filled into an upstream URL, a Redis URL's password)
 * and of a URL's user and password, however short. The loader's own lists of secrets are left out.
 */
export function redactConfig(config: object, secrets: readonly string[]): Record<string, unknown> {
  const scrub = scrubberFor(secrets)
  const walk = (node: unknown, pointer: string): unknown => {
    if (typeof node === 'string') {
      if (node !== '' && SECRET_POINTERS.some(re => re.test(pointer))) return SCRUBBED
      return withoutUserinfo(scrub.text(node))
    }
    if (Array.isArray(node)) return node.map((v, i) => walk(v, `${pointer}/${i}`))
    if (node === null || typeof node !== 'object') return node
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(node)) {
      const at = `${pointer}/${escapePointer(k)}`
      if (!LEFT_OUT.has(at) && !ROUTE_SECRETS.test(at)) out[k] = walk(v, at)
    }
    return out
  }
  return walk(config, '') as Record<string, unknown>
}

function withoutUserinfo(s: string): string {
  return URL_WITH_USER.test(s) ? s.replace(URL_WITH_USER, m => `${m.slice(0, m.indexOf('//') + 2)}${SCRUBBED}@`) : s
}
