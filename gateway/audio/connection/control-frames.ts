import type { Timer } from '../../clock'
import type { AudioMapping } from '../../mapping/audio'
import type { Expr } from '../../mapping/expr'
import { run, type SocketInput } from '../../mapping/run'
import type { ConnectionContext } from './connection-contract'
import { type FrameCounters, fillControl } from '../feed/encoder'
import type { VendorControl } from './vendor-control'
import { type FrameSink, sendMapped } from './vendor-wire'

export type ControlStage = 'open' | 'keepalive' | 'pause' | 'resume' | 'close'

/**
 * The frames a mapping sends on its own on one vendor socket (audio/connection/vendor-connection.ts): open,
 * keepalive, pause, resume, close and the control rules' replies. Each is evaluated against the mapping
 * input, its placeholders filled from the socket's frame counters; one that fails is counted
 * (`mapping_errors_total`) and logged, and nothing of it is sent. Control path only.
 */
export class ControlFrames {
  constructor(
    private readonly audio: AudioMapping,
    private readonly frames: FrameCounters,
    private readonly rules: VendorControl,
    private readonly ctx: ConnectionContext,
    private readonly socket: () => FrameSink | null
  ) {}

  /**
   * Evaluates `expr` and sends its frame(s). A failing `open` is the caller's to fail the connection
   * with: its error is returned, unlogged. Any other failure is counted, logged and skipped (null).
   */
  async send(expr: Expr, stage: ControlStage, input: SocketInput): Promise<string | null> {
    const out = await run(expr, this.rules.input(input))
    if (out.ok) {
      this.sendValue(out.value)
      return null
    }
    if (stage === 'open') return out.error
    this.ctx.metrics.mappingErrors.inc({ route: this.ctx.route.name, stage })
    this.ctx.log.warn(
      { event: 'mapping_error', stage, error: out.error },
      `the ${stage} expression failed; nothing sent`
    )
    return null
  }

  /**
   * The mapping's keepalive, on `timer` (the connection's, cleared when it closes): when idle (no audio
   * written since the last tick) or always, while `ready`. Nothing when the mapping has none.
   */
  keepalive(timer: Timer, input: SocketInput, ready: () => boolean, audioBytes: () => number): void {
    const ka = this.audio.keepalive
    if (ka === null) return
    let mark = -1
    timer.every(ka.everyMs, () => {
      if (!ready()) return
      const idle = audioBytes() === mark
      mark = audioBytes()
      if (ka.when === 'always' || idle)
        this.ctx.chain.run(async () => {
          if (!ready()) return
          if (ka.set != null) await this.rules.apply(ka.set, this.rules.input(input))
          await this.send(ka.frame, 'keepalive', input)
        })
    })
  }

  /** Sends what an expression produced (a control rule's reply): a frame, or several in order. */
  sendValue(value: unknown): void {
    const failed = sendMapped(this.audio, this.socket(), value, text => fillControl(text, this.frames))
    if (failed === null) return
    this.ctx.metrics.mappingErrors.inc({ route: this.ctx.route.name, stage: 'frame' })
    this.ctx.log.warn({ event: 'mapping_error', stage: 'frame', error: failed }, 'a frame was not sent')
  }
}
