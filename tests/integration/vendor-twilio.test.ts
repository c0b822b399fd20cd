import t from 'tap'
import { startRealVendor, type RealVendorEmulator } from '../../gateway/tools/real-vendors'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, platformLeg, until } from '../helpers/gateway'
import { sha256, stream } from '../helpers/audio'
import { audioInit } from '../helpers/legs'
import { vendorGateway, everyMessageMatched } from '../helpers/vendors'

// The platform (simulated legs, real sockets) → a real gateway → the strict Twilio Media Streams receiver emulator.

type Json = Record<string, any>

const KEY = 'twilio-key-0123456789'

t.test(
  'twilio-media: connected, start, base64 media, stop; transcript → TRANSCRIPT (TX and RX legs of one call)',
  async t => {
    const emu: RealVendorEmulator = await startRealVendor({ kind: 'twilio-media', apiKey: KEY, resultEveryMs: 500 })
    t.teardown(async () => await emu.close())
    const gw = await vendorGateway(t, emu, 'mappings/twilio-media.yaml', KEY)
    const appParams = { param1: 'gold', attempts: 3, vip: true }
    const tx = platformLeg(
      t,
      gw.url('/audio/x'),
      initMessage({ token: AUDIO_TOKEN, contactId: 8401, busNo: 4594, perspective: 'TX', appParams })
    )
    const rx = platformLeg(t, gw.url('/audio/x'), audioInit(8401, 'RX'))
    t.equal((await tx.answer).command, 'CONNECTED', 'CONNECTED once connected and start are sent')
    t.equal((await rx.answer).command, 'CONNECTED')
    const [stx, srx] = await Promise.all([stream(tx, 0, 100), stream(rx, 50, 150)]) // 2 s each
    t.ok(
      await until(() => emu.sessions().length === 2 && emu.sessions().every(s => s.audioBytes === 16000), 3000),
      'all audio arrived'
    )
    t.ok(await until(() => tx.messages.length >= 4 && rx.messages.length >= 4, 3000), 'results came back')
    tx.ws.close(1000)
    rx.ws.close(1000)
    t.ok(await until(() => emu.sessions().every(s => s.closed), 3000), 'both streams ended')
    const start = (s: Json): Json => s.texts[1] as Json
    const stxs = emu.sessions().find(s => start(s).start.tracks[0] === 'inbound')!
    const srxs = emu.sessions().find(s => start(s).start.tracks[0] === 'outbound')!
    t.ok(stxs !== undefined && srxs !== undefined, 'TX streams the inbound track, RX the outbound one')
    for (const [s, sent] of [
      [stxs, stx],
      [srxs, srx]
    ] as [Json, Buffer][]) {
      t.same(
        s.errors,
        [],
        'the strict emulator recorded no error (order, sequenceNumber, chunk, timestamp, SIDs, base64)'
      )
      t.equal(s.headers.authorization, '[REDACTED]', 'Authorization presented (and accepted: the emulator checks it)')
      t.same(s.texts[0], { event: 'connected', protocol: 'Call', version: '1.0.0' })
      t.equal(s.frames, 100, 'one media event per 20 ms')
      t.equal(s.audioBytes, sent.length)
      t.equal(s.sha256, sha256(sent), 'the decoded payloads are the platform µ-law, byte for byte, in order')
      const stop = s.texts.at(-1) as Json
      const st = start(s)
      t.same(
        stop,
        {
          event: 'stop',
          sequenceNumber: '102',
          streamSid: st.streamSid,
          stop: { accountSid: st.start.accountSid, callSid: st.start.callSid }
        },
        'stop follows start and 100 media events'
      )
      t.equal(s.texts.length, 3, 'connected, start, stop (media counted apart)')
      t.equal(s.closeCode, 1000)
    }
    t.match(start(stxs), {
      event: 'start',
      sequenceNumber: '1',
      streamSid: /^MZ[0-9a-f]{32}$/,
      start: {
        accountSid: 'AC00000000000000000000000000004594',
        callSid: 'CA00000045940000000000000000008401',
        tracks: ['inbound'],
        customParameters: {
          param1: 'gold',
          attempts: '3',
          vip: 'true',
          contactId: '8401',
          busNo: '4594',
          streamPerspective: 'TX'
        },
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 }
      }
    })
    t.equal(start(srxs).start.callSid, start(stxs).start.callSid, 'one callSid for both legs of the contact')
    t.not(start(srxs).streamSid, start(stxs).streamSid, 'a streamSid per stream')
    t.match(tx.messages[0], {
      command: 'MESSAGE',
      messageType: 'TRANSCRIPT',
      message: 'emulated segment 1',
      parameters: { isFinal: true, perspective: 'TX', vendor: 'twilio-media' }
    })
    t.match(rx.messages[0], { messageType: 'TRANSCRIPT', parameters: { perspective: 'RX' } })
    await everyMessageMatched(t, gw, 'every vendor message was matched by a rule')
    t.notMatch(gw.logs.raw, KEY, 'the credential is never logged')
  }
)
