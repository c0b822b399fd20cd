import { createHash } from 'node:crypto'

// Audio for stereo join tests: each side of each contact sends its own recognisable frames.

/** Samples (µ-law bytes) per 20 ms at 8 kHz. */
export const TICK = 160

/** Frame `k` of one side of a contact: µ-law bytes that are never 0xFF (silence), so filler is told apart. */
export function sideFrame(contact: number, side: number, k: number): Buffer {
  const b = Buffer.alloc(TICK)
  for (let i = 0; i < TICK; i++) b[i] = (contact * 7 + side * 101 + k * 13 + i) % 255
  return b
}

/** Frames [from, to) of one side of a contact, as one buffer. */
export const sideBytes = (contact: number, side: number, from: number, to: number): Buffer =>
  Buffer.concat(Array.from({ length: to - from }, (_v, k) => sideFrame(contact, side, from + k)))

export const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex')
