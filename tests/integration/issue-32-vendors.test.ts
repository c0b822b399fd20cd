import t from 'tap'
import { initMessage } from '../../gateway/tools/simulate'
import type { RealVendorKind } from '../../gateway/tools/real-vendors'
import { checkFramesFinals, type FinalTimes, framesFinals, playNumbered, transcribingVendor } from '../helpers/audio'
import { AUDIO_TOKEN, platformLeg, startGateway, until } from '../helpers/gateway'

// Issue 32 items 1-3 from outside, through `serve` as it ships and the shipped mappings, with each vendor's
// emulator as a process of its own that transcribes what it hears (--transcribe-frames: each final names the
// platform frames it covers, "frames A-B", with that vendor's own time fields). One replica is SIGKILLed
// mid-call; the platform must get each frame in one final only, none missing up to the last final, with
// start times on the call's timeline (frame n at n × 20 ms) that never go backwards. The vendors' documents:
// - Amazon Transcribe: API reference, "Result" (streaming; StartTime, EndTime in seconds, IsPartial) inside
//   "TranscriptEvent" > "Transcript" > "Results"; the same shape as @aws-sdk/client-transcribe-streaming's
//   Result. Several Results per event: each one a result of its own (mappings/amazon-transcribe.yaml `each`).
// - AssemblyAI: Universal-Streaming v3 API reference, the Turn message (words[].start / end in ms,
//   end_of_turn, turn_is_formatted).
// - AudioHook: Genesys AudioHook protocol, the `event` message's transcript entity (offset and duration as
//   ISO 8601 durations, isFinal; EventEntityDataTranscript in purecloudlabs/audiohook-reference-implementation
//   protocol/entities-transcript.ts).
// - Deepgram (stereo, a joined call): the live-streaming reference's Results (start, duration in seconds,
//   is_final, channel_index) with multichannel=true.

const AWS = { id: 'AKIAEMULATOR00000032', secret: 'issue-32/s3cret+key' }
const ORG = '2f1b7a3c-4d5e-4f60-8a7b-9c0d1e2f3a4b'

interface Case {
  kind: RealVendorKind
  mapping: string
  times: FinalTimes
  params?: Record<string, unknown>
}

const CASES: Case[] = [
  {
    kind: 'amazon-transcribe',
    mapping: 'mappings/amazon-transcribe.yaml',
    times: 'end',
    params: { region: 'us-west-2' }
  },
  { kind: 'assemblyai', mapping: 'mappings/assemblyai.yaml', times: 'end-ms' },
  { kind: 'audiohook', mapping: 'mappings/audiohook.yaml', times: 'iso', params: { organizationId: ORG } }
]

/** The route's replicas: the doomed one and the spare (Transcribe's with the signing keys the emulator checks). */
function upstreams(c: Case, urls: string[]): Record<string, unknown>[] {
  const names = ['doomed', 'spare']
  return urls.map((audio, i) => ({
    name: names[i],
    audio,
    ...(c.kind === 'amazon-transcribe'
      ? { signing: { accessKeyId: '${AWS_KEY_ID}', secretAccessKey: '${AWS_SECRET}' } }
      : {})
  }))
}

for (const c of CASES)
  t.test(`${c.kind}: a replica killed mid-call, each frame in one final, on the call's timeline`, async t => {
    const aws = c.kind === 'amazon-transcribe' ? ['--api-key', `${AWS.id}:${AWS.secret}`] : []
    const doomed = await transcribingVendor(t, c.kind, aws)
    const spare = await transcribingVendor(t, c.kind, aws)
    const gw = await startGateway(
      t,
      {
        audio: { replayRate: 4, failoverTimeoutSeconds: 10 },
        routes: {
          demo: {
            mapping: c.mapping,
            auth: { audio: ['${AUDIO_TOKEN}'] },
            ...(c.params !== undefined ? { params: c.params } : {}),
            upstreams: upstreams(c, [doomed.url, spare.url])
          }
        }
      },
      { AWS_KEY_ID: AWS.id, AWS_SECRET: AWS.secret }
    )
    const legs = Array.from({ length: 4 }, (_v, i) =>
      platformLeg(
        t,
        gw.url('/audio/demo'),
        initMessage({ token: AUDIO_TOKEN, contactId: 935000 + i, busNo: 4594, perspective: 'TX' })
      )
    )
    for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
    // 9 s of call at real time; the doomed replica is killed at 5.1 s (mid-result), when the replay window
    // (3.5 s) no longer reaches back to the call's start.
    const TOTAL = 450
    await playNumbered(legs, 0, TOTAL, seq => {
      if (seq === 255) doomed.child.kill('SIGKILL')
    })
    t.ok(
      await until(() => legs.every(l => framesFinals(l.messages, c.times).some(f => f.to >= TOTAL - 60)), 30_000),
      'every leg got finals past the kill'
    )
    t.ok(
      gw.logs.lines.some(l => l.event === 'failover_done'),
      'the legs on the killed replica failed over'
    )
    for (const [i, leg] of legs.entries()) checkFramesFinals(t, `leg ${i}`, leg.messages, c.times)
  })

t.test("deepgram-stereo (a joined call): a replica killed mid-call, each leg's frames in one final each", async t => {
  const doomed = await transcribingVendor(t, 'deepgram')
  const spare = await transcribingVendor(t, 'deepgram')
  const gw = await startGateway(t, {
    audio: { replayRate: 4, failoverTimeoutSeconds: 10 },
    routes: {
      dg: {
        mapping: 'mappings/deepgram-stereo.yaml',
        auth: { audio: ['${AUDIO_TOKEN}'] },
        upstreams: [
          { name: 'doomed', audio: doomed.url },
          { name: 'spare', audio: spare.url }
        ],
        join: { channels: ['TX', 'RX'], waitSeconds: 2 }
      }
    }
  })
  const contacts = [0, 1].map(i =>
    (['TX', 'RX'] as const).map(perspective =>
      platformLeg(
        t,
        gw.url('/audio/dg'),
        initMessage({ token: AUDIO_TOKEN, contactId: 936000 + i, busNo: 4594, perspective })
      )
    )
  )
  const legs = contacts.flat()
  for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
  const TOTAL = 450
  await playNumbered(legs, 0, TOTAL, seq => {
    if (seq === 255) doomed.child.kill('SIGKILL')
  })
  t.ok(
    await until(() => legs.every(l => framesFinals(l.messages, 'duration').some(f => f.to >= TOTAL - 60)), 30_000),
    'every leg got finals past the kill'
  )
  t.ok(
    gw.logs.lines.some(l => l.event === 'failover_done'),
    'the contacts on the killed replica failed over'
  )
  // The contact's timeline is the join mixer's: a leg's frame reaches it a tick or a few late (the mixer
  // fills a side that has not arrived yet with silence), never a failover's whole replay off.
  for (const [i, [tx, rx]] of contacts.entries()) {
    checkFramesFinals(t, `contact ${i} TX`, tx.messages, 'duration', 0.3)
    checkFramesFinals(t, `contact ${i} RX`, rx.messages, 'duration', 0.3)
  }
})
