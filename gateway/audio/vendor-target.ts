import type { AudioMapping } from '../mapping/audio'
import { type MappingInput, run } from '../mapping/run'
import type { Replica } from '../upstream/pool'

export type VendorTarget =
  | { ok: true; url: string; headers: Record<string, string> }
  | { ok: false; stage: 'url' | 'headers'; error: string }

/**
 * Where a vendor connection goes: the URL and headers the mapping builds from `input` for one replica
 * (the replica's own URL and headers where the mapping says nothing). A failing expression is a value
 * whose `error` is for logs only: it may quote what the expression produced.
 */
export async function vendorTarget(audio: AudioMapping, replica: Replica, input: MappingInput): Promise<VendorTarget> {
  const cfg = replica.config
  let url = cfg.audio!
  const headers: Record<string, string> = { ...cfg.headers }
  if (audio.url !== null) {
    const out = await run(audio.url, input)
    if (!out.ok || typeof out.value !== 'string')
      return { ok: false, stage: 'url', error: out.ok ? 'did not produce a string' : out.error }
    url = out.value
  }
  if (audio.headers !== null) {
    const out = await run(audio.headers, input)
    if (!out.ok || out.value === null || typeof out.value !== 'object')
      return { ok: false, stage: 'headers', error: out.ok ? 'did not produce an object' : out.error }
    for (const [k, v] of Object.entries(out.value as Record<string, unknown>))
      if (v !== undefined && v !== null) headers[k] = String(v)
  }
  return { ok: true, url, headers }
}
