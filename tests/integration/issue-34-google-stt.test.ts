import t, { type Test } from 'tap'
import { checkFailedOver, audioLegs } from '../helpers/legs'
import type { ChildProcess } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { initMessage } from '../../gateway/tools/simulate'
import { type GoogleSttEmulator, startGoogleStt } from '../../gateway/tools/vendors/google-stt'
import { type FramesFinal, framesFinals, numberedFrame, playNumbered, sha256 } from '../helpers/audio'
import { runCli, spawnCli } from '../helpers/cli'
import { AUDIO_TOKEN, platformLeg, type PlatformLegClient, startGateway, until } from '../helpers/gateway'
import { freePort } from '../helpers/process'
import { checkRotatedStreams, mappingCopy } from '../helpers/grpc'

// Issue 34 items 1, 2 and 5 from outside, through `serve` as it ships and the shipped
// mappings/google-stt-v2.yaml, against the Speech-to-Text v2 emulator built from the official protos
// (gateway/tools/vendors/google-stt.ts; its checks follow cloud_speech.proto's StreamingRecognizeRequest,
// StreamingRecognitionConfig and ExplicitDecodingConfig comments, and "Quotas and limits": 5 minutes of
// audio per stream, then ABORTED). The emulator transcribes the numbered frames it hears ("frames A-B"),
// with word offsets and resultEndOffset counted from the start of its stream, as the API does.

const MAPPING = join(__dirname, '..', '..', 'mappings', 'google-stt-v2.yaml')
const finals = (leg: PlatformLegClient): FramesFinal[] => framesFinals(leg.messages, 'duration')

/** Each frame in one final only, none missing up to the last final, times on the call's timeline. */
function checkFinals(t: Test, leg: PlatformLegClient, label: string): number {
  const fs = finals(leg)
  const seen = new Map<number, number>()
  for (const f of fs) for (let n = f.from; n <= f.to; n++) seen.set(n, (seen.get(n) ?? 0) + 1)
  const last = Math.max(-1, ...fs.map(f => f.to))
  t.same(
    [...seen].filter(([, c]) => c > 1).map(([n]) => n),
    [],
    `${label}: no frame in two finals`
  )
  t.same(
    Array.from({ length: last + 1 }, (_, n) => n).filter(n => !seen.has(n)),
    [],
    `${label}: no frame missing up to the last final (${last})`
  )
  const off = fs.filter(
    f => Math.abs(f.start - f.from * 0.02) > 1e-6 || Math.abs(f.duration - (f.to - f.from + 1) * 0.02) > 1e-6
  )
  t.same(off, [], `${label}: every final on the call's timeline (frame n at n × 20 ms)`)
  if (off.length > 0 || seen.size !== last + 1) t.comment(JSON.stringify(fs))
  return last
}

/** Frames [from, to) at `pace` × real time (one frame every 20 / pace ms, drift-corrected). */
/** Numbered frames [from, to) on every leg, `pace` times faster than the platform's (helpers/audio.ts). */
const sendFrames = (legs: PlatformLegClient[], from: number, to: number, pace: number, at?: (n: number) => void) =>
  playNumbered(legs, from, to, at, pace)

function route(upstreams: { name: string; audio: string }[], mapping = MAPPING) {
  return {
    routes: {
      stt: { mapping, auth: { audio: ['${AUDIO_TOKEN}'] }, params: { project: 'demo-project' }, upstreams }
    }
  }
}

async function emulator(t: Test, opts: Parameters<typeof startGoogleStt>[0] = {}): Promise<GoogleSttEmulator> {
  const e = await startGoogleStt({ transcribeFrames: true, resultEveryMs: 1000, ...opts })
  t.teardown(() => e.close())
  return e
}

t.test(
  'transcripts reach the platform through serve with the shipped mapping; the emulator refuses none of its requests',
  async t => {
    const stt = await emulator(t)
    const gw = await startGateway(t, route([{ name: 'a', audio: stt.url }]))
    const leg = platformLeg(
      t,
      gw.url('/audio/stt'),
      initMessage({ token: AUDIO_TOKEN, contactId: 934001, busNo: 4594, perspective: 'TX' })
    )
    const answer = await leg.answer
    t.equal(answer.command, 'CONNECTED', JSON.stringify(answer))
    await sendFrames([leg], 0, 250, 2)
    const sent = Buffer.concat(Array.from({ length: 250 }, (_, n) => numberedFrame(n)))
    leg.ws.close(1000)
    t.ok(
      await until(() => stt.sessions[0]?.ended !== null && stt.sessions[0]?.ended !== undefined, 10_000),
      'the stream ended'
    )
    t.ok(await until(() => finals(leg).some(f => f.to === 249), 10_000), 'the final of the last frames arrived')
    const s = stt.sessions[0]!
    t.equal(s.refusal, null, `the emulator refused nothing (${JSON.stringify(s.refusal)})`)
    t.equal(s.ended, 'OK', 'the gateway half-closed and the stream ended OK')
    t.equal(s.recognizer, 'projects/demo-project/locations/global/recognizers/_')
    t.same((s.config as any).config.explicitDecodingConfig, {
      encoding: 'MULAW',
      sampleRateHertz: 8000,
      audioChannelCount: 1
    })
    t.equal((s.config as any).streamingFeatures.interimResults, true, 'interim results asked for')
    t.equal(s.audioBytes, sent.length, 'every platform byte reached the stream')
    t.equal(s.sha256, sha256(sent), 'in order and unchanged (µ-law as the platform sent it)')
    t.ok(s.maxAudioRequestBytes <= 15000, `every audio request within the limit (${s.maxAudioRequestBytes} bytes)`)
    t.ok(
      leg.messages.some(m => m.messageType === 'TRANSCRIPT' && (m.parameters as any).isFinal === false),
      'interims reach the platform'
    )
    t.equal(checkFinals(t, leg, 'the leg'), 249, 'the finals cover the call (a final per second of audio)')
  }
)

