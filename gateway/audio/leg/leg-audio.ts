import type { AudioInput, Session } from '../session/session-contract'
import type { LegTees } from '../session/tee'

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

  /** Nothing is held after; returns how many frames were (the caller counts them). */
  drop(): number {
    const n = this.frames.length
    this.frames = []
    this.bytes = 0
    return n
  }
}

const NOWHERE: AudioInput = { write: () => {} }

/**
 * Where one platform leg's audio goes (audio/leg/leg.ts): held while it cannot go anywhere yet, then to its
 * session here (and the route's tees), or to the relay link of a session owned elsewhere. `sink` is read
 * on the per-frame path.
 */
export class LegAudio {
  sink: AudioInput = NOWHERE
  readonly held: HeldAudio
  private tees: LegTees | null = null

  constructor(holdBufferBytes: number) {
    this.held = new HeldAudio(holdBufferBytes)
  }

  /** The route's tees get the same audio from the leg's session on (started by the leg). */
  withTees(tees: LegTees): void {
    this.tees = tees
  }

  /** To `session` (and the tees), the held audio first. */
  toSession(session: Session): void {
    const tees = this.tees
    const feed = session.feed
    this.sink =
      tees === null
        ? feed
        : {
            write: d => {
              feed.write(d)
              tees.write(d)
            }
          }
    this.held.flushTo(this.sink)
  }

  /** To a relay link, the held audio first. */
  toLink(link: AudioInput): void {
    this.sink = link
    this.held.flushTo(link)
  }

  /** The relay never opened: what it held comes back, ahead of what is held from now. */
  back(frames: readonly ArrayBuffer[]): void {
    this.sink = NOWHERE
    this.held.putBack(frames)
  }

  /** The leg is over: the tees say goodbye; what was still held is dropped, returned as a frame count. */
  stop(): number {
    this.sink = NOWHERE
    this.tees?.close()
    this.tees = null
    return this.held.drop()
  }
}
