import type { IncomingMessage, ServerResponse } from 'node:http'
import { redact } from './demo-audio'
import type { EmulatorKind, TextBehaviour, TextRequestReport } from './demo-types'
import { isObject, parseJson, REDACTED, reply, type Json } from './wire'

// The text side of the bundled demo vendors (see TextBehaviour for the two shapes).

const MAX_BODY = 1024 * 1024
const REPORT_PATHS = new Set(['/sessions', '/healthz', '/text-requests'])
const JSON_EVENTS_PATH = /^\/v1\/conversations\/[^/]+\/messages$/
const MAX_TEXT_REPORTS = 10000
const ROLES = ['customer', 'agent', 'system']
const TEXT_FIELDS = new Set(['conversationId', 'businessUnit', 'tenant', 'role', 'text', 'attachments', 'config'])

/** json-events text request: the first problem as "field: what is wrong", or null. Strict, as a real REST API. */
export function checkTextMessage(msg: Json, path: string): string | null {
  for (const k of Object.keys(msg)) if (!TEXT_FIELDS.has(k)) return `${k}: unknown field`
  if (typeof msg.conversationId !== 'string' || !/^[0-9]+$/.test(msg.conversationId))
    return 'conversationId: must be a string of digits'
  if (decodeURIComponent(path.split('/')[3]) !== msg.conversationId) return 'conversationId: must match the path'
  if (!Number.isInteger(msg.businessUnit)) return 'businessUnit: must be an integer'
  if (typeof msg.tenant !== 'string' || msg.tenant === '') return 'tenant: must be a non-empty string'
  if (typeof msg.role !== 'string' || !ROLES.includes(msg.role)) return `role: must be one of ${ROLES.join(', ')}`
  if (typeof msg.text !== 'string') return 'text: must be a string'
  if ('attachments' in msg && !isObject(msg.attachments)) return 'attachments: must be an object'
  if ('config' in msg && !isObject(msg.config)) return 'config: must be an object'
  return null
}

/** passthrough text request: the platform's WebHooksMessagesRequest, loosely checked. */
export function checkPlatformUtterance(msg: Json): string | null {
  if (typeof msg.messageBody !== 'string') return 'messageBody: must be a string'
  if (typeof msg.participantId !== 'string') return 'participantId: must be a string'
  if (!('contactId' in msg)) return 'contactId: is required'
  return null
}

/** One text request being answered: its report and the HTTP response. */
interface Exchange {
  req: IncomingMessage
  res: ServerResponse
  report: TextRequestReport
}

/** The demo vendors' text endpoints: validate, answer as `TextBehaviour` says, keep a report of each request. */
export class TextEndpoints {
  private behaviour: TextBehaviour
  private readonly reports: TextRequestReport[] = []
  private nextId = 0

  constructor(
    private readonly kind: EmulatorKind,
    behaviour: TextBehaviour,
    private readonly log: ((line: string) => void) | undefined
  ) {
    this.behaviour = { ...behaviour }
  }

  /** Whether a request goes to the text endpoints (the report paths never do). */
  serves(method: string | undefined, path: string): boolean {
    if (method !== 'POST') return false
    return this.kind === 'passthrough' ? !REPORT_PATHS.has(path) : JSON_EVENTS_PATH.test(path)
  }

  set(behaviour: TextBehaviour): void {
    this.behaviour = { ...behaviour }
  }

  /** The last 10,000 requests, oldest first. */
  requests(): TextRequestReport[] {
    return this.reports.slice(-MAX_TEXT_REPORTS)
  }

