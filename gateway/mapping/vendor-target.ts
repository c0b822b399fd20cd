import type { UpstreamConfig } from '../config/types'
import type { AudioMapping, MappingInput } from './audio'
import type { Expr } from './expr'
import { run } from './run'

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
