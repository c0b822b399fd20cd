import type * as uWS from 'uWebSockets.js'
import { GatewayError } from '../errors'
import type { CallRecord, Store } from '../store/port'
import { type AdminGate, guarded } from './admin'
import { sendJson, sendProblem } from './http'
import type { ServerState } from './state'

/** A contact id as the platform numbers them: decimal digits. */
const CONTACT_ID = /^\d{1,40}$/

/** The `contactId` of a query string, or the 400 that answers it (QUERY_INVALID). */
export function contactIdOf(query: string | undefined): string | GatewayError {
  const id = new URLSearchParams(query ?? '').get('contactId')
  if (id === null || id === '')
    return new GatewayError('QUERY_INVALID', { detail: 'contactId is required', pointers: ['contactId'] })
  if (!CONTACT_ID.test(id))
    return new GatewayError('QUERY_INVALID', { detail: 'contactId must be decimal digits', pointers: ['contactId'] })
  return id
}

/** A tenant's name, as the config allows it. */
const TENANT = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/

/** The `tenant` of a query string (null when absent), or the 400 that answers it (QUERY_INVALID). */
export function tenantOf(query: string | undefined): string | null | GatewayError {
  const t = new URLSearchParams(query ?? '').get('tenant')
  if (t === null) return null
  if (!TENANT.test(t))
    return new GatewayError('QUERY_INVALID', { detail: 'tenant must be a tenant name', pointers: ['tenant'] })
  return t
}

/** Oldest first, then by instance and worker: the order a person reads a call's history in. */
function byStart(a: CallRecord, b: CallRecord): number {
  return a.startedAt.localeCompare(b.startedAt) || a.process.localeCompare(b.process)
}

/** How many contacts `GET /admin/calls?all` lists at most (the status page's live calls). */
export const LISTED_CONTACTS = 200

/**
 * `GET /admin/calls?contactId=N`: every live or parked leg of contact N the store knows of (this process
 * alone on the memory store; the fleet on Redis; every worker through the main process), as published
 * by each process (audio/leg/call-book.ts). `GET /admin/calls?all`: every one of the first LISTED_CONTACTS
 * contacts (`more: true` when there are others). `tenant=NAME`: only that tenant's legs (alone, it lists as
 * `all` does). 400 QUERY_INVALID without a numeric contactId, `all` or `tenant`; 503 when the store cannot
 * answer.
 */
export function answerCalls(
  res: uWS.HttpResponse,
  req: uWS.HttpRequest,
  store: Store,
  instance: string,
  /** What the answer covers: `this process`, `workers` (one gateway's), `redis` (the fleet). */
  covers: string
): void {
  const query = req.getQuery()
  const params = new URLSearchParams(query ?? '')
  const tenant = tenantOf(query)
  if (tenant instanceof GatewayError) return sendProblem(res, tenant)
  const all = params.has('all') || (tenant !== null && !params.has('contactId'))
  const id = all ? null : contactIdOf(query)
  if (id instanceof GatewayError) return sendProblem(res, id)
  let aborted = false
  res.onAborted(() => {
    aborted = true
  })
  const found =
    id === null ? store.listCalls(LISTED_CONTACTS) : store.findCalls(id).then(calls => ({ calls, more: false }))
  found.then(
    ({ calls, more }) => {
      if (aborted) return
      const mine = tenant === null ? calls : calls.filter(c => c.tenant === tenant)
      sendJson(res, 200, {
        ...(id === null ? { all: true, more } : { contactId: id }),
        ...(tenant === null ? {} : { tenant }),
        answeredBy: instance,
        store: covers,
        calls: mine.sort(byStart).map(({ at: _a, ...c }) => c)
      })
    },
    (err: unknown) => {
      if (!aborted) sendJson(res, 503, { error: 'the store did not answer', detail: (err as Error).message })
    }
  )
}

/** Mounts `GET /admin/calls` on a process's admin listener (behind its gate). */
export function mountCalls(admin: uWS.TemplatedApp, state: ServerState, gate: AdminGate): void {
  admin.get(
    '/admin/calls',
    guarded(gate, (res, req) => {
      // Published records lag up to a refresh; this process's own are made fresh first.
      state.calls.publish()
      const s = state.store
      answerCalls(res, req, s, s.instanceId, s.kind === 'redis' ? 'redis' : s.shared ? 'workers' : 'this process')
    })
  )
}
