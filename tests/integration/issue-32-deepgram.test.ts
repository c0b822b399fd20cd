import t from 'tap'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { type FramesFinal, framesFinals } from '../helpers/audio'
import { type PlatformLegClient, startGateway } from '../helpers/gateway'
import { audioLegs, audioRoute, checkFinalsOnTimeline, streamAtRealTime, checkFailedOver } from '../helpers/legs'
import { vendorProcess } from '../helpers/vendor-process'

// Issue 32 items 1-3 from outside, through the shipped mappings/deepgram.yaml: a Deepgram emulator that
// transcribes what it hears (each final names the platform frames it covers, with Deepgram's own
// `start` and `duration` in seconds from the start of its stream: the Results fields of Deepgram's
// live-streaming reference and @deepgram/sdk's LiveTranscriptionEvent). A replica is SIGKILLed mid-call:
// the platform gets each frame in one final only, none missing up to the last final, with start times
// on the call's timeline (frame n at n × 20 ms) that never go backwards.

const finals = (leg: PlatformLegClient): FramesFinal[] => framesFinals(leg.messages, 'duration')

t.test(
  'a Deepgram replica killed mid-call: every frame in one final only, none missing, times on the call timeline and never backwards',
  async t => {
    const doomed = await vendorProcess(t, 'deepgram', ['--result-every-frames', '50', '--transcribe-frames'])
    const spare = await startRealVendor({ kind: 'deepgram', resultEveryMs: 1000, transcribeFrames: true })
    t.teardown(() => spare.close())
    const gw = await startGateway(t, {
      audio: { replayRate: 4, failoverTimeoutSeconds: 10 },
      routes: {
        demo: audioRoute('mappings/deepgram.yaml', [
          { name: 'doomed', audio: `ws://127.0.0.1:${doomed.port}/v1/listen` },
          { name: 'spare', audio: spare.url }
        ])
      }
    })
    const legs = audioLegs(t, gw.url('/audio/demo'), 4, 933000)
    for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
    // 9 s of call at real time; the doomed replica is killed at 5.1 s (mid-segment), when the replay window
    // (3.5 s) no longer reaches back to the call's start.
    const KILL_AT = 255
    const TOTAL = 450
    await streamAtRealTime(legs, TOTAL, seq => {
      if (seq === KILL_AT) doomed.child.kill('SIGKILL')
    })
    await checkFailedOver(t, gw, legs, finals, TOTAL)
    for (const [i, leg] of legs.entries()) checkFinalsOnTimeline(t, i, finals(leg))
  }
)
