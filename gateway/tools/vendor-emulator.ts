import { listenEmulator } from './emulator-server'
import { createHash, type Hash } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { WebSocket, WebSocketServer, type RawData } from 'ws'

export type EmulatorKind = 'passthrough' | 'json-events'

export interface EmulatorOptions {
  kind: EmulatorKind
  /** 0 = ephemeral (default). */
  port?: number
  /** Default 127.0.0.1. */
  host?: string
  /** Default 50; 0 = never. */
  resultEveryFrames?: number
  /** Default 0: delay before the ready answer. */
  readyDelayMs?: number
  /** passthrough: required authenticationToken. */
  token?: string
  /** Default: no logging. */
  log?: (line: string) => void
  /** Text endpoints: how to answer (changeable later with setText). */
  text?: TextBehaviour
}

/**
 * How the text endpoints answer. Text requests: passthrough takes the platform's JSON
 * (WebHooksMessagesRequest) by POST on any path but the report paths and answers a
 * PlatformWebSocketMessage-shaped JSON; json-events takes its own REST shape,
 * `POST /v1/conversations/{conversationId}/messages` with `{conversationId, businessUnit, tenant,
 * role: customer|agent|system, text, attachments?, config?}` (strict: unknown fields, wrong types or a
 * conversationId unlike the path's are 400) and answers `{data: {conversationId, role, reply,
 * suggestions}, meta}`.
 */
export interface TextBehaviour {
  /** Wait this long before answering (default 0). */
  delayMs?: number
  /** Never answer: the request stays open until the client gives up or the emulator closes. */
  hang?: boolean
  /** Answer every valid request with this status (e.g. 500, 502) and a JSON error body. */
  status?: number
  /** Required credential: json-events `authorization: Bearer <token>`; passthrough body `authorizationHeader`. 401 otherwise. */
  token?: string
}

export interface TextRequestReport {
  id: number
  method: string
  path: string
  /** Request headers as received, with authorization redacted. */
  headers: Record<string, string>
  /** Parsed JSON (authorizationHeader redacted), or {unparsed: "<n> chars"}. */
  body: unknown
  /** Status answered; null while unanswered (slow or hanging). */
  status: number | null
  /** The validation problem, when the request was refused as malformed. */
  error: string | null
  receivedAt: number
}

export interface SessionReport {
  id: number
  kind: EmulatorKind
  path: string
  /** First text message, parsed; authenticationToken replaced by "[REDACTED]". */
  open: unknown
  ready: boolean
  frames: number
  bytes: number
  /** Hex sha256 of all binary payload bytes concatenated in arrival order. */
  sha256: string
  firstFrameAt: number | null
  lastFrameAt: number | null
  /** Every text message after the first, parsed (or {unparsed: string}). */
  texts: unknown[]
  /** Protocol violations the emulator saw. */
  errors: string[]
  closed: boolean
  closeCode: number | null
  closeReason: string
  openedAt: number
  closedAt: number | null
}

export interface VendorEmulator {
  readonly kind: EmulatorKind
  readonly port: number
  /** ws://host:port/stream */
  readonly url: string
  readonly httpUrl: string
  sessions(): SessionReport[]
  /** Text requests received (the last 10,000), oldest first. */
  textRequests(): TextRequestReport[]
  /** Change how the text endpoints answer from now on. */
  setText(behaviour: TextBehaviour): void
  /** Abruptly terminates every open session socket (TCP destroy, no close frame): a crashed vendor. */
  dropAll(): void
  /** Sends a close frame to every open session. */
  closeAll(code: number, reason?: string): void
  /** Stops listening, terminates sessions, resolves when fully closed. */
  close(): Promise<void>
}

const MAX_PAYLOAD = 1024 * 1024

type Phase = 'awaiting-open' | 'opened' | 'ready' | 'finished'

type JsonObject = Record<string, unknown>

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function parseText(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch {
    return { ok: false }
  }
}

/** A copy without the credential field (audio: authenticationToken; text: authorizationHeader). */
function redact(value: unknown, field = 'authenticationToken'): unknown {
  if (isObject(value) && field in value) return { ...value, [field]: '[REDACTED]' }
  return value
}

function rawToString(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8')
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8')
  return data.toString('utf8')
}

