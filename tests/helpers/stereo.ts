import { createHash } from 'node:crypto'
import { resolve } from 'node:path'
import type { Test } from 'tap'
import type { PlatformLegClient } from './gateway'

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

/**
 * The stereo Deepgram join route (mappings/deepgram-stereo.yaml) on one replica `v` at `dgUrl` with the
 * `${DG_KEY}` credential, waiting `waitSeconds` for a leg's partner; `extra` adds to it (auth, tenants).
 */
export function stereoRoute(dgUrl: string, waitSeconds: number, extra: Record<string, unknown> = {}) {
  return {
    mapping: resolve('mappings/deepgram-stereo.yaml'),
    ...extra,
    upstreams: [{ name: 'v', audio: dgUrl, credential: '${DG_KEY}' }],
    join: { channels: ['TX', 'RX'], waitSeconds }
  }
}

/** Every leg of `pairs` (TX, RX of contact i) answered CONNECTED (`message` says so); then each sends its side's frames 0 to `frames` - 1. */
export async function connectAndSend(
  t: Test,
  pairs: [PlatformLegClient, PlatformLegClient][],
  frames: number,
  message: string
): Promise<void> {
  const answers = await Promise.all(pairs.flat().map(l => l.answer))
  const other = answers.flatMap((a, i) =>
    a.command === 'CONNECTED' ? [] : [`${Math.floor(i / 2)} ${i % 2 === 0 ? 'TX' : 'RX'}: ${JSON.stringify(a)}`]
  )
  t.same(other, [], message)
  pairs.forEach(([tx, rx], i) => {
    for (let k = 0; k < frames; k++) {
      tx.send(sideFrame(i, 0, k))
      rx.send(sideFrame(i, 1, k))
    }
  })
}

/**
 * The stereo AudioHook join route (mappings/audiohook-stereo.yaml) with the audio token required, on one
 * replica `v` at `url` with the credential `${<keyVar>}`, for organization `org`, joining `channels` (2 s wait).
 */
export function audiohookStereoRoute(url: string, keyVar: string, org: string, channels = ['TX', 'RX']) {
  return {
    mapping: 'mappings/audiohook-stereo.yaml',
    auth: { audio: ['${AUDIO_TOKEN}'] },
    upstreams: [{ name: 'v', audio: url, credential: `\${${keyVar}}` }],
    params: { organizationId: org },
    join: { channels, waitSeconds: 2 }
  }
}
