import { createHash, type Hash } from 'node:crypto'
import { WebSocket } from 'ws'
import { type Clock, Timer, type TimerHandle } from '../../clock'
import type { FrameSequence, SequenceReport } from './sequence'

/**
 * The emulators' default clock: wall time, and timers that never keep a process alive on their own
 * (an emulator's listening socket does that).
 */
export const emulatorClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms).unref() as unknown as TimerHandle,
  clearTimeout: t => clearTimeout(t as unknown as NodeJS.Timeout),
  setInterval: (fn, ms) => setInterval(fn, ms).unref() as unknown as TimerHandle,
  clearInterval: t => clearInterval(t as unknown as NodeJS.Timeout)
}

/** What every emulator's handle offers, whatever the vendor: where it listens, and what a test does to all its sessions. */
export interface EmulatorHandle<Kind extends string> {
  readonly kind: Kind
  readonly port: number
  /** ws://host:port/<the path of the emulated API> */
  readonly url: string
  readonly httpUrl: string
  /** Abruptly terminates every open session socket (TCP destroy, no close frame): a crashed vendor. */
  dropAll(): void
  /** Sends a close frame to every open session. */
  closeAll(code: number, reason?: string): void
  /** Stops reading from every open session socket (a vendor that falls behind: the sender's buffers fill up). */
  pauseAll(): void
  /** Reads again from every open session socket. */
  resumeAll(): void
  /** Stops listening, terminates sessions, resolves when fully closed. */
  close(): Promise<void>
}

/** What every emulator reports of a session, whatever the vendor. */
export interface RecordedSession {
  /** Audio-carrying messages. */
  frames: number
  /** Their size on the wire. */
  bytes: number
  /** Hex sha256 of the audio payload bytes in arrival order. */
  sha256: string
  /** Text messages received, parsed (or {unparsed}); which ones depends on the vendor. */
  texts: unknown[]
  /** Protocol violations the emulator saw. */
  errors: string[]
  closed: boolean
  closeCode: number | null
  closeReason: string
  openedAt: number
  closedAt: number | null
  /** The emulator's name (option `name`), so the reports of several emulators (a route's vendor and its tees) tell apart. */
  vendor?: string
  /** With the option `sequencedFrames`: which numbered frames arrived, when (see sequence.ts). */
  sequence?: SequenceReport
}

/**
 * One emulated vendor session as every emulator records it: audio counters and hash, text messages,
 * protocol errors, how it closed; its socket (attached once the upgrade is accepted) and its timers,
 * armed on the emulator's clock and all cleared when the session closes.
 */
export class SessionRecorder {
  readonly openedAt = Date.now()
  /** Audio-carrying messages. */
  frames = 0
  /** Their size on the wire. */
  bytes = 0
  /** Audio payload bytes (decoded, for formats that carry audio in text). */
  audioBytes = 0
  firstFrameAt: number | null = null
  lastFrameAt: number | null = null
  readonly texts: unknown[] = []
  readonly errors: string[] = []
  closeCode: number | null = null
  closeReason = ''
  closedAt: number | null = null
  /** The emulator started the close (or dropped the socket). */
  closingByUs = false
  /** The emulator's name, when it has one: in every report and log line of the session. */
  vendor: string | undefined = undefined
  ws: WebSocket | null = null
  /** Set by an emulator started with `sequencedFrames`: reads every audio payload's numbered frames. */
  sequence: FrameSequence | null = null
  /** Armed by `after` (until they run) and `every`; cleared, with the `owned` ones, at the session's close. */
  private readonly timers = new Set<Timer>()
  /** The session's own timers (`timer`), re-armed as it goes. */
  private readonly owned: Timer[] = []
  private readonly hash: Hash = createHash('sha256')
  private finalDigest: string | null = null

  /** `label` starts every log line of the session ("deepgram session 3", "session 3"). */
  constructor(
    readonly id: number,
    private readonly label: string,
    readonly clock: Clock,
    private readonly log: ((line: string) => void) | undefined
  ) {}

  get isOpen(): boolean {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN
  }

  /** Records a protocol error (and logs it). */
  note(msg: string): void {
    this.errors.push(msg)
    this.say(`error: ${msg}`)
  }

  say(line: string): void {
    this.log?.(`${this.vendor === undefined ? '' : `${this.vendor}: `}${this.label} ${line}`)
  }

  /** Hot path: counting only. */
  addAudio(wireBytes: number, audio: Uint8Array): void {
    const now = Date.now()
    if (this.firstFrameAt === null) this.firstFrameAt = now
    this.lastFrameAt = now
    this.frames++
    this.bytes += wireBytes
    this.audioBytes += audio.length
    this.hash.update(audio)
    this.sequence?.add(audio, now)
  }

  digest(): string {
    // copy() keeps the running hash usable while the session is still receiving.
    return this.finalDigest ?? this.hash.copy().digest('hex')
  }

  send(msg: unknown): void {
    if (this.isOpen) this.ws?.send(JSON.stringify(msg))
  }

  /** Closes from our side (close frame). */
  close(code: number, reason = ''): void {
    this.closingByUs = true
    this.clearTimers()
    if (this.isOpen) this.ws?.close(code, reason)
  }

  /** Drops the socket (TCP destroy, no close frame). */
  terminate(): void {
    this.closingByUs = true
    this.clearTimers()
    this.ws?.terminate()
  }

  /** A timer the session keeps (re-armed as it goes: an inactivity timeout); cleared with the others. */
  timer(): Timer {
    const t = new Timer(this.clock)
    this.owned.push(t)
    return t
  }

  every(ms: number, fn: () => void): void {
    const t = new Timer(this.clock)
    t.every(ms, fn)
    this.timers.add(t)
  }

  after(ms: number, fn: () => void): void {
    const t = new Timer(this.clock)
    t.set(ms, () => {
      this.timers.delete(t)
      fn()
    })
    this.timers.add(t)
  }

  clearTimers(): void {
    for (const t of this.timers) t.clear()
    this.timers.clear()
    for (const t of this.owned) t.clear()
  }

  markClosed(code: number, reason: string): void {
    this.clearTimers()
    this.closeCode = code
    this.closeReason = reason
    this.closedAt = Date.now()
    this.finalDigest = this.hash.digest('hex')
  }

  /** A refused upgrade: never opened. */
  markRejected(status: number, error: string): void {
    this.errors.push(error)
    this.closeReason = `upgrade refused: HTTP ${status}`
    this.closedAt = Date.now()
    this.finalDigest = this.hash.digest('hex')
  }

  /** The fields every emulator's session report has. */
  recorded(): RecordedSession {
    return {
      frames: this.frames,
      bytes: this.bytes,
      sha256: this.digest(),
      texts: [...this.texts],
      errors: [...this.errors],
      closed: this.closedAt !== null,
      closeCode: this.closeCode,
      closeReason: this.closeReason,
      openedAt: this.openedAt,
      closedAt: this.closedAt,
      ...(this.vendor === undefined ? {} : { vendor: this.vendor }),
      ...(this.sequence === null ? {} : { sequence: this.sequence.report() })
    }
  }
}
