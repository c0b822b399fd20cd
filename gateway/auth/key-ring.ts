import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto'
import { readFile as fsReadFile } from 'node:fs/promises'
import { MIN_HS256_SECRET_BYTES, type TokenKeySettings } from '../config/tokens'

/** The algorithms the gateway signs with. Each key has exactly one, fixed when it is loaded. */
export type SigningAlg = 'HS256' | 'ES256' | 'RS256'

/**
 * One loaded key. `alg` is pinned: verification passes `algorithms: [alg]` to jose, so a token can
 * neither choose `none` nor make an HMAC check run with a public key (alg confusion).
 */
export interface RingKey {
  readonly kid: string
  readonly alg: SigningAlg
  /** Secret bytes (HS256) or private key; present on keys of our own ring. */
  readonly signKey: Uint8Array | KeyObject
  /** Secret bytes (HS256) or public key. */
  readonly verifyKey: Uint8Array | KeyObject
}

/** The gateway's own keys: the first signs, all verify (so a key rotates without downtime). */
export interface KeyRing {
  readonly signer: RingKey | undefined
  byKid(kid: string): RingKey | undefined
}

/**
 * Loads `tokens.keys`. Throws a `TypeError` naming the key's `kid` (never its secret) when a key is
 * unusable: an HS256 secret under 32 bytes, an unreadable or unsupported private key file.
 */
export async function loadKeyRing(
  keys: readonly TokenKeySettings[],
  readFile: (path: string) => Promise<string> = p => fsReadFile(p, 'utf8')
): Promise<KeyRing> {
  const loaded: RingKey[] = []
  for (const k of keys) loaded.push(await loadKey(k, readFile))
  const byKid = new Map<string, RingKey>()
  for (const k of loaded) {
    if (byKid.has(k.kid)) throw new TypeError(`tokens.keys: duplicate kid ${k.kid}; give every key its own kid`)
    byKid.set(k.kid, k)
  }
  return { signer: loaded[0], byKid: kid => byKid.get(kid) }
}

async function loadKey(k: TokenKeySettings, readFile: (path: string) => Promise<string>): Promise<RingKey> {
  if (typeof k.kid !== 'string' || k.kid === '') throw new TypeError('tokens.keys: every key needs a non-empty kid')
  if ('secret' in k) {
    const bytes = new Uint8Array(Buffer.from(k.secret, 'utf8'))
    if (bytes.byteLength < MIN_HS256_SECRET_BYTES) {
      throw new TypeError(
        `tokens.keys: the secret of key ${k.kid} is ${bytes.byteLength} bytes; HS256 needs at least ` +
          `${MIN_HS256_SECRET_BYTES} (generate one with: openssl rand -base64 48)`
      )
    }
    return { kid: k.kid, alg: 'HS256', signKey: bytes, verifyKey: bytes }
  }
  let pem: string
  try {
    pem = await readFile(k.privateKeyFile)
  } catch (cause) {
    throw new TypeError(`tokens.keys: cannot read the private key file of key ${k.kid}`, { cause })
  }
  let priv: KeyObject
  try {
    priv = createPrivateKey(pem)
  } catch {
    // The parser's message could quote key material: keep only our own words.
    throw new TypeError(`tokens.keys: the private key file of key ${k.kid} is not a PEM private key`)
  }
  return { kid: k.kid, alg: algOf(priv, k.kid), signKey: priv, verifyKey: createPublicKey(priv) }
}

function algOf(key: KeyObject, kid: string): SigningAlg {
  const d = key.asymmetricKeyDetails
  if (key.asymmetricKeyType === 'ec' && d?.namedCurve === 'prime256v1') return 'ES256'
  if (key.asymmetricKeyType === 'rsa' && (d?.modulusLength ?? 0) >= 2048) return 'RS256'
  throw new TypeError(
    `tokens.keys: key ${kid} must be an EC P-256 key (ES256) or an RSA key of at least 2048 bits (RS256)`
  )
}
