import t, { type Test } from 'tap'
import { audioInit } from '../helpers/legs'
import WebSocket from 'ws'
import { startRealVendor, type RealVendorEmulator, type RealVendorOptions } from '../../gateway/tools/real-vendors'
import { platformLeg, sleep, until, type TestGateway, closeOf } from '../helpers/gateway'
import { vendorGateway } from '../helpers/vendors'
import { frameAt, stream } from '../helpers/audio'

// Issue 9, item 6 (wire details): AssemblyAI's min_turn_silence rename; Twilio's media.timestamp.

type Json = Record<string, any>
const KEY = 'wire-key-0123456789abcdef'
const init = (contactId: number): Json => audioInit(contactId)

async function emulator(t: Test, opts: RealVendorOptions): Promise<RealVendorEmulator> {
  const emu = await startRealVendor({ apiKey: KEY, ...opts })
  t.teardown(async () => await emu.close())
  return emu
}

async function gateway(t: Test, emu: RealVendorEmulator, mapping: string, params: Json = {}): Promise<TestGateway> {
  return await vendorGateway(t, emu, mapping, KEY, params)
}

/** A raw client of an emulator: its messages, and how it closed. */
function raw(url: string, headers: Record<string, string>) {
  const ws = new WebSocket(url, { headers, perMessageDeflate: false })
  const messages: Json[] = []
  ws.on('message', d => messages.push(JSON.parse(d.toString()) as Json))
  ws.on('error', () => {})
  const opened = new Promise<void>(resolve => ws.on('open', () => resolve()))
  const closed = closeOf(ws)
  return { ws, messages, opened, closed }
}

t.test('assemblyai: route param min_turn_silence is sent under its new name', async t => {
  const emu = await emulator(t, { kind: 'assemblyai' })
  const gw = await gateway(t, emu, 'mappings/assemblyai.yaml', { min_turn_silence: 560 })
  const leg = platformLeg(t, gw.url('/audio/x'), init(8301))
  t.equal((await leg.answer).command, 'CONNECTED', 'the strict emulator accepted the query')
  await stream(leg, 0, 10)
  leg.ws.close(1000)
  t.ok(await until(() => emu.sessions()[0]?.closed === true))
  const s = emu.sessions()[0]
  t.equal(s.query.min_turn_silence, '560')
  t.notOk('min_end_of_turn_silence_when_confident' in s.query)
  t.same(s.errors, [])
})

t.test('assemblyai: a route still using the old param name gets min_turn_silence sent', async t => {
  const emu = await emulator(t, { kind: 'assemblyai' })
  const gw = await gateway(t, emu, 'mappings/assemblyai.yaml', { min_end_of_turn_silence_when_confident: 400 })
  const leg = platformLeg(t, gw.url('/audio/x'), init(8302))
  t.equal((await leg.answer).command, 'CONNECTED')
  const s = emu.sessions()[0]
  t.equal(s.query.min_turn_silence, '400')
  t.notOk('min_end_of_turn_silence_when_confident' in s.query, 'the old name never goes out')
})

t.test('assemblyai emulator: the old parameter name is refused with 3006, like the renamed service', async t => {
  const emu = await emulator(t, { kind: 'assemblyai' })
  const c = raw(`${emu.url}?sample_rate=8000&encoding=pcm_mulaw&min_end_of_turn_silence_when_confident=400`, {
    Authorization: KEY
  })
  const closed = await c.closed
  t.equal(closed.code, 3006)
  t.match(closed.reason, /min_end_of_turn_silence_when_confident \(renamed min_turn_silence\)/)
  t.match(c.messages, [{ type: 'Error', error_code: 3006 }])
})

t.test(
  'twilio-media: media.timestamp is ms since the stream start, through held, re-chunked and paused audio',
  async t => {
    const emu = await emulator(t, { kind: 'twilio-media' })
    const gw = await gateway(t, emu, 'mappings/twilio-media.yaml')
    const leg = platformLeg(t, gw.url('/audio/x'), init(8401))
    await new Promise<void>(resolve => leg.ws.once('open', () => resolve()))
    for (let i = 0; i < 5; i++) leg.send(frameAt(i)) // before CONNECTED: held, then flushed
    t.equal((await leg.answer).command, 'CONNECTED')
    for (let i = 5; i < 20; i++) {
      leg.send(Buffer.concat([frameAt(i), frameAt(i + 1).subarray(0, 80)])) // 30 ms frames: re-chunked to 20 ms
      await sleep(30)
    }
    await sleep(200) // the platform sends nothing for a while
    await stream(leg, 20, 40)
    leg.ws.close(1000)
    t.ok(await until(() => emu.sessions()[0]?.closed === true))
    const s = emu.sessions()[0]
    t.same(s.errors, [], 'every timestamp is the previous one plus its 20 ms')
    t.equal(s.audioBytes, 48 * 160, 'all 7600 bytes, the last 10 ms padded to a whole chunk at the close')
  }
)

t.test(
  'twilio-media emulator: timestamps counted in chunks or carried over from another stream are recorded',
  async t => {
    const emu = await emulator(t, { kind: 'twilio-media' })
    const sid = `MZ${'a'.repeat(32)}`
    const start = {
      event: 'start',
      sequenceNumber: '1',
      streamSid: sid,
      start: {
        accountSid: `AC${'b'.repeat(32)}`,
        streamSid: sid,
        callSid: `CA${'c'.repeat(32)}`,
        tracks: ['inbound'],
        customParameters: {},
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 }
      }
    }
    const media = (seq: number, chunk: number, timestamp: number): Json => ({
      event: 'media',
      sequenceNumber: String(seq),
      streamSid: sid,
      media: {
        track: 'inbound',
        chunk: String(chunk),
        timestamp: String(timestamp),
        payload: frameAt(chunk).toString('base64')
      }
    })
    for (const [name, stamps, error] of [
      ['counted in chunks', [0, 1, 2], /media\.timestamp 1 on inbound, expected 20/],
      [
        'carried over from another stream',
        [4000, 4020, 4040],
        /first chunk of a stream is stamped within its first second/
      ]
    ] as const) {
      const c = raw(emu.url, { Authorization: `Bearer ${KEY}` })
      await c.opened
      c.ws.send(JSON.stringify({ event: 'connected', protocol: 'Call', version: '1.0.0' }))
      c.ws.send(JSON.stringify(start))
      stamps.forEach((ts, i) => c.ws.send(JSON.stringify(media(i + 2, i + 1, ts))))
      const n = emu.sessions().length
      t.ok(await until(() => emu.sessions()[n - 1].frames === 3), `${name}: media arrived`)
      t.match(emu.sessions()[n - 1].errors, [error], name)
      c.ws.terminate()
    }
  }
)
