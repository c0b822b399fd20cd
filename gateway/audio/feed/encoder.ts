import type { FramesSpec } from '../../mapping/compile'
import { frameMessage } from '../../mapping/event-stream'
import { mulawDecodeInto, pcm16ToBytesLE, Rechunker, Resampler } from './codec'

export const IDENTITY_FRAMES: FramesSpec = { framing: 'binary', encoding: 'mulaw', sampleRate: 8000, chunkMs: null }

/** True when platform frames can go to the vendor unchanged (the fastest path: no encoder at all). */
export function isIdentity(f: FramesSpec): boolean {
  return f.framing === 'binary' && f.encoding === 'mulaw' && f.sampleRate === 8000 && f.chunkMs === null
}

/**
 * Counters a vendor socket's frames may carry, substituted into `{{name}}` (inside a string) and
 * `"{{#name}}"` (the whole JSON string becomes a number) placeholders. Reset for every vendor socket.
 * - seq: frames sent that carry `seq` (1-based, counting the frame being sent)
 * - chunk: audio chunks sent (1-based); timestamp: ms of audio before this chunk
 * - position: ISO-8601 duration of audio sent so far ("PT1.24S"); serverseq: last `seq` the vendor sent
 */
export class FrameCounters {
  seq = 0
  chunk = 0
  audioMs = 0
  serverseq = 0
}

const PLACEHOLDER =
  /"\{\{#(seq|chunk|timestamp|serverseq|audioMs)\}\}"|\{\{(seq|chunk|timestamp|payload|position|serverseq|audioMs)\}\}/g

function position(ms: number): string {
  return `PT${(Math.round(ms) / 1000).toFixed(3).replace(/\.?0+$/, '')}S`
}

function placeholderValue(name: string, c: FrameCounters): string {
  switch (name) {
    case 'seq':
      return String(c.seq)
    case 'chunk':
      return String(c.chunk)
    case 'timestamp':
      return String(Math.round(c.audioMs))
    case 'audioMs':
      return String(Math.round(c.audioMs))
    case 'position':
      return position(c.audioMs)
    case 'serverseq':
      return String(c.serverseq)
    default:
      return ''
  }
}

/** Fill the placeholders of a control frame (open, keepalive, pause, close…). Control path only. */
export function fillControl(text: string, c: FrameCounters): string {
  if (!text.includes('{{')) return text
  if (text.includes('{{seq}}') || text.includes('{{#seq}}')) c.seq++
  return text.replace(PLACEHOLDER, (_m, num: string | undefined, str: string | undefined) =>
    placeholderValue(num ?? str!, c)
  )
}

/**
 * A json-base64 template, split once per vendor socket into static text and placeholders, so each
 * chunk costs one base64 encoding and a string join (the framing), with no JSON work.
 */
export class MediaTemplate {
  private readonly parts: string[] = []
  private readonly names: string[] = []
  readonly usesSeq: boolean
  constructor(templateJson: string) {
    let last = 0
    PLACEHOLDER.lastIndex = 0
    for (let m = PLACEHOLDER.exec(templateJson); m !== null; m = PLACEHOLDER.exec(templateJson)) {
      this.parts.push(templateJson.slice(last, m.index))
      this.names.push(m[1] ?? m[2])
      last = m.index + m[0].length
    }
    this.parts.push(templateJson.slice(last))
    this.usesSeq = this.names.includes('seq')
  }

  render(payload: string, c: FrameCounters): string {
    let out = this.parts[0]
    for (let i = 0; i < this.names.length; i++) {
      const n = this.names[i]
      out += (n === 'payload' ? payload : placeholderValue(n, c)) + this.parts[i + 1]
    }
    return out
  }
}

export interface EncoderSink {
  binary: (chunk: Uint8Array) => void
  text: (frame: string) => void
}

/**
 * Platform µ-law frames → the vendor's encoding, rate (8, 16 or 24 kHz), chunking and framing.
 * Preallocated scratch buffers; the rechunker's buffer is reused, so sinks MUST consume a chunk before
 * returning (the `ws` client's send copies it while masking). `eventHeaders`: event-stream framing, each
 * chunk one message with these headers (encoded once per socket; the message is the one allocation).
 */
export class AudioEncoder {
  private readonly resampler: Resampler | null
  private readonly rechunker: Rechunker | null
  private pcm = new Int16Array(0)
  private resampled = new Int16Array(0)
  private bytes = new Uint8Array(0)
  private readonly bytesPerMs: number

  constructor(
    private readonly spec: FramesSpec,
    private readonly counters: FrameCounters,
    private readonly template: MediaTemplate | null,
    private readonly sink: EncoderSink,
    private readonly eventHeaders: Uint8Array | null = null
  ) {
    this.resampler = spec.sampleRate === 8000 ? null : new Resampler(8000, spec.sampleRate)
    const bytesPerSample = spec.encoding === 'pcm16' ? 2 : 1
    this.bytesPerMs = (spec.sampleRate * bytesPerSample * (spec.channels ?? 1)) / 1000
    this.rechunker =
      spec.chunkMs === null
        ? null
        : new Rechunker({ chunkBytes: Math.round(spec.chunkMs * this.bytesPerMs), onChunk: c => this.emit(c) })
  }

  /** Per-frame path: one platform frame in. */
  push(mulaw: Uint8Array): void {
    let out: Uint8Array = mulaw
    if (this.spec.encoding === 'pcm16') {
      const n = mulaw.length
      if (this.pcm.length < n) this.pcm = new Int16Array(n * 2)
      mulawDecodeInto(mulaw, this.pcm)
      let samples = this.pcm
      let m = n
      if (this.resampler !== null) {
        const need = this.resampler.maxOutput(n)
        if (this.resampled.length < need) this.resampled = new Int16Array(need * 2)
        m = this.resampler.process(this.pcm, n, this.resampled)
        samples = this.resampled
      }
      if (this.bytes.length < m * 2) this.bytes = new Uint8Array(m * 4)
      pcm16ToBytesLE(samples, m, this.bytes, 0)
      out = this.bytes.subarray(0, m * 2)
    }
    if (this.rechunker !== null) this.rechunker.push(out)
    else this.emit(out)
  }

  /**
   * Send what the rechunker still holds (end of the session, or before a rotation), padded with
   * silence to a whole chunk: vendors with a minimum chunk (AssemblyAI: 50 ms) refuse a short one.
   */
  flush(): void {
    this.rechunker?.flush(this.spec.encoding === 'mulaw' ? 0xff : 0x00)
  }

  /** The audio held for an incomplete chunk, already encoded (handed to a rotated-in socket). */
  takeRemainder(): Uint8Array | null {
    return this.rechunker?.take() ?? null
  }

  /** Audio already in the vendor's encoding (another encoder's remainder) goes in ahead of new audio. */
  pushEncoded(bytes: Uint8Array): void {
    if (this.rechunker !== null) this.rechunker.push(bytes)
    else this.emit(bytes)
  }

  private emit(chunk: Uint8Array): void {
    const c = this.counters
    c.chunk++
    if (this.eventHeaders !== null) {
      this.sink.binary(frameMessage(this.eventHeaders, chunk))
    } else if (this.template === null) {
      this.sink.binary(chunk)
    } else {
      if (this.template.usesSeq) c.seq++
      this.sink.text(
        this.template.render(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('base64'), c)
      )
    }
    c.audioMs += chunk.length / this.bytesPerMs
  }
}
