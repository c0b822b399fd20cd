import { randomUUID } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { WebSocketServer, type RawData, type WebSocket } from 'ws'
import { listenEmulator } from '../emulator-server'
import { AssemblyAiStream, assemblyaiToken } from './assemblyai'
import { AudioHookSession } from './audiohook'
import { audiohookUpgrade } from './audiohook-checks'
import { DeepgramStream, deepgramUpgrade } from './deepgram'
import { emulatorClock } from './recorder'
import { FrameSequence } from './sequence'
import { VendorSession, type Context, type Protocol, type Verdict } from './session'
import { OpenAiRealtimeSession, openaiHttp, openaiUpgrade } from './openai'
import { SpeechmaticsSession, speechmaticsUpgrade } from './speechmatics'
import { TranscribeStream, transcribeUpgrade } from './transcribe'
import { TwilioMediaStream, twilioUpgrade } from './twilio-media'
import {
  type HttpRequestRecord,
  REAL_VENDOR_PATHS,
  type RealVendorEmulator,
  type RealVendorKind,
  type RealVendorOptions
} from './types'
import { header, parseJson, rawToBuffer, redactHeaders, redactQuery, refuse, reply, type Json } from './wire'

const MAX_PAYLOAD = 4 * 1024 * 1024

/** Each vendor's upgrade check (the HTTP answer before the socket exists). */
const UPGRADES: Record<RealVendorKind, (req: IncomingMessage, q: URLSearchParams, ctx: Context) => Verdict> = {
  deepgram: (req, q, ctx) => deepgramUpgrade(req, q, ctx.opts.apiKey),
  // AssemblyAI checks credentials and query after the upgrade, with an Error frame and a close code.
  assemblyai: () => ({ ok: true }),
  'twilio-media': (req, _q, ctx) => twilioUpgrade(req, ctx.opts.apiKey),
  audiohook: (req, _q, ctx) => audiohookUpgrade(req, ctx.opts.apiKey),
  'amazon-transcribe': (req, q, ctx) => transcribeUpgrade(req, q, ctx.opts.aws, ctx.clock.now()),
  speechmatics: (req, q, ctx) => speechmaticsUpgrade(req, q, ctx.opts.apiKey),
  openai: (req, q, ctx) => openaiUpgrade(req, q, ctx.opts.apiKey)
}

/** A request to a vendor's own HTTP endpoint: the request, its path, query and body, and the count so far. */
interface ApiCall {
  req: IncomingMessage
  path: string
  q: URLSearchParams
  body: Buffer
  ctx: Context
  /** Chat completion requests so far, this one included (the scripted rate limit counts them). */
  requests: number
}

/** Each vendor's own HTTP endpoints (health probes, text APIs), with its credential rule; null: not one. */
const HTTP_API: Partial<Record<RealVendorKind, (c: ApiCall) => Answer | null>> = {
  assemblyai: c =>
    c.req.method === 'GET' && c.path === '/v3/token'
      ? assemblyaiToken(header(c.req, 'authorization'), c.q, c.ctx.opts.apiKey)
      : null,
  openai: c => openaiHttp(c.req, c.path, c.body, c.ctx, c.requests)
}

type Answer = { status: number; body: Json | string; headers?: Record<string, string> }
const MAX_BODY = 1024 * 1024

/** Each vendor's side of an accepted session. */
const PROTOCOLS: Record<RealVendorKind, (s: VendorSession, ctx: Context, requestId: string) => Protocol> = {
  deepgram: (s, ctx, requestId) => new DeepgramStream(s, ctx, requestId),
  assemblyai: (s, ctx) => new AssemblyAiStream(s, ctx),
  'twilio-media': (s, ctx) => new TwilioMediaStream(s, ctx),
  audiohook: (s, ctx) => new AudioHookSession(s, ctx),
  'amazon-transcribe': (s, ctx) => new TranscribeStream(s, ctx),
  speechmatics: (s, ctx) => new SpeechmaticsSession(s, ctx),
  openai: (s, ctx) => new OpenAiRealtimeSession(s, ctx)
}

export async function startRealVendor(opts: RealVendorOptions): Promise<RealVendorEmulator> {
  const kind = opts.kind
  if (!(kind in REAL_VENDOR_PATHS)) return Promise.reject(new TypeError(`unknown real vendor kind: ${String(kind)}`))
  const resultEveryMs = opts.resultEveryMs ?? 1000
  if (!(resultEveryMs >= 0)) return Promise.reject(new TypeError('resultEveryMs must be ≥ 0'))
  for (const name of ['idleCloseMs', 'inactivityTimeoutMs'] as const) {
    const v = opts[name]
    if (v !== undefined && !(v > 0)) return Promise.reject(new TypeError(`${name} must be > 0`))
  }
  const emulator = new RealVendorServer(opts, { opts, resultEveryMs, clock: opts.clock ?? emulatorClock })
  return await emulator.listen()
}

