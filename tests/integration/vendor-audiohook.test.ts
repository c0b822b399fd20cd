import t, { type Test } from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import { startRealVendor, type RealVendorEmulator, type RealVendorOptions } from '../../gateway/tools/real-vendors'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, platformLeg, sleep, startGateway, until, type TestGateway } from '../helpers/gateway'
import { sha256, stream } from '../helpers/audio'
import { everyMessageMatched } from '../helpers/vendors'

// The platform (simulated legs, real sockets) → a real gateway → the strict AudioHook v2 server emulator.

type T = Test
type Json = Record<string, any>

const KEY = 'ah-api-key-0123456789'
const ORG = 'd7934305-0972-4844-938e-9060eef73d05'
const ROOT = join(__dirname, '..', '..')
const init = (contactId: number, perspective: string, appParams: Json = {}): Json =>
  initMessage({ token: AUDIO_TOKEN, contactId, busNo: 4594, perspective, appParams })
const types = (texts: unknown[]): string[] => (texts as Json[]).map(m => m.type as string).filter(x => x !== 'ping')

async function emulator(t: T, opts: Omit<RealVendorOptions, 'kind'> = {}): Promise<RealVendorEmulator> {
  const emu = await startRealVendor({ kind: 'audiohook', apiKey: KEY, ...opts })
  t.teardown(async () => await emu.close())
  return emu
}

async function gateway(t: T, emu: RealVendorEmulator, mapping: string, extra: Json = {}): Promise<TestGateway> {
  return await startGateway(
    t,
    {
      ...extra,
      routes: {
        x: {
          mapping,
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [{ name: 'v', audio: emu.url, credential: '${VENDOR_KEY}' }],
          params: { organizationId: ORG, language: 'en-US' }
        }
      }
    },
    { VENDOR_KEY: KEY }
  )
}

t.test(
  'audiohook: headers, open → opened, PCMU, ping, events → TRANSCRIPT, close → closed (TX and RX legs)',
  async t => {
    const emu = await emulator(t, { resultEveryMs: 1000 })
    const gw = await gateway(t, emu, 'mappings/audiohook.yaml')
    const tx = platformLeg(
      t,
      gw.url('/audio/x'),
      init(8301, 'TX', { ani: '+15551230000', aniName: 'Pat Doe', dnis: '+15559870000', tier: 'gold' })
    )
    const rx = platformLeg(t, gw.url('/audio/x'), init(8301, 'RX'))
    const [atx, arx] = [await tx.answer, await rx.answer]
    t.equal(atx.command, 'CONNECTED', 'CONNECTED once the server answered opened')
    t.equal(arx.command, 'CONNECTED')
    // 5.5 s: long enough for the 5 s ping, whose position the server checks against the audio it got.
    const [stx, srx] = await Promise.all([stream(tx, 0, 275), stream(rx, 300, 575)])
    t.ok(
      await until(() => emu.sessions().length === 2 && emu.sessions().every(s => s.audioBytes === stx.length), 3000),
      'all audio arrived'
    )
    t.ok(await until(() => tx.messages.length >= 5 && rx.messages.length >= 5, 3000), 'results came back on both legs')
    tx.ws.close(1000)
    rx.ws.close(1000)
    t.ok(await until(() => emu.sessions().every(s => s.closed), 3000), 'both sessions ended')
    const byChannel = (ch: string): Json =>
      emu.sessions().find(s => (s.texts[0] as Json).parameters.media[0].channels[0] === ch)!
    const stxs = byChannel('external')
    const srxs = byChannel('internal')
    t.ok(stxs !== undefined && srxs !== undefined, 'TX offered the external channel, RX the internal one')
    for (const [s, sent, answer] of [
      [stxs, stx, atx],
      [srxs, srx, arx]
    ] as [Json, Buffer, Json][]) {
      t.same(s.errors, [], 'the strict emulator recorded no protocol error (seq, serverseq, position, state)')
      t.equal(s.headers['audiohook-organization-id'], ORG)
      t.equal(s.headers['audiohook-session-id'], s.texts[0].id, 'the session id header is the id of every message')
      t.equal(
        s.headers['audiohook-correlation-id'],
        answer.parameters.legId,
        'the correlation id is the gateway leg id'
      )
      t.equal(s.headers['x-api-key'], '[REDACTED]', 'X-API-KEY presented (and accepted: the emulator checks it)')
      t.equal(s.sha256, sha256(sent), 'PCMU byte for byte, in order')
      t.same(types(s.texts), ['open', 'close'])
      t.ok(s.keepalives >= 1, 'pinged while streaming')
      t.match(
        s.texts.find((m: Json) => m.type === 'ping'),
        { seq: 2, position: /^PT[45](\.\d+)?S$/, parameters: {} },
        'the ping carries the position of the audio sent'
      )
      t.match(s.texts.at(-1), { type: 'close', position: 'PT5.5S', parameters: { reason: 'end' } })
      // No error above: the gateway closed the socket only after the close/closed transaction.
      t.equal(s.closeCode, 1000, 'the gateway closed the socket after closed')
    }
    const open = stxs.texts[0] as Json
    t.match(open, {
      version: '2',
      type: 'open',
      seq: 1,
      serverseq: 0,
      position: 'PT0S',
      parameters: {
        organizationId: ORG,
        conversationId: '00000045-9400-4000-8000-000000008301',
        participant: {
          id: '00000045-9400-4000-9000-000000008301',
          ani: '+15551230000',
          aniName: 'Pat Doe',
          dnis: '+15559870000'
        },
        media: [{ type: 'audio', format: 'PCMU', channels: ['external'], rate: 8000 }],
        language: 'en-US',
        customConfig: { contactId: '8301', busNo: '4594', streamPerspective: 'TX', appParams: { tier: 'gold' } }
      }
    })
    t.equal(
      (srxs.texts[0] as Json).parameters.conversationId,
      open.parameters.conversationId,
      'both legs of a contact name the same conversation'
    )
    t.match(tx.messages[0], {
      command: 'MESSAGE',
      messageType: 'TRANSCRIPT',
      message: 'emulated segment 1',
      parameters: {
        isFinal: true,
        offset: 'PT0S',
        duration: 'PT1S',
        confidence: 0.9,
        channelId: 0,
        perspective: 'TX',
        vendor: 'audiohook'
      }
    })
    t.match(rx.messages[0], { messageType: 'TRANSCRIPT', parameters: { perspective: 'RX' } })
    await everyMessageMatched(t, gw, 'every vendor message (opened, pong, event, closed) matched a rule')
    t.notMatch(gw.logs.raw, KEY, 'the API key is never logged')
  }
)

