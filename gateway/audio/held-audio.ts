import type { AudioInput } from './session-contract'

/**
 * Audio a leg holds while it cannot pass it on yet (its init message is being checked, or its session
 * being found): copies, in order, up to `limitBytes` (`audio.holdBufferBytes`). `add` is on the per-frame
 * path: one copy, because uWS neuters `data` when the call returns.
 */
export class HeldAudio {
  private frames: ArrayBuffer[] = []
  private bytes = 0

  constructor(private readonly limitBytes: number) {}

  /** False when the frame would take the held audio past its limit (nothing is kept then). */
  add(data: ArrayBuffer): boolean {
    if (this.bytes + data.byteLength > this.limitBytes) return false
    this.bytes += data.byteLength
    this.frames.push(data.slice(0))
    return true
  }

  /** Audio held elsewhere before this (a relay that never opened gives its frames back): it goes first. */
  putBack(frames: readonly ArrayBuffer[]): void {
    for (const f of frames) this.bytes += f.byteLength
    this.frames = [...frames, ...this.frames]
  }

  /** Everything held, in order, to `sink`; nothing is held after. */
  flushTo(sink: AudioInput): void {
    const frames = this.frames
    this.frames = []
    this.bytes = 0
    for (const f of frames) sink.write(f)
  }

  drop(): void {
    this.frames = []
    this.bytes = 0
  }
}
