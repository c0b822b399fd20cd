import { randomInt } from 'node:crypto'
import { WebSocket, type RawData } from 'ws'
import { systemClock, type Clock, Timer } from '../clock'

export interface SimulateAudioOptions {
  url: string
  token?: string
  /** mu-law bytes */
  clip: Buffer
  /** Default TX. */
  perspective?: 'TX' | 'RX' | 'MIX'
  /** Default 1. */
  legs?: number
  /** Default: clip length; the clip loops if longer. */
  seconds?: number
  /**
   * The contactId of the first contact; the others count up from it. Default: a fresh random one per run
   * (9-10 digits), so two runs on one route are two calls, not one leg re-attaching to the other's session.
   */
  contactIdBase?: number
  /** Default 4594. */
  busNo?: number
  appParams?: Record<string, unknown>
  print?: (line: string) => void
  /** Accept self-signed TLS certificates. */
  insecure?: boolean
  /** Paces the frames and times the trailing wait. Default: the system clock (tests may pass a fake one). */
  clock?: Clock
  /**
   * Each contact as a stereo pair: its TX and RX legs together (legs 2k and 2k+1 of contact k; `perspective`
   * is not used). The RX leg streams the clip from its middle, so the two channels differ.
   */
  stereo?: boolean
}

export interface SimulatedLeg {
  index: number
  /** First text frame, parsed. */
  answer: unknown
  /** Every later text frame, parsed. */
  messages: unknown[]
  framesSent: number
  bytesSent: number
  closeCode: number | null
  closeReason: string
  /**
   * The leg ended before its run was complete: not every frame went out, or the close was not a normal
   * one (1000, or 1005 answering the simulator's own close). Set when the leg closes.
   */
  cut: boolean
  error?: string
}

/** 20 ms of 8 kHz mu-law. */
const FRAME_BYTES = 160
const FRAME_MS = 20
const TRAILING_WAIT_MS = 1000
/** After our close frame, a peer that never answers is cut off after this long. */
const CLOSE_GRACE_MS = 2000
const HANDSHAKE_TIMEOUT_MS = 10000

/** A complete WebSocketHookInitializeMessage (spec 2.1-2.4), as the platform media server sends it. */
export function initMessage(opts: {
  token?: string
  contactId: number
  busNo: number
  perspective: string
  appParams?: Record<string, unknown>
}): Record<string, unknown> {
  const msg: Record<string, unknown> = {}
  if (opts.token !== undefined) msg.authenticationToken = opts.token
  msg.executionInfo = {
    contactId: opts.contactId,
    busNo: opts.busNo,
    requestId: 1,
    actionType: 'AgentAssist',
    actionId: 7,
    scriptName: 'Simulated\\AgentAssist_Inbound'
  }
  msg.systemTelemetryData = {
    consumerProcessHost: 'sim-media-01',
    consumerProcessName: 'assist-gateway-simulate',
    consumerProcessVersion: '1.0.0',
    platformClusterAlias: 'sim-cluster',
    platformScriptEngineHost: 'sim-script-engine-01',
    consumerMetaData: { simulated: true }
  }
  msg.streamPerspective = opts.perspective
  msg.streamsConfiguration = ''
  msg.appParams = opts.appParams ?? {}
  msg.appConfig = {}
  return msg
}

interface LegState {
  leg: SimulatedLeg
  ws: WebSocket
  /** When the init message went out; frame k is due at startedAt + k * 20 ms. */
  startedAt: number
  streaming: boolean
  /** The first text frame (the answer) came. */
  answered: boolean
  /** After the last frame: TRAILING_WAIT_MS for late answers, then the close. */
  readonly trailing: Timer
  /** After the close frame: CLOSE_GRACE_MS for the server's, then the socket is dropped. */
  readonly grace: Timer
  /** The simulator sent its own close frame. */
  closing: boolean
}

function parseText(data: RawData): unknown {
  const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)
  const text = buf.toString('utf8')
  try {
    return JSON.parse(text) as unknown
  } catch {
    return { unparsed: text }
  }
}

