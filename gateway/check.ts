import { readFileSync } from 'node:fs'
import { createSecureContext } from 'node:tls'
import * as uWS from 'uWebSockets.js'
import { joinProblems } from './audio/session/join-config'
import { livenessOf } from './audio/connection/liveness'
import { type ConfigProblem, ConfigError } from './errors'
import { loadMapping } from './mapping/compile'
import { dryRunMapping } from './mapping/dry-run'
import { loadConfig } from './config/load'
import { readSource, type Source } from './config/source'
import type { Config } from './config/types'
import { teeRouteConfig } from './route'

type Problem = ConfigProblem

/** Every problem of a config, or the config when it has none. */
export type Validation = { ok: true; config: Config } | { ok: false; config: Config | null; problems: Problem[] }

/**
 * Everything `check` checks and `serve` must check before it listens, in one place so the two cannot
 * disagree: the config (loadConfig), every route's mapping loaded, compiled and dry-run on the
 * interface's example messages, and the TLS certificate, key and passphrase loaded as a pair.
 * Bugs (anything but a ConfigError) are thrown, not reported as problems.
 */
export async function validateAll(file: string, env: NodeJS.ProcessEnv): Promise<Validation> {
  let config: Config
  try {
    config = loadConfig(file, env)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    return { ok: false, config: null, problems: located(err.problems) }
  }
  const problems: Problem[] = [...tlsProblems(config)]
  const warnings: string[] = []
  const all = Object.values(config.routes).flatMap(r => [r, ...(r.tee ?? []).map(t => teeRouteConfig(r, t))])
  for (const route of all) {
    try {
      const mapping = loadMapping(route.mapping)
      const short = mapping.audio === null ? null : replayShortOfDetection(config, mapping.audio)
      if (short !== null) warnings.push(`${config.file}: /audio/replaySeconds: route ${route.name}: ${short}`)
      problems.push(...joinProblems(route, mapping, config.file, config.audio.holdBufferBytes))
      problems.push(...(await dryRunMapping(mapping, route)))
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err
      problems.push(...err.problems)
    }
  }
  const settle = settleShortOfSync(config)
  if (settle !== null) warnings.push(`${config.file}: /audio/rebalance/settleSeconds: ${settle}`)
  if (warnings.length > 0) config = { ...config, warnings: [...config.warnings, ...warnings] }
  return problems.length === 0 ? { ok: true, config } : { ok: false, config, problems: located(problems) }
}

/** `audio.replaySeconds` set below what detecting a frozen vendor of this mapping takes: its audio is lost. */
function replayShortOfDetection(config: Config, audio: Parameters<typeof livenessOf>[1]): string | null {
  const set = config.audio.replaySeconds
  if (set === undefined) return null
  const l = livenessOf({ ...config.audio, replaySeconds: undefined }, audio)
  if (l.pingMs === 0 || set >= (l.pingMs + l.timeoutMs) / 1000) return null
  return (
    `${set} s is less than detecting a frozen vendor takes (${(l.pingMs + l.timeoutMs) / 1000} s): audio written ` +
    'between its last sign of life and detection beyond the window is lost (counted failover_unreplayed); ' +
    'leave replaySeconds out to size it from detection'
  )
}

/** `audio.rebalance.settleSeconds` within the lag of fleet-wide counts: calls may move on a count that is already stale. */
function settleShortOfSync(config: Config): string | null {
  const { settleSeconds, perSecond } = config.audio.rebalance
  const lag = 2 * config.store.syncIntervalSeconds
  if (perSecond === 0 || settleSeconds >= lag) return null
  return (
    `${settleSeconds} s is less than two store sync intervals (${lag} s): calls may move on stream counts that ` +
    'are already stale (in a rolling restart, the calls being moved are briefly counted twice)'
  )
}

/** Each problem with the line and column of its pointer in its file, where it does not name them yet. */
function located(problems: readonly Problem[]): Problem[] {
  const files = new Map<string, Source | null>()
  const source = (file: string): Source | null => {
    if (!files.has(file)) {
      try {
        files.set(file, readSource(file))
      } catch {
        files.set(file, null)
      }
    }
    return files.get(file) ?? null
  }
  return problems.map(p => (p.line !== undefined ? p : { ...p, ...source(p.file)?.where(p.pointer) }))
}

const TLS_HINTS: Record<string, string> = {
  ERR_OSSL_PEM_NO_START_LINE: 'a file is not the PEM it should be (are cert and key swapped?)',
  ERR_OSSL_X509_KEY_VALUES_MISMATCH: 'the key does not belong to the certificate',
  ERR_OSSL_BAD_DECRYPT: 'the key is encrypted and listen.tls.passphrase is missing or wrong'
}

/** Loads listen.tls as the server will (createSecureContext fails on a mismatched or undecryptable pair). */
function tlsProblems(config: Config): Problem[] {
  const tls = config.listen.tls
  if (tls === null) return []
  const pem: Record<'cert' | 'key', Buffer | null> = { cert: null, key: null }
  const problems: Problem[] = []
  for (const key of ['cert', 'key'] as const) {
    try {
      pem[key] = readFileSync(tls[key])
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error'
      problems.push({ file: config.file, pointer: `/listen/tls/${key}`, message: `cannot read ${tls[key]} (${code})` })
    }
  }
  if (pem.cert === null || pem.key === null) return problems
  try {
    createSecureContext({ cert: pem.cert, key: pem.key, passphrase: tls.passphrase })
  } catch (err) {
    const e = err as { code?: string; message?: string }
    const hint = TLS_HINTS[e.code ?? ''] ?? 'they do not load'
    problems.push({
      file: config.file,
      pointer: '/listen/tls',
      message: `certificate ${tls.cert} and key ${tls.key} do not load as a pair: ${hint} (${e.message ?? String(err)})`
    })
  }
  if (problems.length === 0 && tls.ciphers !== undefined) problems.push(...cipherProblems(config))
  return problems
}

/**
 * The cipher list as the server will read it: uWebSockets.js's own TLS library (BoringSSL) builds the
 * context, with the certificate and key that already loaded above. BoringSSL refuses a list naming no
 * TLS 1.2 suite it knows (TLS 1.3 names among them) where Node's OpenSSL would accept it.
 */
function cipherProblems(config: Config): Problem[] {
  const tls = config.listen.tls!
  try {
    const app = uWS.SSLApp({
      cert_file_name: tls.cert,
      key_file_name: tls.key,
      ssl_ciphers: tls.ciphers,
      ...(tls.passphrase !== undefined ? { passphrase: tls.passphrase } : {})
    })
    ;(app as unknown as { close: () => void }).close()
    return []
  } catch {
    return [
      {
        file: config.file,
        pointer: '/listen/tls/ciphers',
        message:
          'the TLS library (BoringSSL) accepts no TLS 1.2 cipher suite in this list; name suites as ' +
          'ECDHE-RSA-AES256-GCM-SHA384 (TLS 1.3 suites are fixed and cannot be listed)'
      }
    ]
  }
}
