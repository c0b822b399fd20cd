import type { HttpRequest } from 'uWebSockets.js'
import type { ServerState } from './state'

/**
 * True when a request's head (URL, query and every header name and value) is over
 * `limits.headerBytes`; counted as `limit_refusals_total{limit="header_size"}`. The caller answers
 * HEADERS_TOO_LARGE (431) with `connection: close`. uWS 20.30 (this build) has its own, larger bound:
 * a head over ~128 KB is cut with a TCP reset and no status, before the gateway sees it. MUST be called
 * while `req` is valid (in the handler, before any await). `scanned`: the header bytes a scan of this
 * request already counted (front-door.ts scannedHeaderBytes), so the headers are not walked twice.
 */
export function headerBytesOver(
  req: HttpRequest,
  state: ServerState,
  hook: 'audio' | 'text' | 'token',
  scanned?: number
): boolean {
  const limit = state.config.limits.headerBytes
  let n = req.getUrl().length + (req.getQuery() ?? '').length
  if (scanned !== undefined) n += scanned
  else
    req.forEach((key, value) => {
      n += key.length + value.length + 4
    })
  if (n <= limit) return false
  state.metrics.limitRefusals.inc({ limit: 'header_size', hook })
  return true
}