/**
 * Acts as the platform: opens `legs` audio WebSockets, sends the init message, then streams the
 * clip at real-time pace (160-byte frames every 20 ms) without waiting for CONNECTED.
 * Resolves when every leg is closed; a leg's `error`, `answer` and `cut` say whether it ran to the end.
 */
export function simulateAudio(opts: SimulateAudioOptions): Promise<SimulatedLeg[]> {
  if (opts.clip.length === 0) return Promise.reject(new Error('clip is empty'))
  const legCount = opts.legs ?? 1
  if (!Number.isInteger(legCount) || legCount < 1) return Promise.reject(new Error(`legs must be a positive integer`))
  if (opts.seconds !== undefined && !(opts.seconds > 0)) return Promise.reject(new Error('seconds must be positive'))
  const contactIdBase = opts.contactIdBase ?? randomInt(1_000_000_000, 9_000_000_000)
  const sim = new AudioSimulation({ ...opts, contactIdBase }, opts.clock ?? systemClock)
  const runs: Promise<SimulatedLeg>[] = []
  for (let i = 0; i < legCount * (opts.stereo === true ? 2 : 1); i++) runs.push(sim.runLeg(i))
  return Promise.all(runs)
}

/** The legs of one simulateAudio call, paced by one scheduler. */
class AudioSimulation {
  private readonly clip: Buffer
  private readonly totalBytes: number
  private readonly totalFrames: number
  private readonly streaming = new Set<LegState>()
  private readonly ticker: Timer
  private readonly schedulerStart: number
  private tickNo = 0

  constructor(
    private readonly opts: SimulateAudioOptions,
    private readonly clock: Clock
  ) {
    this.clip = opts.clip
    this.totalBytes = opts.seconds === undefined ? this.clip.length : Math.round(opts.seconds * 8000)
    this.totalFrames = Math.ceil(this.totalBytes / FRAME_BYTES)
    this.schedulerStart = clock.now()
    this.ticker = new Timer(clock)
  }

  runLeg(index: number): Promise<SimulatedLeg> {
    const opts = this.opts
    const leg: SimulatedLeg = {
      index,
      answer: null,
      messages: [],
      framesSent: 0,
      bytesSent: 0,
      closeCode: null,
      closeReason: '',
      cut: false
    }
    const ws = new WebSocket(opts.url, {
      perMessageDeflate: false,
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      rejectUnauthorized: !opts.insecure
    })
    const st: LegState = {
      leg,
      ws,
      startedAt: 0,
      streaming: false,
      answered: false,
      trailing: new Timer(this.clock),
      grace: new Timer(this.clock),
      closing: false
    }
    return new Promise<SimulatedLeg>(resolve => {
      ws.on('open', () => this.start(st))
      ws.on('message', (data: RawData, isBinary: boolean) => {
        if (!isBinary) this.received(st, parseText(data))
      })
      ws.on('error', (err: Error) => {
        leg.error ??= err.message
        this.print(`leg ${index} error ${err.message}`)
      })
      ws.on('close', (code: number, reason: Buffer) => {
        this.closed(st, code, reason.toString('utf8'))
        resolve(leg)
      })
    })
  }

  private print(line: string): void {
    const token = this.opts.token
    // Servers may echo the token back; it must never reach the output.
    this.opts.print?.(token ? line.split(token).join('[REDACTED]') : line)
  }

  /** The socket is open: the init message, then the first frame at once and the rest on the scheduler. */
  private start(st: LegState): void {
    const opts = this.opts
    const i = st.leg.index
    const stereo = opts.stereo === true
    const contactId = opts.contactIdBase! + (stereo ? Math.floor(i / 2) : i)
    const perspective = stereo ? (i % 2 === 0 ? 'TX' : 'RX') : (opts.perspective ?? 'TX')
    const init = initMessage({
      token: opts.token,
      contactId,
      busNo: opts.busNo ?? 4594,
      perspective,
      appParams: opts.appParams
    })
    this.print(`leg ${i} contact ${contactId} ${perspective}`)
    st.ws.send(JSON.stringify(init))
    st.startedAt = this.clock.now()
    st.streaming = true
    this.streaming.add(st)
    this.pump(st, st.startedAt)
    this.scheduleTick()
  }

