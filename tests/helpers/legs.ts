import type { Test } from 'tap'
import { initMessage } from '../../gateway/tools/simulate'
import { type FramesFinal, numberedFrame } from './audio'
import { AUDIO_TOKEN, platformLeg, type PlatformLegClient, sleep, type TestGateway, until } from './gateway'

// What the integration tests' platform legs say and do, said once: the init message with the audio token
// (bus 4594), a route's config on named replicas, a call streamed at real time, and the finals of a
// transcribing emulator checked against the call's timeline.

/** The init message of contact `contactId`, channel `perspective`, with the audio token. */
export const audioInit = (contactId: number, perspective = 'TX'): Record<string, unknown> =>
  initMessage({ token: AUDIO_TOKEN, contactId, busNo: 4594, perspective })

/** `count` platform legs to `url`, contacts `firstContactId`, +1, ... on channel TX. */
export function audioLegs(t: Test, url: string, count: number, firstContactId: number): PlatformLegClient[] {
  return Array.from({ length: count }, (_, i) => platformLeg(t, url, audioInit(firstContactId + i)))
}

/** A route on `mapping` with the audio token required, on the replicas named in `upstreams`. */
export function audioRoute(
  mapping: string,
  upstreams: Record<string, unknown>[],
  extra: Record<string, unknown> = {}
): Record<string, unknown> {
  return { mapping, auth: { audio: ['${AUDIO_TOKEN}'] }, upstreams, ...extra }
}

/** Frames 0 to `total` - 1 (numberedFrame) to every leg at real time (20 ms a frame); `after(seq)` once each is sent. */
export async function streamAtRealTime(
  legs: PlatformLegClient[],
  total: number,
  after: (seq: number) => void = () => {}
): Promise<void> {
  const started = performance.now()
  for (let seq = 0; seq < total; ) {
    const due = Math.min(total, Math.floor((performance.now() - started) / 20) + 1)
    for (; seq < due; seq++) {
      for (const l of legs) l.send(numberedFrame(seq))
      after(seq)
    }
    await sleep(5)
  }
}

/**
 * Leg `i`'s finals: each frame in one final only, none missing up to the last final, start times that never
 * go backwards, and every final on the call's timeline (frame n at n × 20 ms).
 */
export function checkFinalsOnTimeline(t: Test, i: number, fs: FramesFinal[]): void {
  const seen = new Map<number, number>()
  for (const f of fs) for (let n = f.from; n <= f.to; n++) seen.set(n, (seen.get(n) ?? 0) + 1)
  const last = Math.max(...fs.map(f => f.to))
  const twice = [...seen].filter(([, c]) => c > 1).map(([n]) => n)
  const missing = Array.from({ length: last + 1 }, (_, n) => n).filter(n => !seen.has(n))
  t.same(twice, [], `leg ${i}: no frame in two finals`)
  t.same(missing, [], `leg ${i}: no frame missing up to the last final (${last})`)
  const backwards = fs.filter((f, k) => k > 0 && f.start < fs[k - 1].start)
  t.same(backwards, [], `leg ${i}: start times never go backwards`)
  const off = fs.filter(
    f => Math.abs(f.start - f.from * 0.02) > 1e-6 || Math.abs(f.duration - (f.to - f.from + 1) * 0.02) > 1e-6
  )
  t.same(off, [], `leg ${i}: every final on the call's timeline (frame n at n × 20 ms)`)
}

/** After a replica was killed mid-call: every leg got finals past the kill (up to `total` - 60 frames), and `gw` failed legs over. */
export async function checkFailedOver(
  t: Test,
  gw: TestGateway,
  legs: PlatformLegClient[],
  finals: (leg: PlatformLegClient) => FramesFinal[],
  total: number
): Promise<void> {
  t.ok(
    await until(() => legs.every(l => finals(l).some(f => f.to >= total - 60)), 20_000),
    'every leg got finals past the kill'
  )
  t.ok(
    gw.logs.lines.some(l => l.event === 'failover_done'),
    'the legs on the killed replica failed over'
  )
}
