import type { IncomingMessage } from 'node:http'
import type { Clock } from '../../clock'
import { SessionRecorder } from './recorder'
import type { ChannelSplit } from './stereo'
import type { AudioHookReport, RealVendorKind, RealVendorOptions, RealVendorSession } from './types'

/** What a vendor's upgrade check decides: accept, or refuse with an HTTP answer. */
export type Verdict =
  | { ok: true }
  | { ok: false; status: number; error: string; headers?: Record<string, string>; body?: unknown }

/** One vendor's side of an accepted session: the server hands it every socket event. */
export interface Protocol {
  open(): void
  binary(data: Buffer): void
  text(text: string, raw: Buffer): void
  /** The socket closed; `byUs` when the emulator started the close or dropped the socket. */
  closed(code: number, byUs: boolean): void
}

/** What a vendor's protocol reads from the emulator's options. */
export interface Context {
  opts: RealVendorOptions
  resultEveryMs: number
  clock: Clock
}

/** A real-vendor session: the shared recorder plus the upgrade request and the vendor's own counters. */
export class VendorSession extends SessionRecorder {
  /** deepgram: KeepAlive messages; audiohook: pings. */
  keepalives = 0
  signed: boolean | null = null
  /** audiohook: the session was a connection probe (open with the null conversation id), not billable. */
  probe = false
  /** audiohook: the server's own moves. */
  audiohook: AudioHookReport | undefined = undefined
  /** A stereo session: its audio split per channel (the protocol sets it once it knows the channels). */
  stereo: ChannelSplit | null = null
  /** The first binary frames, base64, when the emulator keeps them (option `recordFrames`). */
  rawFrames: string[] | null = null

  constructor(
    id: number,
    readonly kind: RealVendorKind,
    readonly path: string,
    readonly query: Record<string, string>,
    readonly params: URLSearchParams,
    readonly headers: Record<string, string>,
    readonly req: IncomingMessage,
    clock: Clock,
    log: ((line: string) => void) | undefined
  ) {
    super(id, `${kind} session ${id}`, clock, log)
  }

  report(): RealVendorSession {
    return {
      id: this.id,
      kind: this.kind,
      path: this.path,
      query: { ...this.query },
      headers: { ...this.headers },
      ...this.recorded(),
      audioBytes: this.audioBytes,
      keepalives: this.keepalives,
      signed: this.signed,
      probe: this.probe,
      ...(this.stereo === null ? {} : { channels: this.stereo.report() }),
      ...(this.rawFrames === null ? {} : { rawFrames: [...this.rawFrames] }),
      ...(this.audiohook === undefined
        ? {}
        : { audiohook: { ...this.audiohook, serverSent: [...this.audiohook.serverSent] } })
    }
  }
}
