import type { UpstreamConfig } from '../config/types'
import { textBase } from '../upstream/text-url'
import type { AudioMapping, MappingInput } from './audio'
import type { Expr } from './expr'
import { run } from './run'
import { presignUrl } from './sigv4'

/** What a mapping sees of the replica a connection goes to (`upstream` in its input). */
export function upstreamInput(u: UpstreamConfig): MappingInput['upstream'] {
  return {
    name: u.name,
    audio: u.audio ?? null,
    credential: u.credential ?? null,
    hasCredential: u.credential !== undefined,
    textPath: textPathOf(u.text)
  }
}

/** The path of a replica's text URL as mappings see it (`upstream.textPath`): "" for none, or no text URL. */
export function textPathOf(text: string | undefined): string {
  return text === undefined || /^grpcs?:\/\//.test(text) ? '' : textBase(text).basePath
}

export type VendorTarget =
  | { ok: true; url: string; headers: Record<string, string> }
  | { ok: false; stage: 'url' | 'headers'; error: string }

/**
 * Where a vendor connection (or a health probe of it) goes: the URL and headers the mapping builds from
 * `input` for one replica (the replica's own URL and headers where the mapping says nothing). A failing
 * expression is a value whose `error` is for logs only: it may quote what the expression produced.
 */
export async function vendorTarget(
  audio: AudioMapping,
  upstream: UpstreamConfig,
  input: MappingInput
): Promise<VendorTarget> {
  let url = upstream.audio!
  if (audio.url !== null) {
    const out = await run(audio.url, input)
    if (!out.ok || typeof out.value !== 'string')
      return { ok: false, stage: 'url', error: out.ok ? 'did not produce a string' : out.error }
    url = out.value
  }
  if (audio.sign != null) {
    const signed = await signedUrl(audio, upstream, input, url)
    if (!signed.ok) return { ok: false, stage: 'url', error: signed.error }
    url = signed.url
  }
  const headers = await mappedHeaders(audio.headers, upstream.headers, input)
  if (!headers.ok) return { ok: false, stage: 'headers', error: headers.error }
  return { ok: true, url, headers: headers.value }
}

/** The replica's headers with what `expr` (an object of header values) adds; null and undefined values are left out. */
export async function mappedHeaders(
  expr: Expr | null | undefined,
  base: Readonly<Record<string, string>> | undefined,
  input: MappingInput
): Promise<{ ok: true; value: Record<string, string> } | { ok: false; error: string }> {
  const headers: Record<string, string> = { ...base }
  if (expr === null || expr === undefined) return { ok: true, value: headers }
  const out = await run(expr, input)
  if (!out.ok || out.value === null || typeof out.value !== 'object')
    return { ok: false, error: out.ok ? 'did not produce an object' : out.error }
  for (const [k, v] of Object.entries(out.value as Record<string, unknown>))
    if (v !== undefined && v !== null) headers[k] = String(v)
  return { ok: true, value: headers }
}

/**
 * The URL signed with the replica's `signing` keys (`audio.sign`), at this moment. The keys come from the
 * gateway's config only; a failure says why without quoting them.
 */
async function signedUrl(
  audio: AudioMapping,
  upstream: UpstreamConfig,
  input: MappingInput,
  url: string
): Promise<{ ok: true; url: string } | { ok: false; error: string }> {
  const sign = audio.sign!
  const keys = upstream.signing
  if (keys === undefined)
    return {
      ok: false,
      error: `audio.sign: replica ${upstream.name} has no signing keys (routes.R.upstreams[].signing)`
    }
  const region = await run(sign.region, input)
  if (!region.ok || typeof region.value !== 'string' || !/^[a-z0-9-]{1,64}$/.test(region.value))
    return { ok: false, error: `audio.sign.region: ${region.ok ? 'did not produce a region name' : region.error}` }
  try {
    const credentials = {
      accessKeyId: keys.accessKeyId,
      secretAccessKey: keys.secretAccessKey,
      ...(keys.sessionToken ? { sessionToken: keys.sessionToken } : {})
    }
    const signed = presignUrl(url, {
      service: sign.service,
      region: region.value,
      expiresSeconds: sign.expiresSeconds,
      credentials,
      now: new Date()
    })
    return { ok: true, url: signed }
  } catch {
    return { ok: false, error: 'audio.sign: the URL could not be signed (not a valid URL)' }
  }
}