  /** The first text frame is the answer; every later one a message. */
  private received(st: LegState, value: unknown): void {
    const leg = st.leg
    if (!st.answered) {
      st.answered = true
      leg.answer = value
      this.print(`leg ${leg.index} answer ${JSON.stringify(value)}`)
    } else {
      leg.messages.push(value)
      this.print(`leg ${leg.index} message ${JSON.stringify(value)}`)
    }
  }

  private closed(st: LegState, code: number, reason: string): void {
    const leg = st.leg
    this.stopStreaming(st)
    st.trailing.clear()
    st.grace.clear()
    leg.closeCode = code
    leg.closeReason = reason
    leg.cut = leg.framesSent < this.totalFrames || !(code === 1000 || (st.closing && code === 1005))
    this.print(`leg ${leg.index} closed ${code} ${reason}`.trimEnd())
    this.print(
      `leg ${leg.index} sent ${leg.framesSent} frames (${leg.bytesSent} bytes), got ${leg.messages.length} messages`
    )
  }

  /** Frame `k` of the clip; `fromMiddle`: the clip read from its middle (a stereo pair's RX leg). */
  private frameAt(k: number, fromMiddle = false): Buffer {
    const clip = this.clip
    const offset = (k * FRAME_BYTES + (fromMiddle ? Math.floor(clip.length / 2) : 0)) % clip.length
    const size = Math.min(FRAME_BYTES, this.totalBytes - k * FRAME_BYTES)
    if (offset + size <= clip.length) return clip.subarray(offset, offset + size)
    const out = Buffer.allocUnsafe(size)
    for (let i = 0; i < size; i++) out[i] = clip[(offset + i) % clip.length]
    return out
  }

  /** Sends every frame due by `now`; after the last, waits TRAILING_WAIT_MS for late answers, then closes. */
  private pump(st: LegState, now: number): void {
    const due = Math.min(this.totalFrames, Math.floor((now - st.startedAt) / FRAME_MS) + 1)
    while (st.leg.framesSent < due) {
      if (st.ws.readyState !== WebSocket.OPEN) return this.stopStreaming(st)
      const frame = this.frameAt(st.leg.framesSent, this.opts.stereo === true && st.leg.index % 2 === 1)
      st.ws.send(frame)
      st.leg.framesSent++
      st.leg.bytesSent += frame.length
    }
    if (st.leg.framesSent >= this.totalFrames) {
      this.stopStreaming(st)
      st.trailing.set(TRAILING_WAIT_MS, () => this.closeLeg(st))
    }
  }

  private stopStreaming(st: LegState): void {
    st.streaming = false
    this.streaming.delete(st)
    if (this.streaming.size === 0) this.ticker.clear()
  }

  // One scheduler for all legs; each tick is aimed at schedulerStart + n * 20 ms so delays do not accumulate.
  private scheduleTick(): void {
    if (this.ticker.pending || this.streaming.size === 0) return
    const now = this.clock.now()
    this.tickNo = Math.max(this.tickNo + 1, Math.floor((now - this.schedulerStart) / FRAME_MS) + 1)
    this.ticker.set(Math.max(0, this.schedulerStart + this.tickNo * FRAME_MS - now), () => this.onTick())
  }

  private onTick(): void {
    const now = this.clock.now()
    for (const st of this.streaming) this.pump(st, now)
    this.scheduleTick()
  }

  private closeLeg(st: LegState): void {
    if (st.ws.readyState !== WebSocket.OPEN) return
    st.closing = true
    st.ws.close(1000, 'done')
    st.grace.set(CLOSE_GRACE_MS, () => st.ws.terminate())
  }
}