t.test('audiohook: the platform drops and re-attaches within the grace: paused, then resumed, one session', async t => {
  const emu = await emulator(t, { resultEveryMs: 500 })
  // The platform is back about 0.3 s after leaving, well inside 1.5 s; the final close waits that grace out.
  const gw = await gateway(t, emu, 'mappings/audiohook.yaml', { audio: { reattachGraceSeconds: 1.5 } })
  const first = platformLeg(t, gw.url('/audio/x'), init(8302, 'TX'))
  t.equal((await first.answer).command, 'CONNECTED')
  const a = await stream(first, 0, 60)
  t.ok(await until(() => emu.sessions()[0]?.audioBytes === a.length, 2000))
  first.ws.close(1000) // mid-stream
  await first.closed
  t.ok(
    await until(() => types(emu.sessions()[0].texts).includes('paused'), 2000),
    'paused sent when the platform leg went away'
  )
  await sleep(300)
  // The platform comes back with the same init message and, as it does, streams right behind it.
  const second = platformLeg(t, gw.url('/audio/x'), init(8302, 'TX'))
  const b = await stream(second, 60, 120)
  t.equal((await second.answer).command, 'CONNECTED', 'the returning leg is CONNECTED')
  t.ok(await until(() => emu.sessions()[0].audioBytes === a.length + b.length, 2000))
  second.ws.close(1000)
  // The final close parks the session again for the grace, then closes it.
  t.ok(await until(() => emu.sessions()[0].closed, 6000), 'the session ended after the last grace')
  const sessions = emu.sessions()
  t.equal(sessions.length, 1, 'one AudioHook session across both platform connections')
  const s = sessions[0]
  t.same(s.errors, [], 'no protocol error: no audio while paused, positions continuous')
  t.same(types(s.texts), ['open', 'paused', 'resumed', 'paused', 'close'])
  t.match(
    (s.texts as Json[]).find(m => m.type === 'resumed'),
    { position: 'PT1.2S', parameters: { start: 'PT1.2S', discarded: 'PT0S' } }
  )
  t.equal(s.sha256, sha256(Buffer.concat([a, b])), 'audio of both connections, in order')
  t.ok(
    [...first.messages, ...second.messages].every(m => m.command === 'MESSAGE'),
    'no ERROR on either connection'
  )
  t.ok(second.messages.length >= 1, 'results reach the returning leg')
})

t.test('audiohook without chunkMs: {{position}} must count the audio sent on the identity path', async t => {
  const mapping = parse(readFileSync(join(ROOT, 'mappings', 'audiohook.yaml'), 'utf8')) as Json
  delete mapping.audio.frames.chunkMs
  const dir = t.testdir({ 'audiohook-identity.yaml': stringify(mapping) })
  await t.test('with plain binary µ-law frames', async t => {
    const emu = await emulator(t)
    const gw = await gateway(t, emu, join(dir, 'audiohook-identity.yaml'))
    const leg = platformLeg(t, gw.url('/audio/x'), init(8303, 'TX'))
    t.equal((await leg.answer).command, 'CONNECTED')
    await stream(leg, 0, 25)
    leg.ws.close(1000)
    t.ok(await until(() => emu.sessions()[0]?.closed, 3000))
    t.match(
      emu.sessions()[0].texts.at(-1),
      { type: 'close', position: 'PT0.5S' },
      'close carries the position of the audio sent'
    )
    t.same(emu.sessions()[0].errors, [], 'no position error')
  })
})
