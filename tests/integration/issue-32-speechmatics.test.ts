import t from 'tap'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { type FramesFinal, framesFinals } from '../helpers/audio'
import { type PlatformLegClient, startGateway, until } from '../helpers/gateway'
import { audioLegs, audioRoute, checkFinalsOnTimeline, streamAtRealTime } from '../helpers/legs'

// Issue 32 items 1-3 from outside, through the shipped mappings/speechmatics.yaml: a Speechmatics emulator
// that transcribes what it hears (AddTranscript / AddPartialTranscript name the platform frames they cover,
// with Speechmatics' own metadata.start_time and end_time: RecognitionMetadata of its Realtime API
// reference). One replica ends every session with an Error and close 1011 after 3 s of audio (the
// issue's case): the platform gets each frame in one final only, none missing up to the last final, with
// start times on the call's timeline that never go backwards.

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
        demo: audioRoute('mappings/speechmatics.yaml', [
          { name: 'faulty', audio: faulty.url },
          { name: 'spare', audio: spare.url }
        ])
      }
    })
    const legs = audioLegs(t, gw.url('/audio/demo'), 4, 934000)
    for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
    const TOTAL = 400 // 8 s at real time
    await streamAtRealTime(legs, TOTAL)
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
    for (const [i, leg] of legs.entries()) checkFinalsOnTimeline(t, i, finals(leg))
  }
)
