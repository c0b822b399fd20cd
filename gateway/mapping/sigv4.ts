import { createHash, createHmac } from 'node:crypto'

/**
 * AWS Signature Version 4 in the query string (a presigned URL), as the AWS General Reference and the
 * Amazon Transcribe developer guide ("Setting up a WebSocket stream") describe it: the credential scope
 * `date/region/service/aws4_request`, the `X-Amz-*` parameters added to the query, the canonical request
 * (method, the path URI-encoded again, the query sorted by code point and RFC 3986-encoded, the `host`
 * header, `host` as the signed headers, the SHA-256 of the empty payload), the string to sign and the
 * HMAC-SHA256 chain `AWS4<secret>` → date → region → service → `aws4_request`. Tests hold it against the
 * AWS SDK's own signer (`@smithy/signature-v4`) byte for byte.
 */

export interface SigV4Credentials {
  accessKeyId: string
  secretAccessKey: string
  /** Temporary credentials (STS): goes in `X-Amz-Security-Token`, signed. */
  sessionToken?: string
}

export interface PresignOptions {
  service: string
  region: string
  /** 1 to 604800 (the protocol's week); Transcribe's WebSocket takes at most 300. */
  expiresSeconds: number
  credentials: SigV4Credentials
  now: Date
}

const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'

/** RFC 3986 percent-encoding: everything but `A-Z a-z 0-9 - _ . ~`, upper-case hex. */
export function uriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, c => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
}

/** `YYYYMMDDTHHMMSSZ` and `YYYYMMDD`. */
export function amzDate(now: Date): { long: string; short: string } {
  const long = now
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/[-:]/g, '')
  return { long, short: long.slice(0, 8) }
}

/** The query of a URL as name/value pairs, decoded as RFC 3986 says (a `+` stays a plus). */
export function queryPairs(search: string): [string, string][] {
  const q = search.startsWith('?') ? search.slice(1) : search
  if (q === '') return []
  return q.split('&').map(part => {
    const eq = part.indexOf('=')
    const name = eq < 0 ? part : part.slice(0, eq)
    const value = eq < 0 ? '' : part.slice(eq + 1)
    return [decodeURIComponent(name), decodeURIComponent(value)]
  })
}

/** Sorted by encoded name (code point order), then by encoded value. */
export function canonicalQuery(pairs: readonly [string, string][]): string {
  return pairs
    .map(([k, v]) => [uriEncode(k), uriEncode(v)] as const)
    .sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&')
}

/** The path as the canonical request writes it: dot segments resolved, then URI-encoded again (`/` kept). */
export function canonicalPath(pathname: string): string {
  const segments: string[] = []
  for (const s of pathname.split('/')) {
    if (s === '' || s === '.') continue
    if (s === '..') segments.pop()
    else segments.push(s)
  }
  const trailing = segments.length > 0 && pathname.endsWith('/') ? '/' : ''
  const normalized = `${pathname.startsWith('/') ? '/' : ''}${segments.join('/')}${trailing}`
  return uriEncode(normalized).replace(/%2F/g, '/')
}

/** The signing key for one day, region and service. */
export function signingKey(secretAccessKey: string, shortDate: string, region: string, service: string): Buffer {
  const k = (key: string | Buffer, data: string): Buffer => createHmac('sha256', key).update(data, 'utf8').digest()
  return k(k(k(k(`AWS4${secretAccessKey}`, shortDate), region), service), 'aws4_request')
}

/**
 * The signature of a GET whose only signed header is `host` and whose payload is empty: what a presigned
 * URL carries in `X-Amz-Signature`. `pairs` is the whole query without the signature.
 */
export function querySignature(p: {
  host: string
  pathname: string
  pairs: readonly [string, string][]
  longDate: string
  scope: string
  key: Buffer
}): string {
  const canonical = [
    'GET',
    canonicalPath(p.pathname),
    canonicalQuery(p.pairs),
    `host:${p.host}`,
    '',
    'host',
    EMPTY_SHA256
  ].join('\n')
  const toSign = [
    'AWS4-HMAC-SHA256',
    p.longDate,
    p.scope,
    createHash('sha256').update(canonical, 'utf8').digest('hex')
  ].join('\n')
  return createHmac('sha256', p.key).update(toSign, 'utf8').digest('hex')
}

/**
 * Presign `url` (ws, wss, http or https; its own query kept): the URL with the `X-Amz-*` parameters and
 * the signature, the query written in canonical order. The `host` signed is the URL's host as the
 * client will send it (with the port when it is not the scheme's default, e.g. Transcribe's 8443).
 */
export function presignUrl(url: string, o: PresignOptions): string {
  const u = new URL(url)
  if (!Number.isInteger(o.expiresSeconds) || o.expiresSeconds < 1 || o.expiresSeconds > 604800)
    throw new RangeError('expiresSeconds must be an integer from 1 to 604800')
  const { long, short } = amzDate(o.now)
  const scope = `${short}/${o.region}/${o.service}/aws4_request`
  const pairs = queryPairs(u.search)
  if (o.credentials.sessionToken) pairs.push(['X-Amz-Security-Token', o.credentials.sessionToken])
  pairs.push(
    ['X-Amz-Algorithm', 'AWS4-HMAC-SHA256'],
    ['X-Amz-Credential', `${o.credentials.accessKeyId}/${scope}`],
    ['X-Amz-Date', long],
    ['X-Amz-Expires', String(o.expiresSeconds)],
    ['X-Amz-SignedHeaders', 'host']
  )
  const signature = querySignature({
    host: u.host,
    pathname: u.pathname,
    pairs,
    longDate: long,
    scope,
    key: signingKey(o.credentials.secretAccessKey, short, o.region, o.service)
  })
  return `${u.protocol}//${u.host}${u.pathname}?${canonicalQuery(pairs)}&X-Amz-Signature=${signature}`
}
