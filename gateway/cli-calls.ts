import { parseCommand, requireUrl } from './cli-usage'
import type { CallRecord } from './store/port'

/** Where `calls` reads the admin token when `--token` is not given (never printed). */
export const ADMIN_TOKEN_ENV = 'GATEWAY_ADMIN_TOKEN'

/** What `GET /admin/calls` answers. */
export interface CallsAnswer {
  contactId?: string
  tenant?: string
  answeredBy: string
  store: string
  calls: Omit<CallRecord, 'at'>[]
}

const COLUMNS: [string, (c: Omit<CallRecord, 'at'>) => string][] = [
  ['INSTANCE', c => c.instance],
  ['WORKER', c => (c.worker === null ? '-' : String(c.worker))],
  ['ROUTE', c => c.route],
  ['PERSP', c => c.perspective],
  ['STATE', c => c.state],
  ['REPLICA', c => c.replica || (c.relayedTo !== undefined ? `(relayed to ${c.relayedTo})` : '-')],
  ['STARTED', c => c.startedAt],
  ['FRAMES', c => String(c.framesFromPlatform)],
  ['BYTES', c => String(c.bytesFromPlatform)],
  ['LAST FRAME', c => (c.lastFrameAgeMs === null ? '-' : `${(c.lastFrameAgeMs / 1000).toFixed(1)} s ago`)],
  ['FAILOVERS', c => String(c.failovers)],
  ['GAP MS', c => String(c.gapMs)],
  ['RESULTS', c => (c.resultsSent === undefined ? '-' : String(c.resultsSent))]
]

/** The TENANT column, shown after WORKER when the answer is one tenant's (`--tenant`). */
const TENANT_COLUMN: (typeof COLUMNS)[number] = ['TENANT', c => c.tenant ?? '-']

/** The answer as a table, one row per leg, columns padded to their widest cell. */
export function callsTable(calls: readonly Omit<CallRecord, 'at'>[], tenant = false): string {
  const columns = tenant ? [...COLUMNS.slice(0, 2), TENANT_COLUMN, ...COLUMNS.slice(2)] : COLUMNS
  const rows = [columns.map(([h]) => h), ...calls.map(c => columns.map(([, cell]) => cell(c)))]
  const widths = columns.map((_, i) => Math.max(...rows.map(r => r[i].length)))
  return rows
    .map(r =>
      r
        .map((cell, i) => cell.padEnd(widths[i]))
        .join('  ')
        .trimEnd()
    )
    .join('\n')
}

/**
 * `calls --admin URL --contact N`: where contact N's legs are, fleet-wide (GET /admin/calls). Exit 0 with
 * the table (or `--json`: the answer as it came), 1 when the admin API cannot be reached or refuses, 2 on
 * a usage error. The token comes from --token or $GATEWAY_ADMIN_TOKEN and is never printed.
 */
export async function cmdCalls(argv: string[]): Promise<number> {
  const line = parseCommand('calls', argv, {
    admin: { type: 'string' },
    token: { type: 'string' },
    contact: { type: 'string' },
    tenant: { type: 'string' },
    json: { type: 'boolean', default: false }
  })
  if (line === null) return 0
  const { values, usage } = line
  if (values.admin === undefined) throw usage('--admin is required (the admin listener, e.g. http://127.0.0.1:9091)')
  const base = requireUrl(values.admin, ['http:', 'https:'], m => usage(m.replace('--url', '--admin'))).replace(
    /\/+$/,
    ''
  )
  if (values.contact === undefined && values.tenant === undefined) throw usage('--contact or --tenant is required')
  if (values.contact !== undefined && !/^\d{1,40}$/.test(values.contact))
    throw usage(`--contact must be a contact id (digits), not "${values.contact}"`)
  if (values.tenant !== undefined && !/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/.test(values.tenant))
    throw usage(`--tenant must be a tenant name, not "${values.tenant}"`)
  const token = values.token ?? process.env[ADMIN_TOKEN_ENV] ?? ''
  const query = [
    ...(values.contact !== undefined ? [`contactId=${values.contact}`] : []),
    ...(values.tenant !== undefined ? [`tenant=${values.tenant}`] : [])
  ].join('&')
  const url = `${base}/admin/calls?${query}`
  let res: Response
  try {
    res = await fetch(url, {
      // What every caller of the admin API sends (server/admin.ts ADMIN_REQUESTED_WITH; only a web page cannot).
      headers: { 'x-requested-with': 'assist-gateway', ...(token === '' ? {} : { authorization: `Bearer ${token}` }) },
      signal: AbortSignal.timeout(10_000)
    })
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause
    throw new Error(`cannot reach the admin API at ${base}: ${cause?.code ?? cause?.message ?? (err as Error).message}`)
  }
  const body = await res.text()
  if (res.status === 401)
    throw new Error(
      `${base} refused the request (401 ADMIN_UNAUTHORIZED): ` +
        (token === '' ? `give the admin token with --token or $${ADMIN_TOKEN_ENV}` : 'the admin token was not accepted')
    )
  if (res.status === 403) throw new Error(`${base} refused the request (403 ADMIN_FORBIDDEN): ${problemDetail(body)}`)
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${body.slice(0, 300)}`)
  let answer: CallsAnswer
  try {
    answer = JSON.parse(body) as CallsAnswer
    if (!Array.isArray(answer.calls)) throw new Error('no calls list')
  } catch {
    throw new Error(`${url} did not answer as GET /admin/calls does (is ${base} an assist-gateway admin listener?)`)
  }
  if (values.json) {
    console.log(JSON.stringify(answer, null, 2))
    return 0
  }
  if (answer.calls.length === 0) {
    const whose = [
      ...(answer.contactId !== undefined ? [`contact ${answer.contactId}`] : []),
      ...(answer.tenant !== undefined ? [`tenant ${answer.tenant}`] : [])
    ].join(' of ')
    console.log(`no live or parked leg of ${whose} (store: ${answer.store})`)
    return 0
  }
  console.log(callsTable(answer.calls, answer.tenant !== undefined))
  return 0
}

/** The `detail` of a problem+json answer, or its start. */
function problemDetail(body: string): string {
  try {
    return String((JSON.parse(body) as { detail?: unknown }).detail)
  } catch {
    return body.slice(0, 300)
  }
}
