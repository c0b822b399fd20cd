import type * as uWS from 'uWebSockets.js'
import type { RecentEvent } from '../telemetry/recent'
import { type AdminGate, guarded } from './admin'
import { send } from './http'
import { STATUS_SCRIPT } from './status-script'

/**
 * `GET /admin/status`: a live page of the gateway for a browser, on the admin listener and behind its
 * token (a browser is challenged with Basic: any user name, the token as the password; nothing in a URL).
 * Three files of its own (the page, its script, its style), nothing from elsewhere: a strict Content
 * Security Policy allows scripts, styles and fetches from this origin only, no inline script or style,
 * no framing. The script reads what an operator's tools read, every 2 s: GET /admin/upstreams,
 * /admin/calls?all, /admin/recent and (with workers) /admin/workers, each sent with
 * `x-requested-with: assist-gateway`; it builds the page with DOM nodes and text, never HTML from data.
 */
export const STATUS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'"
].join('; ')

const HEADERS = {
  'content-security-policy': STATUS_CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store'
}

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>assist-gateway status</title>
<link rel="stylesheet" href="/admin/status.css">
<link rel="icon" href="/admin/status.svg">
<script src="/admin/status.js" defer></script>
</head>
<body>
<header>
  <h1>assist-gateway</h1>
  <div id="instance">loading…</div>
  <div id="live" data-state="loading">loading</div>
</header>
<main>
  <section><h2>Workers</h2><div id="workers"></div></section>
  <section><h2>Routes and replicas</h2><div id="routes"></div></section>
  <section><h2>Calls in progress</h2><div id="calls"></div></section>
  <section><h2>Recent failovers and replica changes</h2><div id="changes"></div></section>
  <section><h2>Recent refusals and errors</h2><div id="refusals"></div></section>
</main>
</body>
</html>
`

const STYLE = `:root { color-scheme: light dark; --up: #1a7f37; --down: #cf222e; --warn: #9a6700; --line: #8884 }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 }
header { display: flex; gap: 1.5em; align-items: baseline; padding: .6em 1em; border-bottom: 1px solid var(--line) }
header h1 { font-size: 1.2em; margin: 0 }
#live { margin-left: auto; font-weight: 600 }
#live[data-state="ok"] { color: var(--up) }
#live[data-state="error"] { color: var(--down) }
main { padding: 0 1em 1em }
h2 { font-size: 1em; margin: 1.2em 0 .4em }
h3 { font-size: .95em; margin: .8em 0 .3em }
table { border-collapse: collapse; min-width: 40em }
th, td { text-align: left; padding: .2em .6em; border-bottom: 1px solid var(--line); white-space: nowrap }
th { font-weight: 600 }
td.num { text-align: right; font-variant-numeric: tabular-nums }
[data-state="up"] .state, .ok { color: var(--up); font-weight: 600 }
[data-state="down"] .state, [data-state="ejected"] .state, .bad { color: var(--down); font-weight: 600 }
.muted { opacity: .7 }
`

/** Its icon (else the browser asks for /favicon.ico, which the admin listener does not serve). */
const ICON =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="#1a7f37"/></svg>'

/** Pages and their content types (the script is in status-script.ts). */
const FILES: Record<string, { type: string; body: string }> = {
  '/admin/status': { type: 'text/html; charset=utf-8', body: PAGE },
  '/admin/status.js': { type: 'text/javascript; charset=utf-8', body: STATUS_SCRIPT },
  '/admin/status.css': { type: 'text/css; charset=utf-8', body: STYLE },
  '/admin/status.svg': { type: 'image/svg+xml', body: ICON }
}

/** The page and its files, behind the admin gate (a browser's challenge: Basic). */
export function mountStatusPage(admin: uWS.TemplatedApp, gate: AdminGate): void {
  for (const [path, file] of Object.entries(FILES))
    admin.get(
      path,
      guarded(gate, res => send(res, 200, file.type, file.body, HEADERS), true)
    )
}

/** `GET /admin/recent` of several processes as one: newest first, each entry with its worker's index. */
export function mergeRecent(
  views: { worker: number; view: { changes: RecentEvent[]; refusals: RecentEvent[] } }[],
  keep: number
): { changes: (RecentEvent & { worker: number })[]; refusals: (RecentEvent & { worker: number })[] } {
  const merged = (pick: 'changes' | 'refusals'): (RecentEvent & { worker: number })[] =>
    views
      .flatMap(v => v.view[pick].map(e => ({ ...e, worker: v.worker })))
      .sort((a, b) => b.at.localeCompare(a.at))
      .slice(0, keep)
  return { changes: merged('changes'), refusals: merged('refusals') }
}