/** One listening real-vendor emulator: its HTTP side (reports, health), upgrades and sessions. */
class RealVendorServer {
  private readonly kind: RealVendorKind
  private readonly vendorPath: string
  private readonly all: VendorSession[] = []
  private readonly requests: HttpRequestRecord[] = []
  private readonly live = new Set<VendorSession>()
  /** Deepgram request ids, set at upgrade so the 101 answer can carry them. */
  private readonly requestIds = new WeakMap<IncomingMessage, string>()
  private readonly wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_PAYLOAD })
  private readonly server: Server
  private nextId = 1
  private paused = false

  constructor(
    private readonly opts: RealVendorOptions,
    private readonly ctx: Context
  ) {
    this.kind = opts.kind
    this.vendorPath = REAL_VENDOR_PATHS[opts.kind]
    this.wss.on('headers', (headers: string[], req: IncomingMessage) => {
      const rid = this.requestIds.get(req)
      if (rid !== undefined) headers.push(`dg-request-id: ${rid}`)
    })
    this.server = createServer((req, res) => this.onRequest(req, res))
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.onUpgrade(req, socket, head))
  }

  async listen(): Promise<RealVendorEmulator> {
    const l = await listenEmulator(this.server, this.wss, this.opts.host ?? '127.0.0.1', this.opts.port ?? 0, () => {
      for (const s of this.live) s.terminate()
      for (const s of this.all) s.clearTimers()
    })
    return {
      kind: this.kind,
      port: l.port,
      url: `${l.wsBase}${this.vendorPath}`,
      httpUrl: l.httpUrl,
      sessions: () => this.all.filter(s => !s.probe).map(s => s.report()),
      probes: () => this.all.filter(s => s.probe).map(s => s.report()),
      httpRequests: () => this.requests.map(r => ({ ...r })),
      dropAll: () => {
        for (const s of this.live) s.terminate()
      },
      closeAll: (code: number, reason?: string) => {
        for (const s of this.live) s.close(code, reason)
      },
      pauseAll: () => {
        this.paused = true
        for (const s of this.live) s.ws?.pause()
      },
      resumeAll: () => {
        this.paused = false
        for (const s of this.live) s.ws?.resume()
      },
      openSessions: () => this.live.size,
      close: l.close
    }
  }

  private onRequest(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (c: Buffer) => {
      size += c.length
      if (size <= MAX_BODY) chunks.push(c)
    })
    req.on('end', () => this.answer(req, res, Buffer.concat(chunks)))
  }

  private answer(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
    const path = (req.url ?? '/').split('?')[0]
    const q = new URL(req.url ?? '/', 'http://emulator').searchParams
    const chats = this.requests.filter(r => r.path === path).length + 1
    const api = HTTP_API[this.kind]?.({ req, path, q, body, ctx: this.ctx, requests: chats })
    if (api !== null && api !== undefined) {
      const text = body.toString('utf8')
      const parsed = text === '' ? undefined : parseJson(text)
      this.requests.push({
        method: req.method ?? '',
        path,
        status: api.status,
        ...(parsed === undefined ? {} : { body: parsed.ok ? parsed.value : text.slice(0, 200) }),
        headers: redactHeaders(req)
      })
      if (typeof api.body === 'string') {
        res.writeHead(api.status, { 'content-length': Buffer.byteLength(api.body), ...api.headers })
        return void res.end(api.body)
      }
      return reply(res, api.status, api.body, api.headers)
    }
    if (req.method === 'GET' && path === '/sessions')
      reply(
        res,
        200,
        this.all.map(s => s.report())
      )
    else if (req.method === 'GET' && path === '/healthz') reply(res, 200, { ok: true, kind: this.kind })
    else reply(res, 404, { error: 'not found' })
  }

  private onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy())
    const url = new URL(req.url ?? '/', 'http://emulator')
    if (url.pathname !== this.vendorPath) {
      const error = `no WebSocket endpoint at ${url.pathname}; this ${this.kind} emulator serves ${this.vendorPath}`
      return refuse(socket, 404, { error })
    }
    const q = url.searchParams
    const s = new VendorSession(
      this.nextId++,
      this.kind,
      url.pathname,
      redactQuery(q),
      q,
      redactHeaders(req),
      req,
      this.ctx.clock,
      this.opts.log
    )
    s.vendor = this.opts.name
    if (this.opts.sequencedFrames === true) s.sequence = new FrameSequence()
    if ((this.opts.recordFrames ?? 0) > 0) s.rawFrames = []
    this.all.push(s)
    const extra: Record<string, string> = {}
    if (this.kind === 'deepgram') {
      const rid = randomUUID()
      this.requestIds.set(req, rid)
      extra['dg-request-id'] = rid
    }
    const verdict = UPGRADES[this.kind](req, q, this.ctx)
    if (!verdict.ok) {
      s.markRejected(verdict.status, verdict.error)
      s.say(`upgrade refused ${verdict.status}: ${verdict.error}`)
      const rid = extra['dg-request-id']
      const body =
        verdict.body === undefined
          ? { error: verdict.error }
          : { ...(verdict.body as Json), ...(rid ? { request_id: rid } : {}) }
      return refuse(socket, verdict.status, body, { ...extra, ...verdict.headers })
    }
    this.wss.handleUpgrade(req, socket, head, ws => this.accept(s, ws, this.requestIds.get(req) ?? ''))
  }

  private accept(s: VendorSession, ws: WebSocket, requestId: string): void {
    s.ws = ws
    this.live.add(s)
    if (this.paused) ws.pause()
    s.say(`opened ${s.path}`)
    const protocol = PROTOCOLS[this.kind](s, this.ctx, requestId)
    ws.on('message', (data: RawData, isBinary: boolean) => {
      const buf = rawToBuffer(data)
      if (isBinary && s.rawFrames !== null && s.rawFrames.length < (this.opts.recordFrames ?? 0))
        s.rawFrames.push(buf.toString('base64'))
      try {
        if (isBinary) protocol.binary(buf)
        else protocol.text(buf.toString('utf8'), buf)
      } catch (err) {
        s.note(`emulator bug: ${(err as Error).stack ?? String(err)}`)
      }
    })
    ws.on('error', (err: Error) => s.note(`socket error: ${err.message}`))
    ws.on('close', (code: number, reason: Buffer) => {
      this.live.delete(s)
      s.markClosed(code, reason.toString('utf8'))
      protocol.closed(code, s.closingByUs)
      s.say(`closed ${code} ${s.closeReason} frames=${s.frames} audioBytes=${s.audioBytes} errors=${s.errors.length}`)
    })
    protocol.open()
  }
}
