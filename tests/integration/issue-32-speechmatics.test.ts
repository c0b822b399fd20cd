import t from 'tap'
import { type FramesFinal, framesFinals, numberedFrame } from '../helpers/audio'
import { initMessage } from '../../gateway/tools/simulate'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { AUDIO_TOKEN, platformLeg, type PlatformLegClient, sleep, startGateway, until } from '../helpers/gateway'

// Issue 32 items 1-3 from outside, through the shipped mappings/speechmatics.yaml: a Speechmatics emulator
// that transcribes what it hears (AddTranscript / AddPartialTranscript name the platform frames they cover,
// with Speechmatics' own metadata.start_time and end_time: RecognitionMetadata of its Realtime API
// reference). One replica ends every session with an Error and close 1011 after 3 s of audio (the
// issue's case): the platform gets each frame in one final only, none missing up to the last final, with
// start times on the call's timeline that never go backwards.

const frame = numberedFrame
const finals = (leg: PlatformLegClient): FramesFinal[] => framesFinals(leg.messages, 'end')

t.test(
  'a Speechmatics replica that errors and closes 1011 mid-call: every frame in one final only, none missing, times on the call timeline',
  async t => {
    const faulty = await startRealVendor({
      kind: 'speechmatics',
      resultEveryMs: 1000,
      transcribeFrames: true,
      failAfterAudioMs: 3000
    })
    const spare = await startRealVendor({ kind: 'speechmatics', resultEveryMs: 1000, transcribeFrames: true })
    t.teardown(() => Promise.all([faulty.close(), spare.close()]))
    const gw = await startGateway(t, {
      audio: { replayRate: 4, failoverTimeoutSeconds: 10 },
      routes: {
        demo: {
          mapping: 'mappings/speechmatics.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [
            { name: 'faulty', audio: faulty.url },
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
          initMessage({ token: AUDIO_TOKEN, contactId: 934000 + i, busNo: 4594, perspective: 'TX' })
        )
      )
    for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
    const TOTAL = 400 // 8 s at real time
    const started = performance.now()
    for (let seq = 0; seq < TOTAL; ) {
      const due = Math.min(TOTAL, Math.floor((performance.now() - started) / 20) + 1)
      for (; seq < due; seq++) for (const l of legs) l.send(frame(seq))
      await sleep(5)
    }
    t.ok(
      await until(() => legs.every(l => finals(l).some(f => f.to >= TOTAL - 80)), 20_000),
      'every leg got finals to near the end'
    )
    t.ok(
      legs.some(l => l.messages.some(m => m.messageType === 'VENDOR_ERROR')),
      "the faulty replica's Error reached the platform as VENDOR_ERROR (the mapping's rule)"
    )
    t.ok(
      gw.logs.lines.some(l => l.event === 'failover_done'),
      'and its legs failed over'
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
