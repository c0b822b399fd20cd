/**
 * `npm run bench -- codec [--seconds S (60)]`: CPU cost of the per-leg audio conversions a mapping can
 * ask for, in µs of CPU per second of audio per leg, on 20 ms platform frames through the gateway's own
 * encoder (gateway/audio/feed/encoder.ts): µ-law → PCM16 at 8 kHz, → PCM16 at 16 kHz (polyphase
 * resampler), each re-chunked to 50 ms, and the json-base64 framing of a Twilio-format template.
 */
import { AudioEncoder, FrameCounters, MediaTemplate } from '../../gateway/audio/feed/encoder'
import type { FramesSpec } from '../../gateway/mapping/compile'
import { fmt, numberFlag, Report, round } from './lib'

export const CODEC_FLAGS = ['seconds']

function measure(spec: FramesSpec, template: MediaTemplate | null, seconds: number): number {
  const frame = new Uint8Array(160)
  for (let i = 0; i < 160; i++) frame[i] = (Math.sin(i / 4) * 100) & 0xff
  let sink = 0
  const enc = new AudioEncoder(spec, new FrameCounters(), template, {
    binary: c => {
      sink += c[0]
    },
    text: f => {
      sink += f.length
    }
  })
  const frames = seconds * 50
  for (let i = 0; i < 500; i++) enc.push(frame)
  let best = Infinity
  for (let run = 0; run < 3; run++) {
    const t0 = process.cpuUsage()
    for (let i = 0; i < frames; i++) enc.push(frame)
    const t = process.cpuUsage(t0)
    best = Math.min(best, (t.user + t.system) / seconds)
  }
  if (sink === -1) console.log('')
  return best
}

export function runCodec(flags: Map<string, string>): Record<string, unknown> {
  const seconds = numberFlag(flags, 'seconds', 60, { min: 1, max: 3600 })
  const twilio = new MediaTemplate(
    JSON.stringify({
      event: 'media',
      sequenceNumber: '{{seq}}',
      streamSid: 'MZ0123456789abcdef0123456789abcdef',
      media: { track: 'inbound', chunk: '{{chunk}}', timestamp: '{{timestamp}}', payload: '{{payload}}' }
    })
  )
  const cases: [string, FramesSpec, MediaTemplate | null][] = [
    [
      'µ-law re-chunked to 50 ms (AssemblyAI)',
      { framing: 'binary', encoding: 'mulaw', sampleRate: 8000, chunkMs: 50 },
      null
    ],
    ['µ-law → PCM16 8 kHz, 50 ms', { framing: 'binary', encoding: 'pcm16', sampleRate: 8000, chunkMs: 50 }, null],
    [
      'µ-law → PCM16 16 kHz (resampled), 50 ms',
      { framing: 'binary', encoding: 'pcm16', sampleRate: 16000, chunkMs: 50 },
      null
    ],
    [
      'µ-law → json-base64 Twilio media, 20 ms',
      { framing: 'json-base64', encoding: 'mulaw', sampleRate: 8000, chunkMs: 20 },
      twilio
    ]
  ]
  const rep = new Report(`codec: CPU per second of audio per leg (${seconds} s of 20 ms frames, best of 3)`)
  rep.section('conversion')
  const out: Record<string, number | null> = {}
  for (const [name, spec, tpl] of cases) {
    const us = measure(spec, tpl, seconds)
    rep.row(name, `${fmt(us, 1)} µs per audio second  (${fmt(us / 10000, 3)} % of a core per leg)`)
    out[name] = round(us, 1)
  }
  rep.print()
  return { usPerAudioSecond: out }
}
