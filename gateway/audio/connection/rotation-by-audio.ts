/**
 * Rotation by audio (a mapping's `rotateAfterAudioSeconds`): for a vendor whose cap on one stream counts
 * audio (gRPC streaming recognition), the connection asks for its own replacement once it has written
 * that much platform audio: make-before-break, as a vendor's own reconnect. It asks again after each
 * further second of audio until one takes over. On the per-frame path: one comparison.
 */
export class RotationByAudio {
  /** Audio bytes written after which it asks (Infinity: never). */
  private atBytes: number

  /**
   * `afterMs`: ms of audio (null: no rotation by audio). `bytesPerMs`: platform audio bytes per ms
   * (every channel). `ask`: the request for a replacement.
   */
  constructor(
    afterMs: number | null,
    private readonly bytesPerMs: number,
    private readonly ask: () => void
  ) {
    this.atBytes = afterMs === null ? Number.POSITIVE_INFINITY : afterMs * bytesPerMs
  }

  /** Per write: `bytes` of platform audio written so far. */
  written(bytes: number): void {
    if (bytes < this.atBytes) return
    this.atBytes = bytes + 1000 * this.bytesPerMs
    this.ask()
  }
}