/** Returns the first problem with a json-events start message as "field path: what is wrong", or null. */
export function checkStartEvent(msg: unknown): string | null {
  if (!isObject(msg)) return 'message must be a JSON object'
  if (msg.event !== 'start') return 'event must be "start"'
  if (typeof msg.streamId !== 'string' || msg.streamId === '') return 'streamId must be a non-empty string'
  const start = msg.start
  if (!isObject(start)) return 'start must be an object'
  if (!Number.isInteger(start.contactId)) return 'start.contactId must be an integer'
  if (!Number.isInteger(start.busNo)) return 'start.busNo must be an integer'
  if (start.track !== 'inbound' && start.track !== 'outbound' && start.track !== 'both') {
    return 'start.track must be one of "inbound", "outbound", "both"'
  }
  const mf = start.mediaFormat
  if (!isObject(mf)) return 'start.mediaFormat must be an object'
  if (mf.encoding !== 'audio/x-mulaw') return 'start.mediaFormat.encoding must be "audio/x-mulaw"'
  if (mf.sampleRate !== 8000) return 'start.mediaFormat.sampleRate must be 8000'
  if (mf.channels !== 1) return 'start.mediaFormat.channels must be 1'
  if ('customParameters' in start && !isObject(start.customParameters)) {
    return 'start.customParameters must be an object when present'
  }
  return null
}

class Session {
  readonly openedAt = Date.now()
  phase: Phase = 'awaiting-open'
  open: unknown = null
  frames = 0
  bytes = 0
  firstFrameAt: number | null = null
  lastFrameAt: number | null = null
  readonly texts: unknown[] = []
  readonly errors: string[] = []
  closeCode: number | null = null
  closeReason = ''
  closedAt: number | null = null
  /** json-events stream id, echoed in every event. */
  streamId = ''
  results = 0
  /** Early/late audio is recorded once, so a flood does not grow errors without bound. */
  earlyAudioNoted = false
  lateAudioNoted = false
  readyTimer: NodeJS.Timeout | null = null
  /** The ready answer (CONNECTED / started) was sent. */
  readySent = false
  private readonly hash: Hash = createHash('sha256')
  private finalDigest: string | null = null

  constructor(
    readonly id: number,
    readonly kind: EmulatorKind,
    readonly path: string,
    readonly ws: WebSocket
  ) {}

  /** Hot path: counting only. */
  addFrame(data: Buffer): void {
    const now = Date.now()
    if (this.firstFrameAt === null) this.firstFrameAt = now
    this.lastFrameAt = now
    this.frames++
    this.bytes += data.length
    this.hash.update(data)
  }

  digest(): string {
    // copy() keeps the running hash usable while the session is still receiving.
    return this.finalDigest ?? this.hash.copy().digest('hex')
  }

  markClosed(code: number, reason: string): void {
    if (this.readyTimer) clearTimeout(this.readyTimer)
    this.readyTimer = null
    this.closeCode = code
    this.closeReason = reason
    this.closedAt = Date.now()
    this.finalDigest = this.hash.digest('hex')
  }

  send(msg: unknown): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg))
  }

  /** Ends the session from our side; later frames are ignored. */
  reject(code: number, reason: string, answer: unknown): void {
    this.phase = 'finished'
    if (this.readyTimer) clearTimeout(this.readyTimer)
    this.readyTimer = null
    this.send(answer)
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(code, reason)
  }

  report(): SessionReport {
    return {
      id: this.id,
      kind: this.kind,
      path: this.path,
      open: this.open,
      ready: this.readySent,
      frames: this.frames,
      bytes: this.bytes,
      sha256: this.digest(),
      firstFrameAt: this.firstFrameAt,
      lastFrameAt: this.lastFrameAt,
      texts: [...this.texts],
      errors: [...this.errors],
      closed: this.closedAt !== null,
      closeCode: this.closeCode,
      closeReason: this.closeReason,
      openedAt: this.openedAt,
      closedAt: this.closedAt
    }
  }
}

