import { type ClientDuplexStream, Metadata, type StatusObject, status as Status } from '@grpc/grpc-js'
import type { Clock } from '../clock'
import { channelFor } from './grpc-channel'
import { grpcTarget } from './grpc-url'
import { audioFrame, fromMessage, toMessage } from './proto-json'
import type { GrpcMethod } from './protos'
import type { SocketFailure, VendorEvents } from './ws-leg'

/**
 * The close code a gRPC status is reported with: 1000 for OK, else 4000 + the status code (WebSocket's
 * private range), so a gRPC stream ends the way a vendor WebSocket does and the mapping's `closeCodes`
 * table (with the defaults of a gRPC mapping, mapping/grpc.ts) gives it a meaning.
 */
export function grpcCloseCode(code: number): number {
  return code === Status.OK ? 1000 : 4000 + code
}

/** The status's name (UNAVAILABLE, …) and its details: the close reason (a vendor's words, never ours). */
function reasonOf(s: StatusObject): string {
  const name = Status[s.code] ?? String(s.code)
  return s.details === '' ? name : `${name}: ${s.details}`
}

/**
 * One gRPC call of a vendor connection, shaped like a vendor WebSocket (upstream/ws-leg.ts VendorSocket):
 * `sendText` takes a request in the protobuf JSON form (the mapping's open, keepalive and close frames),
 * `sendBinary` audio (framed as a request holding only the method's audio field, split at the vendor's
 * per-request limit), every response reaches `onText` as its JSON form, and the call's end is `onClose`
 * with `grpcCloseCode(status)`. `close` half-closes (the vendor sends its last results, then OK);
 * `terminate` cancels. No pings: HTTP/2 keepalive runs on the shared channel (upstream/grpc-channel.ts).
 */
export class GrpcStream {
  private call: ClientDuplexStream<object, object> | null = null
  private opened = false
  private finished = false
  private halfClosed = false
  private failure: SocketFailure | null = null
  /** Bytes handed to the call whose write has not completed yet. */
  private pending = 0
  bytesSent = 0
  unreadAtLoss = -1

  constructor(
    url: string,
    private readonly opts: {
      method: GrpcMethod
      headers: Record<string, string>
      connectTimeoutMs: number
      /** Call credentials (Google's token or API key), asked for before each call; never logged. */
      authHeaders?: () => Promise<Record<string, string>>
    },
    _clock: Clock,
    private readonly events: VendorEvents
  ) {
    this.start(url).catch((err: Error & { code?: string }) => {
      this.failure ??= { kind: 'network', code: err.code ?? 'AUTH' }
      this.ended(1006, '')
    })
  }

  private async start(url: string): Promise<void> {
    const target = grpcTarget(url)
    const client = channelFor(target)
    await new Promise<void>((resolve, reject) =>
      // gRPC deadlines are wall-clock dates (the library's).
      client.waitForReady(Date.now() + this.opts.connectTimeoutMs, err =>
        err === undefined || err === null
          ? resolve()
          : reject(Object.assign(new Error('connect'), { code: 'UNAVAILABLE' }))
      )
    )
    const metadata = new Metadata()
    for (const [k, v] of Object.entries(this.opts.headers)) metadata.set(k.toLowerCase(), v)
    if (this.opts.authHeaders !== undefined)
      for (const [k, v] of Object.entries(await this.opts.authHeaders())) metadata.set(k.toLowerCase(), v)
    if (this.finished) return
    const m = this.opts.method
    const deadline = m.deadlineMs === null ? undefined : Date.now() + m.deadlineMs
    const call = client.makeBidiStreamRequest(
      m.definition.path,
      (v: object) => (Buffer.isBuffer(v) ? v : m.definition.requestSerialize(v)),
      (b: Buffer) => m.definition.responseDeserialize(b),
      metadata,
      deadline === undefined ? {} : { deadline }
    )
    this.call = call
    call.on('data', (msg: object) => this.events.onText(JSON.stringify(fromMessage(m.protos, m.response, msg))))
    call.on('error', () => {}) // the status below says it all
    call.on('status', (s: StatusObject) => {
      if (s.code !== Status.OK && s.code !== Status.CANCELLED) this.failure ??= { kind: 'grpc', status: s.code }
      this.ended(grpcCloseCode(s.code), reasonOf(s))
    })
    this.opened = true
    this.events.onOpen()
  }

  private ended(code: number, reason: string): void {
    if (this.unreadAtLoss < 0) this.unreadAtLoss = this.pending
    if (this.finished) return
    this.finished = true
    // A cancel of ours is an abnormal close, as a terminated WebSocket's 1006.
    const c = code === grpcCloseCode(Status.CANCELLED) ? 1006 : code
    const failure = this.failure ?? (this.opened ? null : ({ kind: 'closed-before-open' } as const))
    this.events.onClose(c, reason, this.opened, failure)
  }

  get isOpen(): boolean {
    return this.call !== null && !this.finished && !this.halfClosed
  }

  get bufferedAmount(): number {
    return this.pending
  }

  /** Audio: one framed request per `maxAudioBytes` (a write is one platform frame or a coalesced chunk). */
  sendBinary(data: ArrayBuffer | Uint8Array): void {
    const call = this.call
    const field = this.opts.method.audioField
    if (call === null || field === null || !this.isOpen) return
    const bytes = data instanceof Uint8Array ? data : new Uint8Array(data)
    const max = this.opts.method.maxAudioBytes
    for (let from = 0; from < bytes.byteLength; from += max) {
      const to = Math.min(bytes.byteLength, from + max)
      this.write(call, audioFrame(field, bytes, from, to), to - from)
    }
  }

  /** A request in the protobuf JSON form; a field the message does not have ends the call as INVALID_ARGUMENT would. */
  sendText(text: string): void {
    const call = this.call
    if (call === null || !this.isOpen) return
    const m = this.opts.method
    const out = toMessage(m.protos, m.request, JSON.parse(text))
    if (!out.ok) {
      this.failure ??= { kind: 'grpc', status: Status.INVALID_ARGUMENT }
      call.cancel()
      this.ended(
        grpcCloseCode(Status.INVALID_ARGUMENT),
        `INVALID_ARGUMENT (the gateway's): ${out.path}: ${out.message}`
      )
      return
    }
    this.write(call, out.value, text.length)
  }

  private write(call: ClientDuplexStream<object, object>, msg: object, n: number): void {
    this.pending += n
    this.bytesSent += n
    call.write(msg, () => {
      this.pending -= n
    })
  }

  startHeartbeat(_ms: number, _timeoutMs?: number): void {}
  pingNow(): boolean {
    return false
  }
  get pinging(): boolean {
    return false
  }

  pause(): void {
    this.call?.pause()
  }
  resume(): void {
    this.call?.resume()
  }

  /** Half-close: the vendor answers what it was sent, then ends the call (OK). */
  close(_code: number, _reason: string): void {
    if (this.call === null) return this.terminate()
    if (this.halfClosed || this.finished) return
    this.halfClosed = true
    this.call.end()
  }

  terminate(): void {
    if (this.unreadAtLoss < 0) this.unreadAtLoss = this.pending
    if (this.call !== null) this.call.cancel()
    else this.ended(1006, '')
  }
}
