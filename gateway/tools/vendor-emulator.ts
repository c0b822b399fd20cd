/**
 * The bundled demo vendors, `passthrough` (the platform's own protocol) and `json-events` (a
 * vendor-shaped JSON protocol), audio over WebSocket at `/stream` and text over HTTP; used by the
 * demo config, `assist-gateway vendor` and the tests. Audio: vendors/demo-audio.ts; text:
 * vendors/demo-text.ts; both on the session recorder every emulator shares (vendors/recorder.ts).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { WebSocketServer, type RawData, type WebSocket } from 'ws'
import { listenEmulator } from './emulator-server'
import { DemoAudio, DemoSession } from './vendors/demo-audio'
import { TextEndpoints } from './vendors/demo-text'
import type { EmulatorKind, EmulatorOptions, VendorEmulator } from './vendors/demo-types'
import { emulatorClock } from './vendors/recorder'
import { rawToBuffer, refuse, reply } from './vendors/wire'

export { checkStartEvent } from './vendors/demo-audio'
export { checkPlatformUtterance, checkTextMessage } from './vendors/demo-text'
export type {
  EmulatorKind,
  EmulatorOptions,
  SessionReport,
  TextBehaviour,
  TextRequestReport,
  VendorEmulator
} from './vendors/demo-types'

const MAX_PAYLOAD = 1024 * 1024

/** The HTTP side: session reports, health, text requests received, the text endpoints. */
function onRequest(req: IncomingMessage, res: ServerResponse, all: DemoSession[], text: TextEndpoints): void {
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
    reply(res, 200, text.requests())
  } else if (text.serves(req.method, path)) {
    text.handle(req, res, path)
  } else {
    reply(res, 404, { error: 'not found' })
  }
}

/** What an emulator keeps of its sessions: every one (the reports), the open ones (to drop, close, pause). */
interface Sessions {
  readonly all: DemoSession[]
  readonly live: Set<DemoSession>
}

function demoAudio(kind: EmulatorKind, opts: EmulatorOptions): DemoAudio {
  return new DemoAudio({
    kind,
    resultEvery: opts.resultEveryFrames ?? 50,
    byAudio: opts.resultsByAudio ?? false,
    readyDelayMs: opts.readyDelayMs ?? 0,
    token: opts.token,
    earlyResults: opts.earlyResults ?? 0,
    echo: opts.echo ?? false
  })
}

/** An upgraded socket becomes a session: recorded, its messages fed to the demo audio, live until it closes. */
function openSession(
  ws: WebSocket,
  req: IncomingMessage,
  sessions: Sessions,
  audio: DemoAudio,
  opts: EmulatorOptions
): void {
  const path = req.url ?? '/'
  // Ids count from 1 in the order sessions opened.
  const s = new DemoSession(sessions.all.length + 1, opts.kind, path, ws, opts.clock ?? emulatorClock, opts.log)
  s.upgrade = { url: path, headers: { ...req.headers } }
  s.vendor = opts.name
  sessions.all.push(s)
  sessions.live.add(s)
  s.say(`opened ${path}`)
  ws.on('message', (data: RawData, isBinary: boolean) => {
    const buf = rawToBuffer(data)
    if (isBinary) audio.binary(s, buf)
    else audio.text(s, buf.toString('utf8'))
  })
  ws.on('error', (err: Error) => {
    s.errors.push(`socket error: ${err.message}`)
  })
  ws.on('close', (code: number, reason: Buffer) => {
    s.markClosed(code, reason.toString('utf8'))
    sessions.live.delete(s)
    s.say(`closed ${code} ${s.closeReason} frames=${s.frames} bytes=${s.bytes}`)
  })
}

export async function startVendorEmulator(opts: EmulatorOptions): Promise<VendorEmulator> {
  const kind = opts.kind
  if (kind !== 'passthrough' && kind !== 'json-events') {
    return Promise.reject(new Error(`unknown emulator kind: ${String(kind)}`))
  }
  const audio = demoAudio(kind, opts)
  const text = new TextEndpoints(kind, opts.text ?? {}, opts.log)
  const sessions: Sessions = { all: [], live: new Set() }
  const { all, live } = sessions
  let refused = 0

  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_PAYLOAD })
  const server = createServer((req, res) => onRequest(req, res, all, text))
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (opts.refuseUpgrade !== undefined) {
      refused++
      socket.on('error', () => socket.destroy())
      return refuse(socket, opts.refuseUpgrade, { error: 'sessions refused (refuseUpgrade)' })
    }
    wss.handleUpgrade(req, socket, head, ws => openSession(ws, req, sessions, audio, opts))
  })

  const l = await listenEmulator(server, wss, opts.host ?? '127.0.0.1', opts.port ?? 0, () => {
    for (const s of live) s.terminate()
  })
  return {
    kind,
    port: l.port,
    url: `${l.wsBase}/stream`,
    httpUrl: l.httpUrl,
    sessions: () => all.map(s => s.report()),
    textRequests: () => text.requests().map(r => ({ ...r })),
    setText: behaviour => text.set(behaviour),
    dropAll: () => {
      for (const s of live) s.terminate()
    },
    closeAll: (code: number, reason?: string) => {
      for (const s of live) s.close(code, reason)
    },
    pauseAll: () => {
      for (const s of live) s.ws?.pause()
    },
    resumeAll: () => {
      for (const s of live) s.ws?.resume()
    },
    refusedUpgrades: () => refused,
    close: l.close
  }
}