export async function startVendorEmulator(opts: EmulatorOptions): Promise<VendorEmulator> {
  const kind = opts.kind
  if (kind !== 'passthrough' && kind !== 'json-events') {
    return Promise.reject(new Error(`unknown emulator kind: ${String(kind)}`))
  }
  const host = opts.host ?? '127.0.0.1'
  const resultEvery = opts.resultEveryFrames ?? 50
  const readyDelayMs = opts.readyDelayMs ?? 0
  const log = opts.log
  const all: Session[] = []
  const live = new Set<Session>()
  let nextId = 1

  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_PAYLOAD })

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0]
    if (req.method === 'GET' && path === '/sessions') {
      reply(
        res,
        200,
        all.map(s => s.report())
      )
    } else if (req.method === 'GET' && (path === '/healthz' || path === '/')) {
      // `/` too: the gateway's default http health probe of a text-only replica asks for it.
      reply(res, 200, { ok: true })
    } else if (req.method === 'GET' && path === '/text-requests') {
      reply(res, 200, texts.slice(-MAX_TEXT_REPORTS))
    } else if (
      req.method === 'POST' &&
      (kind === 'passthrough' ? !REPORT_PATHS.has(path) : JSON_EVENTS_PATH.test(path))
    ) {
      onTextRequest(req, res, path)
    } else {
      reply(res, 404, { error: 'not found' })
    }
  })

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    wss.handleUpgrade(req, socket, head, ws => accept(ws, req.url ?? '/'))
  })

  let text: TextBehaviour = { ...(opts.text ?? {}) }
  const texts: TextRequestReport[] = []
  let textId = 0

  function onTextRequest(req: IncomingMessage, res: ServerResponse, path: string): void {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size <= MAX_PAYLOAD) chunks.push(c)
    })
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8')
      const parsed = parseText(raw)
      const headers: Record<string, string> = {}
      for (const [k, v] of Object.entries(req.headers)) {
        if (v !== undefined) headers[k] = k === 'authorization' ? '[REDACTED]' : Array.isArray(v) ? v.join(', ') : v
      }
      const report: TextRequestReport = {
        id: ++textId,
        method: req.method ?? 'POST',
        path,
        headers,
        // Text that is not JSON is not kept: it may hold a credential.
        body: parsed.ok ? redact(parsed.value, 'authorizationHeader') : { unparsed: `${raw.length} chars` },
        status: null,
        error: null,
        receivedAt: Date.now()
      }
      texts.push(report)
      // Trimmed in bulk: a one-by-one shift of a long array would cost the emulator more than its answer.
      if (texts.length >= 2 * MAX_TEXT_REPORTS) texts.splice(0, texts.length - MAX_TEXT_REPORTS)
      const b = text
      const answer = (status: number, body: unknown): void => {
        report.status = status
        if (!res.destroyed) reply(res, status, body)
      }
      const refuse = (status: number, code: string, message: string): void => {
        report.error = message
        log?.(`text ${report.id} refused ${status}: ${message}`)
        answer(
          status,
          kind === 'json-events'
            ? { error: { code, message } }
            : { command: 'ERROR', messageType: code, message, parameters: {} }
        )
      }
      if (size > MAX_PAYLOAD) return refuse(413, 'too_large', 'body too large')
      if (!/^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? ''))
        return refuse(415, 'unsupported_media_type', 'content-type must be application/json')
      if (!parsed.ok || !isObject(parsed.value)) return refuse(400, 'bad_request', 'body must be a JSON object')
      const body = parsed.value
      if (b.token !== undefined) {
        const presented = kind === 'json-events' ? req.headers.authorization : body.authorizationHeader
        const expected = kind === 'json-events' ? `Bearer ${b.token}` : b.token
        if (presented !== expected) return refuse(401, 'unauthorized', 'credential missing or wrong')
      }
      const problem = kind === 'json-events' ? checkTextMessage(body, path) : checkPlatformUtterance(body)
      if (problem !== null) return refuse(400, 'bad_request', problem)
      if (b.hang === true) return
      const go = (): void => {
        if (b.status !== undefined && (b.status < 200 || b.status > 299)) {
          return answer(
            b.status,
            kind === 'json-events'
              ? { error: { code: 'vendor_failure', message: `emulated ${b.status}` } }
              : { command: 'ERROR', messageType: 'VENDOR_FAILURE', message: `emulated ${b.status}`, parameters: {} }
          )
        }
        if (kind === 'json-events') {
          const echo = `echo: ${body.text as string}`
          answer(200, {
            data: {
              conversationId: body.conversationId,
              role: body.role,
              reply: echo,
              suggestions: [{ type: 'reply', text: echo, confidence: 0.9 }]
            },
            meta: { vendor: 'json-events-emulator', seq: report.id, requestId: req.headers['x-request-id'] ?? null }
          })
        } else {
          answer(200, {
            command: 'MESSAGE',
            messageType: 'SUGGESTION',
            message: `echo: ${body.messageBody as string}`,
            parameters: { contactId: body.contactId, participantId: body.participantId, seq: report.id }
          })
        }
      }
      if ((b.delayMs ?? 0) > 0) setTimeout(go, b.delayMs)
      else go()
    })
  }

  function accept(ws: WebSocket, path: string): void {
    const s = new Session(nextId++, kind, path, ws)
    all.push(s)
    live.add(s)
    log?.(`session ${s.id} opened ${path}`)
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) onBinary(s, data as Buffer)
      else onText(s, rawToString(data))
    })
    ws.on('error', (err: Error) => {
      s.errors.push(`socket error: ${err.message}`)
    })
    ws.on('close', (code: number, reason: Buffer) => {
      s.markClosed(code, reason.toString('utf8'))
      live.delete(s)
      log?.(`session ${s.id} closed ${code} ${s.closeReason} frames=${s.frames} bytes=${s.bytes}`)
    })
  }

  function noteError(s: Session, msg: string): void {
    s.errors.push(msg)
    log?.(`session ${s.id} error: ${msg}`)
  }

  function becomeReady(s: Session, answer: unknown): void {
    const go = (): void => {
      s.readyTimer = null
      if (s.phase !== 'opened') return
      s.phase = 'ready'
      s.readySent = true
      s.send(answer)
    }
    if (readyDelayMs > 0) s.readyTimer = setTimeout(go, readyDelayMs)
    else go()
  }

  function onBinary(s: Session, data: Buffer): void {
    if (s.phase === 'awaiting-open') {
      if (kind === 'passthrough') {
        noteError(s, 'binary frame before init message')
        s.reject(1007, 'init message expected', {
          command: 'ERROR',
          messageType: 'INVALID_MESSAGE',
          message: 'first message must be the JSON init message',
          parameters: {}
        })
      } else {
        noteError(s, 'audio before start')
        s.reject(1008, 'audio before start', {
          event: 'error',
          code: 'audio_before_start',
          message: 'first message must be the start event'
        })
      }
      return
    }
    if (s.phase === 'finished') {
      if (!s.lateAudioNoted) {
        s.lateAudioNoted = true
        noteError(s, kind === 'json-events' ? 'audio after stop' : 'audio after session end')
      }
      return
    }
    s.addFrame(data)
    if (s.phase === 'opened' && !s.earlyAudioNoted) {
      s.earlyAudioNoted = true
      noteError(s, kind === 'passthrough' ? 'audio before CONNECTED' : 'audio before started')
    }
    // Results go only to a ready session, as a real vendor would not answer before its handshake.
    if (resultEvery > 0 && s.frames % resultEvery === 0 && s.phase === 'ready') {
      const seq = ++s.results
      if (kind === 'passthrough') {
        s.send({
          command: 'MESSAGE',
          messageType: 'TRANSCRIPT',
          message: `heard ${s.frames} frames`,
          parameters: { seq, frames: s.frames, bytes: s.bytes, isFinal: true }
        })
      } else {
        s.send({
          event: 'transcript',
          streamId: s.streamId,
          seq,
          text: `heard ${s.frames} frames`,
          isFinal: true,
          frames: s.frames,
          bytes: s.bytes
        })
      }
    }
  }

  function onText(s: Session, text: string): void {
    if (s.phase === 'finished') return
    const parsed = parseText(text)
    if (s.phase === 'awaiting-open') {
      if (kind === 'passthrough') openPassthrough(s, parsed, text.length)
      else openJsonEvents(s, parsed)
      return
    }
    const value = parsed.ok ? parsed.value : { unparsed: text }
    if (kind === 'passthrough') {
      s.texts.push(value)
      return
    }
    if (parsed.ok && isObject(parsed.value) && parsed.value.event === 'stop') {
      s.texts.push(value)
      const stop = parsed.value
      if (stop.streamId !== s.streamId) noteError(s, 'stop: streamId does not match the start event')
      if (!isObject(stop.stop) || typeof stop.stop.reason !== 'string')
        noteError(s, 'stop: stop.reason must be a string')
      s.phase = 'finished'
      if (s.readyTimer) clearTimeout(s.readyTimer)
      s.readyTimer = null
      s.send({ event: 'stopped', streamId: s.streamId, frames: s.frames, bytes: s.bytes })
      if (s.ws.readyState === WebSocket.OPEN) s.ws.close(1000, 'stopped')
      return
    }
    s.texts.push(value)
    const what = !parsed.ok
      ? 'text message is not JSON'
      : isObject(parsed.value) && typeof parsed.value.event === 'string'
        ? `unknown event "${parsed.value.event}"`
        : 'text message has no event field'
    noteError(s, what)
    s.send({ event: 'error', code: 'unknown_event', message: what })
  }

  function openPassthrough(s: Session, parsed: ReturnType<typeof parseText>, length: number): void {
    if (!parsed.ok || !isObject(parsed.value)) {
      // The raw text is not kept: it may hold a token.
      const what = parsed.ok ? 'init message is not a JSON object' : `init message is not JSON (${length} chars)`
      noteError(s, what)
      s.reject(1007, 'invalid init message', {
        command: 'ERROR',
        messageType: 'INVALID_MESSAGE',
        message: what,
        parameters: {}
      })
      return
    }
    const init = parsed.value
    s.open = redact(init)
    if (opts.token !== undefined && init.authenticationToken !== opts.token) {
      noteError(s, 'invalid token')
      s.reject(1008, 'invalid token', {
        command: 'ERROR',
        messageType: 'AUTH_INVALID',
        message: 'invalid token',
        parameters: {}
      })
      return
    }
    s.phase = 'opened'
    becomeReady(s, {
      command: 'CONNECTED',
      messageType: 'COMMAND',
      message: 'BEGIN AUDIO STREAM',
      parameters: { vendor: 'passthrough-emulator', session: s.id }
    })
  }

  function openJsonEvents(s: Session, parsed: ReturnType<typeof parseText>): void {
    const problem = parsed.ok ? checkStartEvent(parsed.value) : 'message is not JSON'
    if (parsed.ok) s.open = redact(parsed.value)
    if (problem !== null) {
      noteError(s, `bad start: ${problem}`)
      s.reject(1008, 'bad start', { event: 'error', code: 'bad_start', message: problem })
      return
    }
    s.streamId = (parsed as { ok: true; value: JsonObject }).value.streamId as string
    s.phase = 'opened'
    becomeReady(s, { event: 'started', streamId: s.streamId })
  }

  const l = await listenEmulator(server, wss, host, opts.port ?? 0, () => {
    for (const s of live) s.ws.terminate()
  })
  return {
    kind,
    port: l.port,
    url: `${l.wsBase}/stream`,
    httpUrl: l.httpUrl,
    sessions: () => all.map(s => s.report()),
    textRequests: () => texts.slice(-MAX_TEXT_REPORTS).map(r => ({ ...r })),
    setText: (behaviour: TextBehaviour) => {
      text = { ...behaviour }
    },
    dropAll: () => {
      for (const s of live) s.ws.terminate()
    },
    closeAll: (code: number, reason?: string) => {
      for (const s of live) {
        if (s.readyTimer) clearTimeout(s.readyTimer)
        s.readyTimer = null
        if (s.ws.readyState === WebSocket.OPEN) s.ws.close(code, reason)
      }
    },
    close: l.close
  }
}

const REPORT_PATHS = new Set(['/sessions', '/healthz', '/text-requests'])
const JSON_EVENTS_PATH = /^\/v1\/conversations\/[^/]+\/messages$/
const MAX_TEXT_REPORTS = 10000
const ROLES = ['customer', 'agent', 'system']
const TEXT_FIELDS = new Set(['conversationId', 'businessUnit', 'tenant', 'role', 'text', 'attachments', 'config'])

/** json-events text request: the first problem as "field: what is wrong", or null. Strict, as a real REST API. */
export function checkTextMessage(msg: JsonObject, path: string): string | null {
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
export function checkPlatformUtterance(msg: JsonObject): string | null {
  if (typeof msg.messageBody !== 'string') return 'messageBody: must be a string'
  if (typeof msg.participantId !== 'string') return 'participantId: must be a string'
  if (!('contactId' in msg)) return 'contactId: is required'
  return null
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}
