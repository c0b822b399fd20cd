import t from 'tap'
import { initMessage } from '../../gateway/tools/simulate'
import { startGoogleStt } from '../../gateway/tools/vendors/google-stt'
import { checkFramesFinals, framesFinals, numberedFrame, playNumbered } from '../helpers/audio'
import { runCli } from '../helpers/cli'
import { AUDIO_TOKEN, type PlatformLegClient, platformLeg, startGateway, until } from '../helpers/gateway'

// Issue 34 item 2, "both channels for a stereo join", from outside: through `serve` as it ships and the
// shipped mappings/google-stt-v2-stereo.yaml, a contact's TX and RX legs joined into one StreamingRecognize
// call of two channels, against the emulator built from the official protos. What it follows, in
// google/cloud/speech/v2/cloud_speech.proto (the google-proto-files package): ExplicitDecodingConfig
// audio_channel_count (1-8), RecognitionFeatures.MultiChannelMode (SEPARATE_RECOGNITION_PER_CHANNEL: each
// channel transcribed on its own; unspecified: only the first), and StreamingRecognitionResult.channel_tag
// (1..N). The emulator hears each channel's numbered frames apart; the TX leg sends frames 0…, the RX leg
// frames 10000…, so a result on the wrong leg shows.

const RX_BASE = 10_000

t.test('check accepts the stereo mapping: compiled against the protos and dry-run on its samples', async t => {
  const dir = t.testdir({
    'gw.yaml':
      'routes:\n  stt:\n    mapping: ../../../mappings/google-stt-v2-stereo.yaml\n    params: { project: p }\n' +
      '    join: { channels: [TX, RX] }\n    upstreams:\n      - { name: a, audio: "grpcs://speech.googleapis.com" }\n'
  })
  const out = await runCli(['check', '--config', `${dir}/gw.yaml`])
  t.equal(out.code, 0, out.stdout + out.stderr)
})

t.test(
  "a joined call in one two-channel stream: each leg gets its own channel's transcripts, on the call's timeline",
  async t => {
    const stt = await startGoogleStt({ transcribeFrames: true, resultEveryMs: 1000 })
    t.teardown(() => stt.close())
    const gw = await startGateway(t, {
      routes: {
        stt: {
          mapping: 'mappings/google-stt-v2-stereo.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          params: { project: 'demo-project' },
          upstreams: [{ name: 'a', audio: stt.url }],
          join: { channels: ['TX', 'RX'], waitSeconds: 2 }
        }
      }
    })
    const [tx, rx] = (['TX', 'RX'] as const).map(perspective =>
      platformLeg(
        t,
        gw.url('/audio/stt'),
        initMessage({ token: AUDIO_TOKEN, contactId: 934100, busNo: 4594, perspective })
      )
    ) as [PlatformLegClient, PlatformLegClient]
    for (const l of [tx, rx]) t.equal((await l.answer).command, 'CONNECTED')
    const TOTAL = 200
    // TX plays frames 0…, and with each of them RX sends its own frame RX_BASE + seq.
    await playNumbered([tx], 0, TOTAL, seq => rx.send(numberedFrame(RX_BASE + seq)))
    const txFinals = (): ReturnType<typeof framesFinals> => framesFinals(tx.messages, 'duration')
    const rxFinals = (): ReturnType<typeof framesFinals> => framesFinals(rx.messages, 'duration')
    t.ok(
      await until(
        () => txFinals().some(f => f.to >= TOTAL - 60) && rxFinals().some(f => f.to >= RX_BASE + TOTAL - 60),
        20_000
      ),
      'both legs got finals of their late audio'
    )
    t.equal(stt.sessions.length, 1, 'one stream for the contact')
    const s = stt.sessions[0]!
    t.equal(s.refusal, null, `the emulator refused nothing (${JSON.stringify(s.refusal)})`)
    t.same((s.config as any).config.explicitDecodingConfig, {
      encoding: 'MULAW',
      sampleRateHertz: 8000,
      audioChannelCount: 2
    })
    t.equal((s.config as any).config.features.multiChannelMode, 'SEPARATE_RECOGNITION_PER_CHANNEL')
    t.same(
      txFinals().filter(f => f.from >= RX_BASE),
      [],
      "the TX leg got none of the RX channel's transcripts"
    )
    t.same(
      rxFinals().filter(f => f.from < RX_BASE),
      [],
      "the RX leg got none of the TX channel's transcripts"
    )
    const perspectives = (l: PlatformLegClient): unknown[] => [
      ...new Set(l.messages.filter(m => m.messageType === 'TRANSCRIPT').map(m => (m.parameters as any).perspective))
    ]
    t.same(perspectives(tx), ['TX'], "the TX leg's results say TX")
    t.same(perspectives(rx), ['RX'], "the RX leg's results say RX")
    // The contact's timeline is the join mixer's: a leg's frame reaches it a tick or a few late (as the
    // deepgram-stereo test of issue-32-vendors.test.ts allows).
    checkFramesFinals(t, 'TX', tx.messages, 'duration', 0.3)
  }
)
