/** RFC 6749 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), tokens separated by single spaces. */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/

/** The scope tokens of a space-separated string, in order and without repeats; null when malformed. */
export function parseScope(scope: string): string[] | null {
  if (scope === '') return null
  const out: string[] = []
  for (const s of scope.split(' ')) {
    if (!SCOPE_TOKEN.test(s)) return null
    if (!out.includes(s)) out.push(s)
  }
  return out
}

/** The scope that opens one hook of one route: `demo:audio`, `demo:text`. */
export function hookScope(route: string, hook: 'audio' | 'text'): string {
  return `${route}:${hook}`
}

/** True when the token's `scope` claim (a space-separated string) names `route:hook`. */
export function scopeAllows(claim: unknown, route: string, hook: 'audio' | 'text'): boolean {
  if (typeof claim !== 'string') return false
  return claim.split(' ').includes(hookScope(route, hook))
}
