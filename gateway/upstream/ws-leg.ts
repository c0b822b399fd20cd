import WebSocket from 'ws'
import type { Clock } from '../clock'
import { type Beating, heartbeatOf } from './heartbeat'

/**
 * Why a vendor socket failed, as a value (never a string to parse back). `upgrade`: the vendor answered
 * the upgrade request with this HTTP status; `network`: connect, TLS or socket error (the library's
 * code); `missed-pong`: the heartbeat found the vendor gone; `closed-before-open`: no reason known;
 * `grpc`: a gRPC call (upstream/grpc-leg.ts) ended with this status code.
 */
export type SocketFailure =
  | { readonly kind: 'upgrade'; readonly status: number }
  | { readonly kind: 'network'; readonly code: string }
  | { readonly kind: 'missed-pong' }
  | { readonly kind: 'closed-before-open' }
  | { readonly kind: 'grpc'; readonly status: number }

/** A short text for logs and error details (never a URL: it may hold credentials). */
export function describeSocketFailure(f: SocketFailure): string {
  switch (f.kind) {
    case 'upgrade':
      return `HTTP ${f.status}`
    case 'network':
      return f.code
    case 'missed-pong':
      return 'missed pong'
    case 'closed-before-open':
      return 'closed before open'
    case 'grpc':
      return `gRPC status ${f.status}`
  }
}

/** What a vendor socket tells its owner. Exactly one of onOpen / onClose(opened=false) follows a connect. */
export interface VendorEvents {
  onOpen: () => void
  onText: (text: string) => void
  /** A binary frame (the buffer is the library's: read it before returning). */
  onBinary: (data: Buffer) => void
  /** `opened` false: the connection never opened; `failure` says why when known (always set then). */
  onClose: (code: number, reason: string, opened: boolean, failure: SocketFailure | null) => void
  /** A heartbeat ping is about to go out / its pong came back: the vendor read everything sent before that ping. */
  onPing?: () => void
  onPong?: () => void
}

const BINARY = { binary: true } as const
const TEXT = { binary: false } as const

/**
 * One vendor WebSocket (the `ws` client: measured cheaper per frame than undici's WebSocket here, see
 * docs/concepts/architecture.md, "Choices"). Sends are synchronous copies: `ws` masks a client frame into a fresh buffer, so the
 * caller's memory (uWS neuters it on return) is never referenced after `sendBinary` returns.
 */
export class VendorSocket implements Beating {
  private readonly ws: WebSocket
  private opened = false
  private finished = false
  private failure: SocketFailure | null = null
  /** Watched by the clock's one heartbeat (upstream/heartbeat.ts `startHeartbeat`). */
  private watched = false
  /** The heartbeat's view (`Beating`): the last read, a ping unanswered, the settings. */
  heardAt = 0
  pingOut = false
  pingMs = 0
  windowMs = 0
  /** A heartbeat ping is due: it goes out with the next write, or alone at the next tick (`pingDue`). */
  private due = false
  /** Bytes handed to the socket so far, and the bytes it still held when it was lost (never read by the vendor). */
  bytesSent = 0
  unreadAtLoss = -1

  constructor(
    url: string,
    opts: {
      headers: Record<string, string>
      connectTimeoutMs: number
      maxPayloadBytes?: number
      /** Skip certificate checks: only for this gateway's own loopback listener (a join relay between workers). */
      loopbackTls?: boolean
    },
    private readonly clock: Clock,
    private readonly events: VendorEvents
  ) {
    this.ws = new WebSocket(url, {
      headers: opts.headers,
      handshakeTimeout: opts.connectTimeoutMs,
      perMessageDeflate: false,
      maxPayload: opts.maxPayloadBytes ?? 1 << 20,
      followRedirects: false,
      ...(opts.loopbackTls === true ? { rejectUnauthorized: false } : {})
    })
    this.ws.on('open', () => {
      this.opened = true
      this.events.onOpen()
    })
    this.ws.on('message', (data: Buffer, isBinary: boolean) => {
      // Any message is a sign of life: a vendor that speaks is never pinged (upstream/heartbeat.ts).
      this.heardAt = this.clock.now()
      this.due = false
      if (isBinary) this.events.onBinary(data)
      else this.events.onText(data.toString('utf8'))
    })
    // With a listener here `ws` leaves the refused upgrade to us: keep its status, then abort.
    this.ws.on('unexpected-response', (_req, res) => {
      this.failure ??= { kind: 'upgrade', status: res.statusCode ?? 0 }
      this.ws.terminate()
    })
    this.ws.on('error', (err: Error & { code?: string }) => {
      // Translate once, at the edge: keep the library's code, never its message (it may hold the URL).
      this.failure ??= { kind: 'network', code: err.code ?? err.name }
    })
    this.ws.on('pong', () => {
      this.heardAt = this.clock.now()
      this.pingOut = false
      this.events.onPong?.()
    })
    this.ws.on('close', (code: number, reason: Buffer) => {
      this.noteUnread()
      this.stopHeartbeat()
      if (this.finished) return
      this.finished = true
      const failure = this.failure ?? (this.opened ? null : ({ kind: 'closed-before-open' } as const))
      this.events.onClose(code, reason.toString('utf8'), this.opened, failure)
    })
  }

