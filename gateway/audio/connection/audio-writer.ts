import type { AudioMapping } from '../../mapping/audio'
import type { VendorLeg } from '../../upstream/vendor-leg'
import { PLATFORM_BYTES_PER_MS } from '../feed/coalescer'
import type { AudioEncoder, FrameCounters } from '../feed/encoder'
import { RotationByAudio } from './rotation-by-audio'
import type { VendorControl } from './vendor-control'

/**
 * The audio path of one ready vendor connection (audio/connection/vendor-connection.ts), per write (a frame
 * or a coalesced chunk): counted, then to the socket unchanged, into the encoder, or discarded while the
 * vendor has audio paused or discarded (a control rule: what still reaches it then, a close's drain
 * or a park's partial chunk, is counted). No parsing, awaits, logging or allocation here.
 */
export class AudioWriter {
  /** Platform audio bytes written (before encoding): what signs of life and the keepalive measure. */
  bytes = 0
  /** Platform audio bytes per ms (every channel). */
  private readonly bytesPerMs: number
  /** Built once the socket is open (`encodeWith`); null: platform audio goes through unchanged. */
  private encoder: AudioEncoder | null = null
  /** The connection's socket, once open (`encodeWith`): held here, not asked for per write. */
  private socket: VendorLeg | null = null
  private readonly rotation: RotationByAudio

  /** `rotate`: ask for a replacement (`rotateAfterAudioSeconds`). */
  constructor(
    private readonly audio: AudioMapping,
    private readonly frames: FrameCounters,
    private readonly rules: VendorControl,
    rotate: () => void
  ) {
    this.bytesPerMs = PLATFORM_BYTES_PER_MS * (audio.frames.channels ?? 1)
    this.rotation = new RotationByAudio(audio.rotateAfterAudioMs ?? null, this.bytesPerMs, rotate)
  }

  /** The open socket audio goes to, and its encoder (audio/connection/vendor-wire.ts `socketEncoder`). */
  encodeWith(socket: VendorLeg, encoder: AudioEncoder | null): void {
    this.socket = socket
    this.encoder = encoder
  }

  write(data: ArrayBuffer | Uint8Array): void {
    this.bytes += data.byteLength
    this.rotation.written(this.bytes)
    if (this.rules.gate !== 'open') return this.rules.discard(data.byteLength)
    if (this.encoder === null) {
      this.socket?.sendBinary(data)
      // What the placeholders read ({{chunk}}, {{position}}).
      this.frames.chunk++
      this.frames.audioMs += data.byteLength / this.bytesPerMs
    } else {
      this.encoder.push(data instanceof Uint8Array ? data : new Uint8Array(data))
    }
  }

  /**
   * Rotation: audio the previous connection held for an incomplete chunk (`rest`) goes first, so no
   * silence is added mid-call; returns how many platform frames that was.
   */
  takeOver(rest: Uint8Array | null): number {
    if (rest === null || this.encoder === null) return 0
    this.encoder.pushEncoded(rest)
    // Encoded bytes → 20 ms platform frames: the vendor's bytes per 20 ms (rate / 50 samples, every channel).
    const f = this.audio.frames
    const perFrame = (f.sampleRate / 50) * (f.encoding === 'pcm16' ? 2 : 1) * (f.channels ?? 1)
    return Math.round(rest.byteLength / perFrame)
  }

  /** Audio held for an incomplete chunk, given up. */
  takeRemainder(): Uint8Array | null {
    return this.encoder?.takeRemainder() ?? null
  }

  /** The encoder's incomplete chunk goes (the connection says goodbye). */
  flush(): void {
    this.encoder?.flush()
  }
}
