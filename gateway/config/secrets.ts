// The config's secrets (config/load.ts): what logs and answers are scrubbed of (telemetry/scrub.ts).

/**
 * A route's own secrets: its credentials and those of the tenants it admits, its vendors' (and tees')
 * credentials and header values, and what ${VAR} references filled into its vendor URLs. They are what its
 * answers to the platform are scrubbed of (telemetry/scrub.ts); values shorter than 4 characters are left
 * out (they would redact ordinary words).
 */
export function routeSecrets(
  route: Record<string, any>,
  urlRefs: [string, string[]][],
  /** The tenants the route admits: their credentials are its secrets too. */
  tenants: readonly Record<string, any>[] = []
): string[] {
  const out = new Set<string>()
  for (const t of route.auth?.audio ?? []) out.add(t)
  for (const t of route.auth?.text ?? []) out.add(t)
  for (const tenant of tenants)
    for (const t of [...(tenant.credentials?.audio ?? []), ...(tenant.credentials?.text ?? [])]) out.add(t)
  for (const u of [...route.upstreams, ...(route.tee ?? []).flatMap((t: any) => t.upstreams)]) {
    if (u.credential) out.add(u.credential)
    for (const v of Object.values(u.headers ?? {})) out.add(v as string)
    for (const v of Object.values(u.signing ?? {})) if (v) out.add(v as string)
    for (const url of [u.audio, u.text]) {
      try {
        const pw = url === undefined ? '' : new URL(url).password
        if (pw) out.add(decodeURIComponent(pw))
      } catch {
        /* not a URL: refused above */
      }
    }
  }
  for (const [, values] of urlRefs) for (const v of values) out.add(v)
  return [...out].filter(s => s.length >= 4)
}

/** Every secret of the config: every route's, and the listeners', store's and token keys'. Redacted from every log line. */
export function collectSecrets(cfg: Record<string, any>): string[] {
  const out = new Set<string>()
  for (const route of Object.values(cfg.routes as Record<string, any>)) for (const s of route.secrets) out.add(s)
  for (const tenant of Object.values((cfg.tenants ?? {}) as Record<string, any>))
    for (const s of [...(tenant.credentials?.audio ?? []), ...(tenant.credentials?.text ?? [])]) out.add(s)
  if (cfg.listen.tls?.passphrase) out.add(cfg.listen.tls.passphrase)
  if (cfg.admin?.token) out.add(cfg.admin.token)
  if (cfg.fleet?.secret) out.add(cfg.fleet.secret)
  if (cfg.store?.password) out.add(cfg.store.password)
  if (cfg.store?.sentinelPassword) out.add(cfg.store.sentinelPassword)
  for (const k of cfg.tokens?.keys ?? []) if (k.secret) out.add(k.secret)
  for (const c of cfg.tokens?.clients ?? []) if (c.secret) out.add(c.secret)
  for (const v of Object.values(cfg.tracing?.headers ?? {})) out.add(v as string)
  if (cfg.redis) {
    try {
      const pw = new URL(cfg.redis).password
      if (pw) out.add(decodeURIComponent(pw))
    } catch {
      /* not a URL: ioredis reports it */
    }
  }
  // Very short values would redact ordinary words from log lines; they are still never logged by path.
  return [...out].filter(s => s.length >= 4)
}
