/**
 * The platform side of the soak: N audio legs that stream numbered 20 ms µ-law frames at real rate and,
 * like the real platform, reconnect with the SAME init message 200 ms after any close they did not make
 * (and again after every failed attempt). Each frame carries the bench layout (lib.ts): send time, the
 * leg's sequence number (frames it actually sent, across reconnects) and the leg index, so the vendor
 * replicas can tell exactly which frames of which leg arrived. Frames that fall due while a leg is down
 * are not sent (the platform drops them) and are counted as `notSent`.
 *
 * Pacing: leg i is in slot i % SLOTS of the load generators' one drift-corrected timer (../ticker.ts).
 */
import WebSocket from 'ws'
import { initMessage } from '../../../gateway/tools/simulate'
import { CONTACT_BASE, FRAME_BYTES, nowMs, stampFrame } from '../lib'
import { SlotTicker } from '../ticker'

const SLOTS = 4
const BINARY = { binary: true } as const
/** The platform's wait before it reconnects a leg it did not close. */
export const RECONNECT_DELAY_MS = 200

/** A close the leg did not make: when, the close code, and the ERROR messageType that came before it. */
export interface Cut {
  leg: number
  at: number
  code: number
  error: string | null
  /** The leg's next sequence number when it saw the close: frames below it were sent on the closed socket. */
  seq: number
}

/** From a cut to CONNECTED on a new socket (the 200 ms wait included). */
export interface Reconnect {
  leg: number
  cutAt: number
  ms: number
  attempts: number
}

export interface FailedAttempt {
  leg: number
  at: number
  why: string
  /** The gateway answered the init message with ERROR (a refusal of a valid leg), not a connection failure. */
  refused: boolean
}

type State = 'connecting' | 'awaiting' | 'streaming' | 'waiting' | 'stopped'

interface Leg {
  index: number
  init: string
  ws: WebSocket | null
  state: State
  /** Frames sent: the next frame's sequence number. */
  seq: number
  /** Frames due while the leg was down (after its first CONNECTED). */
  notSent: number
  nextK: number
  connectedOnce: boolean
  /** Start of the outage being reconnected (null while streaming). */
  cutAt: number | null
  /** When a streaming leg first found its socket no longer open (the close frame arrived), before 'close'. */
  downAt: number | null
  attempts: number
  lastError: string | null
}

/** Per-leg counters at one instant: window boundaries. */
export interface LegMark {
  at: number
  seq: number[]
  notSent: number[]
}

export class Platform {
  readonly cuts: Cut[] = []
  readonly reconnects: Reconnect[] = []
  readonly failed: FailedAttempt[] = []
  /** Vendor results (MESSAGE) the legs received. */
  results = 0
  private readonly legs: Leg[] = []
  private readonly slots: Leg[][] = Array.from({ length: SLOTS }, () => [])
  private readonly ticker = new SlotTicker(SLOTS, (s, k) => {
    for (const leg of this.slots[s]) if (leg.connectedOnce) this.pump(leg, k)
  })
  private stopped = false
  private readonly frame = Buffer.alloc(FRAME_BYTES, 0xff)

  constructor(
    private readonly url: string,
    count: number,
    token: string
  ) {
    for (let i = 0; i < count; i++) {
      const init = JSON.stringify(initMessage({ token, contactId: CONTACT_BASE + i, busNo: 4594, perspective: 'TX' }))
      const leg: Leg = {
        index: i,
        init,
        ws: null,
        state: 'waiting',
        seq: 0,
        notSent: 0,
        nextK: 0,
        connectedOnce: false,
        cutAt: null,
        downAt: null,
        attempts: 0,
        lastError: null
      }
      this.legs.push(leg)
      this.slots[i % SLOTS].push(leg)
    }
  }

  /** Open every leg, at most `concurrency` handshakes at a time; resolves when each streams or `ms` passed. */
  async start(concurrency = 50, ms = 60_000): Promise<number> {
    this.ticker.start()
    const deadline = performance.now() + ms
    for (let i = 0; i < this.legs.length; i += concurrency) {
      for (const leg of this.legs.slice(i, i + concurrency)) this.open(leg)
      while (performance.now() < deadline && this.legs.slice(i, i + concurrency).some(l => !l.connectedOnce)) {
        await new Promise(resolve => setTimeout(resolve, 50))
      }
    }
    return this.streaming()
  }

