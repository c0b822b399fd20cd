import { createHash, createHmac, randomBytes } from 'node:crypto'

/** Where a fleet key came from (logged at start-up, never the key). */
export type FleetKeySource = 'fleet.secret' | 'config secrets' | 'main process'

/**
 * The key the processes of one fleet share and nobody else holds: the instances of a fleet with the same
 * config, and the workers of one `serve --workers N`. Two keys are derived from it:
 * - the caller-tag key: a static credential is kept as a keyed hash of it (auth/hook-auth.ts `callerTag`),
 *   the same on every instance, so the shared re-attach and owner records can compare callers without
 *   holding a credential;
 * - the relay key: it signs what a relaying process asserts about a leg (auth/relay-token.ts).
 *
 * From `fleet.secret` when set; else from every secret of the config (sorted, so the order in the file
 * does not matter; the same formula as before `fleet.secret` existed, so caller tags written by an older
 * instance still compare during a rolling upgrade); else none: a worker then gets its main process's
 * random key over IPC, and a lone instance makes one.
 */
export class FleetKey {
  readonly callerKey: Buffer
  readonly relayKey: Buffer

  private constructor(
    /** The caller-tag key's bytes; the relay key is derived from them. */
    material: Buffer,
    readonly source: FleetKeySource
  ) {
    this.callerKey = material
    this.relayKey = createHmac('sha256', material).update('assist-gateway relay v1').digest()
  }

  /** From the config's `fleet.secret`, else its secrets; null when it has neither. */
  static fromConfig(config: {
    readonly fleet?: { readonly secret?: string }
    readonly secrets: readonly string[]
  }): FleetKey | null {
    const secret = config.fleet?.secret
    if (secret !== undefined && secret !== '')
      return new FleetKey(
        createHash('sha256').update('assist-gateway fleet secret v1\n').update(secret, 'utf8').digest(),
        'fleet.secret'
      )
    if (config.secrets.length === 0) return null
    const h = createHash('sha256').update('assist-gateway caller tag v1')
    for (const s of [...config.secrets].sort()) h.update(`\n${s.length}:${s}`)
    return new FleetKey(h.digest(), 'config secrets')
  }

  /** A key for one process group (a main process hands it to its workers). */
  static random(): FleetKey {
    return new FleetKey(randomBytes(32), 'main process')
  }

  /** The key a main process handed over (hex of its material). */
  static fromHex(hex: string, source: FleetKeySource): FleetKey {
    if (!/^[0-9a-f]{64}$/.test(hex)) throw new TypeError('a fleet key is 64 hex digits')
    return new FleetKey(Buffer.from(hex, 'hex'), source)
  }

  /** The material as hex, for the IPC message that hands it to a worker (never logged). */
  toHex(): string {
    return this.callerKey.toString('hex')
  }
}