t.test(
  'a stream rotated before its limit (20 s of audio here, sent at 5× real time): none ABORTED, no audio missing or repeated, no final repeated',
  async t => {
    const mapping = mappingCopy(t, MAPPING, 'rotateAfterAudioSeconds: 280', 'rotateAfterAudioSeconds: 15')
    const stt = await emulator(t, { maxStreamAudioMs: 20_000 })
    const gw = await startGateway(t, route([{ name: 'a', audio: stt.url }], mapping))
    const leg = platformLeg(
      t,
      gw.url('/audio/stt'),
      initMessage({ token: AUDIO_TOKEN, contactId: 934002, busNo: 4594, perspective: 'TX' })
    )
    t.equal((await leg.answer).command, 'CONNECTED')
    const TOTAL = 3000 // 60 s of call
    await sendFrames([leg], 0, TOTAL, 5)
    // The last stream's cadence starts where it took over: its last whole second of audio ends within 50 frames
    // of the end (the rest would come at its half-close, after the platform hung up).
    t.ok(await until(() => finals(leg).some(f => f.to >= TOTAL - 50), 10_000), 'finals reach the last second')
    const last = checkFinals(t, leg, 'the leg')
    t.ok(last >= TOTAL - 50, `finals up to frame ${last}`)
    // The old stream's last finals come while the new one already transcribes: none is read as before a later one.
    const metrics = await (await fetch(`http://127.0.0.1:${gw.metricsPort}/metrics`)).text()
    t.notMatch(
      metrics,
      /vendor_messages_total\{route="stt",result="before_delivered"\} [1-9]/,
      'no result dropped as already delivered'
    )
    leg.ws.close(1000)
    t.ok(await until(() => stt.sessions.every(s => s.ended !== null), 15_000), 'every stream ended')
    t.ok(stt.sessions.length >= 4, `a new stream every 15 s of audio (${stt.sessions.length} streams)`)
    checkRotatedStreams(t, stt.sessions, 20_000, TOTAL * 160)
    t.ok(
      gw.logs.lines.some(l => l.event === 'rotated'),
      'the gateway logged its rotations'
    )
  }
)

/** The emulator as a process of its own (so it can be killed). */
async function sttProcess(t: Test): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort()
  const child: ChildProcess = spawnCli([
    'vendor',
    '--kind',
    'google-stt-v2',
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

t.test(
  'a regional replica killed mid-call fails over like the WebSocket vendors: every frame in one final, none missing',
  async t => {
    const doomed = await sttProcess(t)
    const spare = await emulator(t)
    const gw = await startGateway(t, {
      audio: { replayRate: 4, failoverTimeoutSeconds: 10 },
      ...route([
        { name: 'doomed', audio: `grpc://127.0.0.1:${doomed.port}` },
        { name: 'spare', audio: spare.url }
      ])
    })
    const legs = audioLegs(t, gw.url('/audio/stt'), 4, 934100)
    for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
    const KILL_AT = 255
    const TOTAL = 450
    await sendFrames(legs, 0, TOTAL, 1, seq => {
      if (seq === KILL_AT) doomed.child.kill('SIGKILL')
    })
    await checkFailedOver(t, gw, legs, finals, TOTAL)
    t.ok(spare.sessions.length >= 4, 'the spare took the calls')
    t.same(
      spare.sessions.filter(s => s.refusal !== null).map(s => s.refusal),
      [],
      'the spare refused none of the replacement streams'
    )
    for (const [i, leg] of legs.entries()) checkFinals(t, leg, `leg ${i}`)
  }
)

t.test(
  'check refuses a gRPC mapping whose request names a field the proto message does not have, at its line and column',
  async t => {
    const dir = t.testdir({})
    const shipped = readFileSync(MAPPING, 'utf8')
    const bad = shipped.replace('"audioChannelCount": 1', '"audioChannels": 1')
    t.not(bad, shipped)
    writeFileSync(join(dir, 'bad.yaml'), bad)
    writeFileSync(
      join(dir, 'gw.yaml'),
      `routes:\n  stt:\n    mapping: bad.yaml\n    params: { project: p }\n    upstreams:\n      - { name: a, audio: "grpcs://speech.googleapis.com" }\n`
    )
    const out = await runCli(['check', '--config', join(dir, 'gw.yaml')])
    t.equal(out.code, 2, 'check fails')
    const lines = bad.split('\n')
    const line = lines.findIndex(l => l.includes('"audioChannels"')) + 1
    const col = (lines[line - 1] ?? '').indexOf('audioChannels') + 1
    t.match(
      out.stdout + out.stderr,
      `bad.yaml:${line}:${col}: /audio/open: google.cloud.speech.v2.ExplicitDecodingConfig has no field "audioChannels"`,
      'the problem names the field, the message, and where the name is written'
    )
  }
)
