/**
 * The load generator: N platform legs (`ws` clients) that send the init message, wait for CONNECTED,
 * then send 160-byte frames at 50/s, paced by ONE shared drift-corrected scheduler.
 *
 * Pacing: legs are spread over SLOTS phases of the 20 ms frame period (leg i in slot i % SLOTS), on one
 * drift-corrected timer (ticker.ts); a late tick catches up (frames are stamped with the time they are
 * actually sent).
 */
import WebSocket from 'ws'
import { initMessage } from '../../gateway/tools/simulate'
import { CONTACT_BASE, FRAME_BYTES, sleep, stampFrame } from './lib'
import { SlotTicker } from './ticker'

const SLOTS = 10
const BINARY = { binary: true } as const

export interface GenLeg {
  index: number
  ws: WebSocket
  slot: number
  /** Index (on its slot's grid) of the next frame to send. */
  nextK: number
  /** Frames sent since CONNECTED. */
  sent: number
  state: 'connecting' | 'awaiting' | 'streaming' | 'closed' | 'failed'
  error: string | null
}

export class LoadGen {
  readonly legs: GenLeg[] = []
  private readonly slots: GenLeg[][] = Array.from({ length: SLOTS }, () => [])
  private readonly ticker = new SlotTicker(SLOTS, (s, k) => {
    const legs = this.slots[s]
    for (let i = 0; i < legs.length; i++) {
      const leg = legs[i]
      if (leg.state === 'streaming') this.pump(leg, k)
    }
  })
  private stopped = false
  /** One frame buffer for everyone: `ws` copies (and masks) it into its own frame on send. */
  private readonly frame = Buffer.alloc(FRAME_BYTES, 0xff)
  /** Frames sent in total (all legs, after CONNECTED). */
  sent = 0
  /** Scheduler lateness since the last `markWindow` (ms). */
  get maxLateMs(): number {
    return this.ticker.maxLateMs
  }

  get lateTicks(): number {
    return this.ticker.lateTicks
  }

  get ticks(): number {
    return this.ticker.ticks
  }

  constructor(
    private readonly url: string,
    private readonly count: number,
    private readonly token: string,
    /** Index of the first leg: generators side by side use disjoint ranges. */
    private readonly firstIndex = 0,
    /**
     * Perspective of leg i: perspectives[i % length], and its contactId CONTACT_BASE + floor(i / length);
     * ['TX', 'RX'] opens both legs of each contact, one after the other (bench join).
     */
    private readonly perspectives: readonly ('TX' | 'RX')[] = ['TX']
  ) {}

  /** Open every leg (at most `concurrency` handshakes in flight); resolves when all are streaming or failed. */
  async connect(concurrency = 100, timeoutMs = 30_000): Promise<{ streaming: number; failed: number }> {
    const deadline = performance.now() + timeoutMs
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < this.count && performance.now() < deadline) {
        await this.openLeg(this.firstIndex + next++, deadline)
      }
    }
    await Promise.all(Array.from({ length: Math.min(concurrency, this.count) }, worker))
    for (const leg of this.legs) {
      if (leg.state === 'connecting' || leg.state === 'awaiting') {
        leg.state = 'failed'
        leg.error ??= 'timed out before CONNECTED'
        leg.ws.terminate()
      }
    }
    const streaming = this.legs.filter(l => l.state === 'streaming').length
    return { streaming, failed: this.count - streaming }
  }

  private openLeg(index: number, deadline: number): Promise<void> {
    return new Promise(resolve => {
      const ws = new WebSocket(this.url, { perMessageDeflate: false, handshakeTimeout: 10_000 })
      const leg: GenLeg = { index, ws, slot: index % SLOTS, nextK: 0, sent: 0, state: 'connecting', error: null }
      this.legs.push(leg)
      const timer = setTimeout(() => fail('timed out before CONNECTED'), Math.max(1, deadline - performance.now()))
      const fail = (why: string): void => {
        clearTimeout(timer)
        if (leg.state === 'connecting' || leg.state === 'awaiting') {
          leg.state = 'failed'
          leg.error ??= why
          ws.terminate()
        }
        resolve()
      }
      ws.on('open', () => {
        leg.state = 'awaiting'
        const n = this.perspectives.length
        const contactId = CONTACT_BASE + Math.floor(index / n)
        ws.send(
          JSON.stringify(
            initMessage({ token: this.token, contactId, busNo: 4594, perspective: this.perspectives[index % n] })
          )
        )
      })
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        if (isBinary || leg.state !== 'awaiting') return
        let msg: { command?: unknown } = {}
        try {
          msg = JSON.parse(data.toString('utf8')) as { command?: unknown }
        } catch {
          /* reported below */
        }
        if (msg.command !== 'CONNECTED')
          return fail(`first answer was not CONNECTED: ${data.toString('utf8').slice(0, 200)}`)
        clearTimeout(timer)
        this.startStreaming(leg)
        resolve()
      })
      ws.on('error', (err: Error) => {
        leg.error ??= err.message
      })
      ws.on('close', (code: number) => {
        if (leg.state === 'streaming') leg.state = 'closed'
        else fail(leg.error ?? `closed with ${code} before CONNECTED`)
      })
    })
  }

  private startStreaming(leg: GenLeg): void {
    leg.state = 'streaming'
    if (this.stopped) return
    // Start on the leg's next grid point.
    leg.nextK = this.ticker.nextK(leg.slot)
    this.slots[leg.slot].push(leg)
    this.ticker.start()
  }

  private pump(leg: GenLeg, k: number): void {
    const ws = leg.ws
    const frame = this.frame
    while (leg.nextK <= k) {
      if (ws.readyState !== WebSocket.OPEN) {
        leg.state = 'closed'
        return
      }
      stampFrame(frame, leg.sent, leg.index)
      ws.send(frame, BINARY)
      leg.sent++
      leg.nextK++
      this.sent++
    }
  }

  /** Start of a measured window: reset the scheduler-lateness figures. */
  markWindow(): void {
    this.ticker.resetLateness()
  }

  /** Stop sending (legs stay open). */
  stop(): void {
    this.stopped = true
    this.ticker.stop()
  }

  /** Close every leg (1000), cut off those that do not finish within `graceMs`. */
  async close(graceMs = 3000): Promise<void> {
    this.stop()
    const pending = this.legs.filter(l => l.ws.readyState !== WebSocket.CLOSED)
    const done = Promise.all(
      pending.map(
        l =>
          new Promise<void>(resolve => {
            if (l.ws.readyState === WebSocket.CLOSED) return resolve()
            l.ws.once('close', () => resolve())
          })
      )
    )
    for (const l of pending) {
      if (l.ws.readyState === WebSocket.OPEN) l.ws.close(1000, 'bench done')
      else l.ws.terminate()
    }
    const timedOut = await Promise.race([done.then(() => false), sleep(graceMs).then(() => true)])
    if (timedOut) for (const l of this.legs) l.ws.terminate()
  }

  /** Distinct error messages of failed legs, with counts. */
  failures(): string[] {
    const by = new Map<string, number>()
    for (const l of this.legs)
      if (l.state === 'failed') by.set(l.error ?? 'unknown', (by.get(l.error ?? 'unknown') ?? 0) + 1)
    return [...by].map(([e, n]) => `${n} × ${e}`)
  }
}
