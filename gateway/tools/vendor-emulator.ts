import { createHash, type Hash } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
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

function redact(value: unknown): unknown {
  if (isObject(value) && 'authenticationToken' in value) return { ...value, authenticationToken: '[REDACTED]' }
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
    readonly ws: WebSocket,
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
      closedAt: this.closedAt,
    }
  }
}

export function startVendorEmulator(opts: EmulatorOptions): Promise<VendorEmulator> {
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
      reply(res, 200, all.map((s) => s.report()))
    } else if (req.method === 'GET' && path === '/healthz') {
      reply(res, 200, { ok: true })
    } else {
      reply(res, 404, { error: 'not found' })
    }
  })

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    wss.handleUpgrade(req, socket, head, (ws) => accept(ws, req.url ?? '/'))
  })

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
          parameters: {},
        })
      } else {
        noteError(s, 'audio before start')
        s.reject(1008, 'audio before start', {
          event: 'error',
          code: 'audio_before_start',
          message: 'first message must be the start event',
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
          parameters: { seq, frames: s.frames, bytes: s.bytes, isFinal: true },
        })
      } else {
        s.send({
          event: 'transcript',
          streamId: s.streamId,
          seq,
          text: `heard ${s.frames} frames`,
          isFinal: true,
          frames: s.frames,
          bytes: s.bytes,
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
      if (!isObject(stop.stop) || typeof stop.stop.reason !== 'string') noteError(s, 'stop: stop.reason must be a string')
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
        parameters: {},
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
        parameters: {},
      })
      return
    }
    s.phase = 'opened'
    becomeReady(s, {
      command: 'CONNECTED',
      messageType: 'COMMAND',
      message: 'BEGIN AUDIO STREAM',
      parameters: { vendor: 'passthrough-emulator', session: s.id },
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

  return new Promise<VendorEmulator>((resolve, reject) => {
    server.once('error', reject)
    server.listen({ port: opts.port ?? 0, host, backlog: 2048 }, () => {
      server.off('error', reject)
      const port = (server.address() as AddressInfo).port
      const hostPart = host.includes(':') ? `[${host}]` : host
      let closing: Promise<void> | null = null
      resolve({
        kind,
        port,
        url: `ws://${hostPart}:${port}/stream`,
        httpUrl: `http://${hostPart}:${port}`,
        sessions: () => all.map((s) => s.report()),
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
        close: () => {
          closing ??= new Promise<void>((done) => {
            for (const s of live) s.ws.terminate()
            wss.close()
            server.close(() => done())
            server.closeAllConnections()
          })
          return closing
        },
      })
    })
  })
}

function reply(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}
