import type { VendorSession } from './session'
import type { AudioHookReport, AudioHookScript } from './types'
import type { Json } from './wire'

/** What an AudioHook server may send on its own (audio/control tests drive these). */
export type ServerMove = NonNullable<AudioHookScript['steps']>[number]['type']

/**
 * The AudioHook server's own moves for one session (options.audiohook): startPaused, a refusal,
 * scripted pause / resume / disconnect / reconnect / event messages, and the report of what came after
 * them. The protocol side (audiohook.ts) asks it what to do and tells it what it saw.
 */
export class AudioHookMoves {
  readonly report: AudioHookReport = { serverSent: [], framesAfterPause: 0, framesAfterDisconnect: 0 }
  /** The server sent `pause` and the client's `paused` has not come yet: audio still in flight is allowed. */
  pausing = false
  /** The server sent `disconnect`: audio until the client's `close` is counted, not an error. */
  disconnecting = false

  constructor(
    private readonly s: VendorSession,
    private readonly script: AudioHookScript | undefined
  ) {
    s.audiohook = this.report
  }

  get startPaused(): boolean {
    return this.script?.startPaused === true
  }

  get refusal(): Json | null {
    const r = this.script?.refuse
    return r === undefined ? null : { reason: r.reason, ...(r.info === undefined ? {} : { info: r.info }) }
  }

  /** Arm this session's scripted steps (at `opened`). */
  arm(move: (type: ServerMove, parameters: Json) => void): void {
    for (const step of this.script?.steps ?? [])
      if ((step.session ?? 1) === this.s.id) this.s.after(step.afterMs, () => move(step.type, { ...step.parameters }))
  }

  sent(type: string): void {
    this.report.serverSent.push(type)
    if (type === 'pause') this.pausing = true
    if (type === 'disconnect') this.disconnecting = true
  }

  /** An audio frame arrived (before the state check). */
  audio(): void {
    if (this.pausing) this.report.framesAfterPause++
    if (this.disconnecting) this.report.framesAfterDisconnect++
  }
}
