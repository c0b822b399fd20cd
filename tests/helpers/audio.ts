import { createHash } from 'node:crypto'
import { join } from 'node:path'
import { parseIsoDuration } from '../../gateway/mapping/iso-duration'
import { readAudioClip } from '../../gateway/tools/audio-file'
import type { ChildProcess } from 'node:child_process'
import type { Test } from 'tap'
import { REAL_VENDOR_PATHS, type RealVendorKind } from '../../gateway/tools/real-vendors'
import { spawnCli } from './cli'
import { sleep, until, untilOpen, type PlatformLegClient } from './gateway'
import { freePort } from './process'

/** The bundled speech clip (µ-law 8 kHz), played in 160-byte (20 ms) frames, looping. */
export const CLIP = readAudioClip(join(__dirname, '..', '..', 'examples', 'hello.ulaw'))
const FULL_FRAMES = Math.floor(CLIP.length / 160)

export function frameAt(k: number): Buffer {
  const o = (k % FULL_FRAMES) * 160
  return CLIP.subarray(o, o + 160)
}

/** Clip frames from the first, one every 20 ms, to `leg` until it is closed. */
export async function streamUntilClosed(leg: PlatformLegClient): Promise<void> {
  let open = true
  void leg.closed.then(() => {
    open = false
  })
  for (let k = 0; open; k++) {
    leg.send(frameAt(k))
    await sleep(20)
  }
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
 * How a mapping passes a final's times to the platform: `duration` (start, duration in seconds), `end`
 * (start, end in seconds), `end-ms` (start, end in milliseconds: AssemblyAI's), `iso` (offset, duration as
 * ISO 8601 durations: AudioHook's).
 */
export type FinalTimes = 'duration' | 'end' | 'end-ms' | 'iso'

/**
 * The finals a platform leg got from a transcribing emulator ("frames A-B"), with their start and duration
 * in seconds, read from `parameters` as the mapping passes them (`times`).
 */
export function framesFinals(messages: readonly Record<string, unknown>[], times: FinalTimes): FramesFinal[] {
  const out: FramesFinal[] = []
  for (const m of messages) {
    const p = m.parameters as Record<string, unknown> | undefined
    if (m.messageType !== 'TRANSCRIPT' || p?.isFinal !== true) continue
    const r = /^frames (\d+)-(\d+)$/.exec(String(m.message))
    if (r === null) throw new Error(`not a frames transcript: ${String(m.message)}`)
    const [start, duration] = finalTimes(p, times)
    out.push({ from: Number(r[1]), to: Number(r[2]), start, duration })
  }
  return out
}

function finalTimes(p: Record<string, unknown>, times: FinalTimes): [number, number] {
  const n = (k: string): number => p[k] as number
  switch (times) {
    case 'duration':
      return [n('start'), n('duration')]
    case 'end':
      return [n('start'), n('end') - n('start')]
    case 'end-ms':
      return [n('start') / 1000, (n('end') - n('start')) / 1000]
    case 'iso':
      return [(parseIsoDuration(String(p.offset)) ?? NaN) / 1000, (parseIsoDuration(String(p.duration)) ?? NaN) / 1000]
  }
}

/**
 * What issue 32 asks of one leg's finals, as lists that must be empty: frames in two finals, frames missing
 * up to the last final, finals whose start goes backwards, and finals off the call's timeline (frame n
 * starts at n × 20 ms; `tolerance` seconds: a joined call's mixer may place a leg's frame later).
 */
export function finalsProblems(
  fs: readonly FramesFinal[],
  tolerance = 1e-6
): { twice: number[]; missing: number[]; backwards: FramesFinal[]; off: FramesFinal[]; last: number } {
  const seen = new Map<number, number>()
  for (const f of fs) for (let n = f.from; n <= f.to; n++) seen.set(n, (seen.get(n) ?? 0) + 1)
  const last = fs.length === 0 ? -1 : Math.max(...fs.map(f => f.to))
  return {
    twice: [...seen].filter(([, c]) => c > 1).map(([n]) => n),
    missing: Array.from({ length: last + 1 }, (_, n) => n).filter(n => !seen.has(n)),
    backwards: fs.filter((f, k) => k > 0 && f.start < fs[k - 1].start),
    off: fs.filter(f => Math.abs(f.start - f.from * 0.02) > tolerance),
    last
  }
}

/**
 * A bundled vendor emulator as a process of its own (so a test can kill it), transcribing the frames it
 * hears (`--transcribe-frames`, a final every 50 frames of audio); killed at teardown. `args`: more options.
 */
export async function transcribingVendor(
  t: Test,
  kind: RealVendorKind,
  args: string[] = []
): Promise<{ url: string; child: ChildProcess }> {
  const port = await freePort()
  const child: ChildProcess = spawnCli([
    'vendor',
    '--kind',
    kind,
    '--port',
    String(port),
    '--result-every-frames',
    '50',
    '--transcribe-frames',
    ...args
  ])
  t.teardown(() => {
    child.kill('SIGKILL')
  })
  let out = ''
  child.stdout?.on('data', d => {
    out += String(d)
  })
  t.ok(await until(() => out.includes('vendor emulator on'), 20_000), `the ${kind} process is up`)
  return { url: `ws://127.0.0.1:${port}${REAL_VENDOR_PATHS[kind]}`, child }
}

/** Every issue-32 property of a leg's finals (`finalsProblems`), as assertions named by `label`. */
export function checkFramesFinals(
  t: Test,
  label: string,
  messages: readonly Record<string, unknown>[],
  times: FinalTimes,
  tolerance?: number
): void {
  const p = finalsProblems(framesFinals(messages, times), tolerance)
  t.same(p.twice, [], `${label}: no frame in two finals`)
  t.same(p.missing, [], `${label}: no frame missing up to the last final (${p.last})`)
  t.same(p.backwards, [], `${label}: start times never go backwards`)
  t.same(p.off, [], `${label}: every final on the call's timeline (frame n at n × 20 ms)`)
}

/**
 * Send numbered frames [from, to) on every leg at the platform's pace (`pace` times faster); `at(seq)` runs
 * after frame seq went.
 */
export async function playNumbered(
  legs: readonly PlatformLegClient[],
  from: number,
  to: number,
  at?: (seq: number) => void,
  pace = 1
): Promise<void> {
  const started = performance.now()
  for (let seq = from; seq < to; ) {
    const due = Math.min(to, from + Math.floor(((performance.now() - started) * pace) / 20) + 1)
    for (; seq < due; seq++) {
      for (const l of legs) l.send(numberedFrame(seq))
      at?.(seq)
    }
    await sleep(5)
  }
}
