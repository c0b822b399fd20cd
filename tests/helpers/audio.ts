import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { readAudioClip } from '../../gateway/tools/audio-file'
import { sleep, untilOpen, type PlatformLegClient } from './gateway'

/** The bundled speech clip (µ-law 8 kHz), played in 160-byte (20 ms) frames, looping. */
export const CLIP = readAudioClip(join(__dirname, '..', '..', 'examples', 'hello.ulaw'))
const FULL_FRAMES = Math.floor(CLIP.length / 160)

export function frameAt(k: number): Buffer {
  const o = (k % FULL_FRAMES) * 160
  return CLIP.subarray(o, o + 160)
}

/** Send clip frames [from, to) at the platform's pace (one every 20 ms, drift-corrected) once the socket is open. */
export async function stream(leg: PlatformLegClient, from: number, to: number): Promise<Buffer> {
  await untilOpen(leg.ws)
  const sent: Buffer[] = []
  const start = performance.now()
  let k = from
  while (k < to) {
    const due = Math.min(to, from + Math.floor((performance.now() - start) / 20) + 1)
    for (; k < due; k++) {
      const f = frameAt(k)
      sent.push(f)
      leg.send(f)
    }
    await sleep(5)
  }
  return Buffer.concat(sent)
}

export const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex')

/** A 160-byte frame whose content is unique to (leg, seq), so order and integrity show in a hash. */
export function uniqueFrame(leg: number, seq: number): Buffer {
  const b = Buffer.alloc(160, (leg * 7 + seq) & 0xff)
  b.writeUInt32BE(leg, 0)
  b.writeUInt32BE(seq, 4)
  return b
}

/** sha256 of `uniqueFrame(leg, i)` for i in [from, to): what a vendor that got them all, in order, hashes to. */
export function uniqueFramesHash(leg: number, from: number, to: number): string {
  const h = createHash('sha256')
  for (let i = from; i < to; i++) h.update(uniqueFrame(leg, i))
  return h.digest('hex')
}

/**
 * A platform frame carrying its number in the marker the bundled emulators' `--transcribe-frames` read
 * (4 zero bytes, then the number, 32-bit big-endian), the rest 0xff.
 */
export function numberedFrame(seq: number): Buffer {
  const b = Buffer.alloc(160, 0xff)
  b.writeUInt32BE(0, 0)
  b.writeUInt32BE(seq, 4)
  return b
}

/** A final transcript of a transcribing emulator: the frames it names and its times as the platform got them. */
export interface FramesFinal {
  from: number
  to: number
  start: number
  duration: number
}

/**
 * The finals a platform leg got from a transcribing emulator ("frames A-B"), with their start and duration
 * from `parameters`: `duration` as the mapping passes it, or `end` (then duration is end - start).
 */
export function framesFinals(messages: readonly Record<string, unknown>[], times: 'duration' | 'end'): FramesFinal[] {
  const out: FramesFinal[] = []
  for (const m of messages) {
    const p = m.parameters as { isFinal?: boolean; start?: number; duration?: number; end?: number } | undefined
    if (m.messageType !== 'TRANSCRIPT' || p?.isFinal !== true) continue
    const r = /^frames (\d+)-(\d+)$/.exec(String(m.message))
    if (r === null) throw new Error(`not a frames transcript: ${String(m.message)}`)
    const duration = times === 'duration' ? p.duration! : p.end! - p.start!
    out.push({ from: Number(r[1]), to: Number(r[2]), start: p.start!, duration })
  }
  return out
}
