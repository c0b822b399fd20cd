import { type ServerDuplexStream, status as Status } from '@grpc/grpc-js'
import type { ProtoSet } from '../../upstream/protos'
import { Cadence } from './cadence'
import { authProblem, type Refusal, unknownFields } from './google-stt-checks'
import type { Hearing } from './hearing'

// What the gRPC streaming emulators (google-stt.ts, dialogflow-stream.ts) do alike with one bidirectional
// call: the credential first, each request walked for unknown fields before it is decoded, the first
// request the stream's config and the later ones its audio, results on a cadence of audio time, the final
// for pending audio at the half-close, and a refusal as the call's status. A request can never follow the
// half-close: HTTP/2 itself refuses DATA on a half-closed stream (RFC 9113 §5.1, STREAM_CLOSED).

/** What a test reads of every emulated stream. */
export interface StreamReport {
  id: number
  audioRequests: number
  /** The audio bytes it had, and how long they last. */
  audioBytes: number
  audioMs: number
  /** Why the emulator refused the call (null: it did not). */
  refusal: Refusal | null
  /** How the call ended: the status the emulator sent (null: still open), or the client's cancel. */
  ended: 'OK' | 'CANCELLED' | keyof typeof Status | null
}

export interface StreamOptions {
  apiKey?: string
  serviceAccount?: { email: string; publicKeyPem: string }
  log?: (line: string) => void
}

export abstract class EmulatedStream<R extends StreamReport> {
  protected state: 'FIRST' | 'STREAMING' | 'ENDED' = 'FIRST'
  protected cadence = new Cadence(1000)
  /** Interim results half-way between finals (the cadence's every other tick is a final). */
  protected interim = true
  protected bytesPerMs = 8
  protected heard: Hearing | null = null

  constructor(
    protected readonly call: ServerDuplexStream<Buffer, object>,
    protected readonly protos: ProtoSet,
    private readonly requestType: string,
    private readonly decode: (buf: Buffer) => unknown,
    private readonly accept: StreamOptions,
    readonly report: R
  ) {
    const auth = authProblem(call.metadata, accept, Date.now())
    if (auth !== null) {
      this.refuse(auth)
      return
    }
    call.on('data', (b: Buffer) => this.request(b))
    // A connection that drops (its front end killed, say) also ends the request stream: Node's HTTP/2 ends
    // the readable side of each stream of a closed session before it destroys them, and grpc-js then cancels
    // the call. What ends the call is decided once that has run: a half-close is the client's only while
    // the call is not cancelled by then (else the stream ends CANCELLED, the client never told it more).
    call.on('end', () => setImmediate(() => this.halfClosed()))
    call.on('cancelled', () => {
      if (this.state !== 'ENDED') this.report.ended = 'CANCELLED'
      this.state = 'ENDED'
    })
    call.on('error', () => {})
  }

  /** The first request: the stream's config (refused, or the state becomes STREAMING). */
  protected abstract first(req: Record<string, any>): void
  /** A later request: audio, or a refusal. */
  protected abstract later(req: Record<string, any>): void
  /** A result between two audio times (ms of the stream's audio). */
  protected abstract result(startMs: number, endMs: number, isFinal: boolean): void
  /** Whether the audio so far is past the stream's limit, and the refusal then. */
  protected abstract overLimit(audioMs: number): Refusal | null
  /** Called for every request before it is checked. */
  protected received(): void {}
  /** At the half-close, after the pending final: what is still to say. */
  protected flush(): void {}

  private request(buf: Buffer): void {
    if (this.state === 'ENDED') return
    this.received()
    const unknown = unknownFields(this.protos, this.requestType, buf)
    if (unknown.length > 0)
      return this.refuse({
        code: Status.INVALID_ARGUMENT,
        details: `Invalid request: unknown field(s) ${unknown.join(', ')} in ${this.requestType}.`
      })
    const req = this.decode(buf) as Record<string, any>
    if (this.state === 'FIRST') return this.first(req)
    this.later(req)
  }

  /** Audio heard: counted, refused past the limit, results at each cadence boundary it crosses. */
  protected audio(data: Buffer): void {
    const r = this.report
    r.audioRequests++
    r.audioBytes += data.length
    this.heard?.add(data)
    const ms = data.length / this.bytesPerMs
    r.audioMs += ms
    const over = this.overLimit(r.audioMs)
    if (over !== null) return this.refuse(over)
    const c = this.cadence
    const crossed = c.add(ms)
    for (let i = 0; i < crossed; i++) {
      const at = c.boundary(i, crossed)
      const tick = ++c.ticks
      this.result(c.start, at, !this.interim || tick % 2 === 0)
    }
  }

  private halfClosed(): void {
    if (this.state === 'ENDED') return
    const c = this.cadence
    if (this.state === 'STREAMING' && c.pending) this.result(c.start, c.audioMs, true)
    this.flush()
    this.state = 'ENDED'
    this.report.ended = 'OK'
    this.call.end()
  }

  protected refuse(r: Refusal): void {
    if (this.state === 'ENDED') return
    this.state = 'ENDED'
    this.report.refusal = r
    this.report.ended = Status[r.code] as keyof typeof Status
    this.accept.log?.(`stream ${this.report.id} refused: ${Status[r.code]} ${r.details}`)
    this.call.emit('error', { code: r.code, details: r.details })
  }
}