  handle(req: IncomingMessage, res: ServerResponse, path: string): void {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size <= MAX_BODY) chunks.push(c)
    })
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8')
      const parsed = parseJson(raw)
      const report = this.record(req, path, parsed, raw.length)
      const x: Exchange = { req, res, report }
      if (size > MAX_BODY) return this.refuse(x, 413, 'too_large', 'body too large')
      if (!/^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? ''))
        return this.refuse(x, 415, 'unsupported_media_type', 'content-type must be application/json')
      if (!parsed.ok || !isObject(parsed.value)) return this.refuse(x, 400, 'bad_request', 'body must be a JSON object')
      this.answerValid(x, parsed.value, this.behaviour)
    })
  }

  private record(
    req: IncomingMessage,
    path: string,
    parsed: ReturnType<typeof parseJson>,
    length: number
  ): TextRequestReport {
    const headers: Record<string, string> = {}
    for (const [k, v] of Object.entries(req.headers)) {
      if (v !== undefined) headers[k] = k === 'authorization' ? REDACTED : Array.isArray(v) ? v.join(', ') : v
    }
    const report: TextRequestReport = {
      id: ++this.nextId,
      method: req.method ?? 'POST',
      path,
      headers,
      // Text that is not JSON is not kept: it may hold a credential.
      body: parsed.ok ? redact(parsed.value, 'authorizationHeader') : { unparsed: `${length} chars` },
      status: null,
      error: null,
      receivedAt: Date.now()
    }
    this.reports.push(report)
    // Trimmed in bulk: a one-by-one shift of a long array would cost the emulator more than its answer.
    if (this.reports.length >= 2 * MAX_TEXT_REPORTS) this.reports.splice(0, this.reports.length - MAX_TEXT_REPORTS)
    return report
  }

  /** A well-formed JSON body: credential, the kind's own checks, then the answer `b` asks for. */
  private answerValid(x: Exchange, body: Json, b: TextBehaviour): void {
    const jsonEvents = this.kind === 'json-events'
    if (b.token !== undefined) {
      const presented = jsonEvents ? x.req.headers.authorization : body.authorizationHeader
      const expected = jsonEvents ? `Bearer ${b.token}` : b.token
      if (presented !== expected) return this.refuse(x, 401, 'unauthorized', 'credential missing or wrong')
    }
    const problem = jsonEvents ? checkTextMessage(body, x.report.path) : checkPlatformUtterance(body)
    if (problem !== null) return this.refuse(x, 400, 'bad_request', problem)
    if (b.hang === true) return
    const go = (): void => this.answerOk(x, body, b)
    if ((b.delayMs ?? 0) > 0) setTimeout(go, b.delayMs)
    else go()
  }

  private answerOk(x: Exchange, body: Json, b: TextBehaviour): void {
    if (b.status !== undefined && (b.status < 200 || b.status > 299)) {
      const message = `emulated ${b.status}`
      return this.answer(
        x,
        b.status,
        this.kind === 'json-events'
          ? { error: { code: 'vendor_failure', message } }
          : { command: 'ERROR', messageType: 'VENDOR_FAILURE', message, parameters: {} }
      )
    }
    if (this.kind === 'json-events') {
      const echo = `echo: ${body.text as string}`
      this.answer(x, 200, {
        data: {
          conversationId: body.conversationId,
          role: body.role,
          reply: echo,
          suggestions: [{ type: 'reply', text: echo, confidence: 0.9 }]
        },
        meta: { vendor: 'json-events-emulator', seq: x.report.id, requestId: x.req.headers['x-request-id'] ?? null }
      })
    } else {
      this.answer(x, 200, {
        command: 'MESSAGE',
        messageType: 'SUGGESTION',
        message: `echo: ${body.messageBody as string}`,
        parameters: { contactId: body.contactId, participantId: body.participantId, seq: x.report.id }
      })
    }
  }

  private answer(x: Exchange, status: number, body: unknown): void {
    x.report.status = status
    if (!x.res.destroyed) reply(x.res, status, body)
  }

  private refuse(x: Exchange, status: number, code: string, message: string): void {
    x.report.error = message
    this.log?.(`text ${x.report.id} refused ${status}: ${message}`)
    this.answer(
      x,
      status,
      this.kind === 'json-events'
        ? { error: { code, message } }
        : { command: 'ERROR', messageType: code, message, parameters: {} }
    )
  }
}
