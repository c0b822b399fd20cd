import t, { type Test } from 'tap'
import type { ChildProcess } from 'node:child_process'
import { initMessage } from '../../gateway/tools/simulate'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { type FramesFinal, framesFinals, numberedFrame } from '../helpers/audio'
import { spawnCli } from '../helpers/cli'
import { AUDIO_TOKEN, platformLeg, type PlatformLegClient, sleep, startGateway, until } from '../helpers/gateway'
import { freePort } from '../helpers/process'

// Issue 32 items 1-3 from outside, through the shipped mappings/deepgram.yaml: a Deepgram emulator that
// transcribes what it hears (each final names the platform frames it covers, with Deepgram's own
// `start` and `duration` in seconds from the start of its stream: the Results fields of Deepgram's
// live-streaming reference and @deepgram/sdk's LiveTranscriptionEvent). A replica is SIGKILLed mid-call:
// the platform gets each frame in one final only, none missing up to the last final, with start times
// on the call's timeline (frame n at n × 20 ms) that never go backwards.

/** The Deepgram emulator as a process of its own (so it can be killed), transcribing the frames it hears. */
async function deepgramProcess(t: Test): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort()
  const child: ChildProcess = spawnCli([
    'vendor',
    '--kind',
    'deepgram',
    '--port',
    String(port),
    '--result-every-frames',
    '50',
    '--transcribe-frames'
  ])
  t.teardown(() => {
    child.kill('SIGKILL')
  })
  let out = ''
  child.stdout!.on('data', d => {
    out += String(d)
  })
  t.ok(await until(() => out.includes('vendor emulator on'), 20_000), 'the vendor process is up')
  return { port, child }
}

const frame = numberedFrame
const finals = (leg: PlatformLegClient): FramesFinal[] => framesFinals(leg.messages, 'duration')

t.test(
  'a Deepgram replica killed mid-call: every frame in one final only, none missing, times on the call timeline and never backwards',
  async t => {
    const doomed = await deepgramProcess(t)
    const spare = await startRealVendor({ kind: 'deepgram', resultEveryMs: 1000, transcribeFrames: true })
    t.teardown(() => spare.close())
    const gw = await startGateway(t, {
      audio: { replayRate: 4, failoverTimeoutSeconds: 10 },
      routes: {
        demo: {
          mapping: 'mappings/deepgram.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [
            { name: 'doomed', audio: `ws://127.0.0.1:${doomed.port}/v1/listen` },
            { name: 'spare', audio: spare.url }
          ]
        }
      }
    })
    const legs: PlatformLegClient[] = []
    for (let i = 0; i < 4; i++)
      legs.push(
        platformLeg(
          t,
          gw.url('/audio/demo'),
          initMessage({ token: AUDIO_TOKEN, contactId: 933000 + i, busNo: 4594, perspective: 'TX' })
        )
      )
    for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
    // 9 s of call at real time; the doomed replica is killed at 5.1 s (mid-segment), when the replay window
    // (3.5 s) no longer reaches back to the call's start.
    const KILL_AT = 255
    const TOTAL = 450
    const started = performance.now()
    for (let seq = 0; seq < TOTAL; ) {
      const due = Math.min(TOTAL, Math.floor((performance.now() - started) / 20) + 1)
      for (; seq < due; seq++) {
        for (const l of legs) l.send(frame(seq))
        if (seq === KILL_AT) doomed.child.kill('SIGKILL')
      }
      await sleep(5)
    }
    t.ok(
      await until(() => legs.every(l => finals(l).some(f => f.to >= TOTAL - 60)), 20_000),
      'every leg got finals past the kill'
    )
    t.ok(
      gw.logs.lines.some(l => l.event === 'failover_done'),
      'the legs on the killed replica failed over'
    )
    for (const [i, leg] of legs.entries()) {
      const fs = finals(leg)
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
  }
)