  streaming(): number {
    return this.legs.filter(l => l.state === 'streaming').length
  }

  get count(): number {
    return this.legs.length
  }

  mark(): LegMark {
    return { at: nowMs(), seq: this.legs.map(l => l.seq), notSent: this.legs.map(l => l.notSent) }
  }

  private open(leg: Leg): void {
    leg.state = 'connecting'
    leg.attempts++
    const ws = new WebSocket(this.url, { perMessageDeflate: false, handshakeTimeout: 10_000 })
    leg.ws = ws
    let error: string | null = null
    ws.on('open', () => {
      if (leg.ws !== ws) return
      leg.state = 'awaiting'
      ws.send(leg.init)
    })
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary || leg.ws !== ws) return
      let msg: { command?: unknown; messageType?: unknown } = {}
      try {
        msg = JSON.parse(data.toString('utf8')) as typeof msg
      } catch {
        return
      }
      if (msg.command === 'CONNECTED' && leg.state === 'awaiting') this.connected(leg)
      else if (msg.command === 'ERROR') leg.lastError = String(msg.messageType)
      else if (msg.command === 'MESSAGE') this.results++
    })
    ws.on('error', (err: Error) => {
      error ??= err.message
    })
    ws.on('close', (code: number) => {
      if (leg.ws !== ws || this.stopped) return
      const now = nowMs()
      if (leg.state === 'streaming') {
        // The outage began when the leg could no longer send, which may be before the closing handshake ended.
        const at = Math.min(now, leg.downAt ?? now)
        this.cuts.push({ leg: leg.index, at, code, error: leg.lastError, seq: leg.seq })
        leg.cutAt = at
        leg.attempts = 0
      } else {
        const why = leg.lastError ?? error ?? `closed ${code} before CONNECTED`
        const refused = leg.lastError !== null
        this.failed.push({ leg: leg.index, at: now, why: why.replace(/\d+\.\d+\.\d+\.\d+:\d+/, 'backend'), refused })
      }
      leg.lastError = null
      leg.state = 'waiting'
      leg.ws = null
      setTimeout(() => {
        if (!this.stopped && leg.state === 'waiting') this.open(leg)
      }, RECONNECT_DELAY_MS)
    })
  }

  private connected(leg: Leg): void {
    const now = nowMs()
    if (leg.cutAt !== null) {
      this.reconnects.push({ leg: leg.index, cutAt: leg.cutAt, ms: now - leg.cutAt, attempts: leg.attempts })
      leg.cutAt = null
    }
    leg.lastError = null
    leg.downAt = null
    leg.state = 'streaming'
    if (!leg.connectedOnce) {
      leg.connectedOnce = true
      // Start on the leg's next grid point.
      leg.nextK = this.ticker.nextK(leg.index % SLOTS)
    }
  }

  /** Scheduler ticks later than one frame period, and the latest (ms). */
  get lateTicks(): number {
    return this.ticker.lateTicks
  }

  get maxLateMs(): number {
    return this.ticker.maxLateMs
  }

  private pump(leg: Leg, k: number): void {
    const frame = this.frame
    while (leg.nextK <= k) {
      leg.nextK++
      const ws = leg.ws
      if (leg.state !== 'streaming' || ws === null || ws.readyState !== WebSocket.OPEN) {
        if (leg.state === 'streaming') leg.downAt ??= nowMs()
        leg.notSent++
        continue
      }
      stampFrame(frame, leg.seq, leg.index)
      ws.send(frame, BINARY)
      leg.seq++
    }
  }

  /** Stop sending; legs stay open (their last frames can still arrive). */
  stopSending(): void {
    this.stopped = true
    this.ticker.stop()
  }

  /** Close every leg (1000); cut off those that do not finish within `graceMs`. */
  async close(graceMs = 3000): Promise<void> {
    this.stopSending()
    const open = this.legs.map(l => l.ws).filter((ws): ws is WebSocket => ws !== null)
    const done = Promise.all(
      open.map(
        ws =>
          new Promise<void>(resolve => {
            if (ws.readyState === WebSocket.CLOSED) return resolve()
            ws.once('close', () => resolve())
            if (ws.readyState === WebSocket.OPEN) ws.close(1000, 'soak done')
            else ws.terminate()
          })
      )
    )
    await Promise.race([done, new Promise(resolve => setTimeout(resolve, graceMs))])
    for (const ws of open) ws.terminate()
  }
}