  get isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN
  }

  /** Bytes queued towards the vendor (socket buffer plus the sender's own queue). */
  get bufferedAmount(): number {
    return this.ws.bufferedAmount
  }

  /** Per-frame path: one masked copy into a frame buffer; no other work (a due ping rides along). */
  sendBinary(data: ArrayBuffer | Uint8Array): void {
    if (this.due) return this.sendWithPing(data, BINARY, data.byteLength)
    this.ws.send(data, BINARY)
    this.bytesSent += data.byteLength
  }

  sendText(text: string): void {
    if (this.due) return this.sendWithPing(text, TEXT, text.length)
    this.ws.send(text)
    this.bytesSent += text.length
  }

  /**
   * The write, then the due ping behind it, in one system call: the socket is corked around both, so the
   * ping costs no write of its own (a ping per second per leg alone was about a sixth of the audio
   * path's CPU, bench `audio --vs-nginx --vendor-ping-seconds 1,0`). Its pong answers this write too.
   */
  private sendWithPing(data: ArrayBuffer | Uint8Array | string, opts: typeof BINARY | typeof TEXT, n: number): void {
    // `ws` keeps its net.Socket as `_socket` (ws is pinned exactly); without it the two writes go apart.
    const socket = (this.ws as unknown as { _socket?: { cork(): void; uncork(): void } })._socket
    socket?.cork()
    this.ws.send(data, opts)
    this.bytesSent += n
    this.pingNow()
    socket?.uncork()
  }

  /** Keep what the socket still holds before it is torn down (the first time only). */
  private noteUnread(): void {
    if (this.unreadAtLoss < 0) this.unreadAtLoss = this.ws.bufferedAmount
  }

  /**
   * Watched by the clock's one heartbeat (upstream/heartbeat.ts): silent for `ms` (no message, no pong),
   * it is pinged; silent for `ms + timeoutMs`, the vendor (or the path to it) is gone without a
   * close: the socket is terminated and reported closed with 1006 (`missed-pong`). A frozen vendor is
   * thus found within `ms + timeoutMs` of the last thing it sent, and one tick. A due ping waits for the
   * next write to go out with it (`sendWithPing`: no write of its own), at most one tick; with nothing
   * written for a tick it goes alone.
   */
  startHeartbeat(ms: number, timeoutMs = ms): void {
    if (ms <= 0 || this.watched) return
    this.pingMs = ms
    this.windowMs = ms + timeoutMs
    this.heardAt = this.clock.now()
    this.watched = true
    heartbeatOf(this.clock).watch(this)
  }

  private stopHeartbeat(): void {
    if (!this.watched) return
    this.watched = false
    this.due = false
    heartbeatOf(this.clock).forget(this)
  }

  /** The heartbeat: silent for `pingMs`. Due since the last tick and nothing written since: alone now. */
  pingDue(): void {
    if (this.due) this.pingNow()
    else this.due = true
  }

  /** The heartbeat: silent for `windowMs`. */
  lost(): void {
    this.watched = false
    this.due = false
    this.failure ??= { kind: 'missed-pong' }
    this.noteUnread()
    this.ws.terminate()
  }

  /**
   * A ping now, unless one is already out (its pong comes first) or the heartbeat is off: false then.
   * Its pong (`onPong`) says the vendor read everything sent before it.
   */
  pingNow(): boolean {
    if (!this.watched || this.pingOut || !this.isOpen) return false
    this.due = false
    this.pingOut = true
    this.events.onPing?.()
    this.ws.ping()
    return true
  }

  /** Pings run on this socket (a heartbeat was started and it is open). */
  get pinging(): boolean {
    return this.watched && this.isOpen
  }

  /** Stop reading from the vendor (the platform side is backed up). */
  pause(): void {
    if (this.isOpen) this.ws.pause()
  }

  resume(): void {
    if (this.isOpen) this.ws.resume()
  }

  /** Graceful close: queued data and the close frame go out first. */
  close(code: number, reason: string): void {
    if (this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate()
    else if (this.ws.readyState === WebSocket.OPEN) this.ws.close(code, reason)
  }

  /** Abort at once (connect in progress, or the leg is being torn down after a failure). */
  terminate(): void {
    this.noteUnread()
    this.ws.terminate()
  }
}
