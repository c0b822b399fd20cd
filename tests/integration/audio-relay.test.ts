import t from 'tap'
import { createHash } from 'node:crypto'
import { initMessage } from '../../gateway/tools/simulate'
import {
  AUDIO_TOKEN,
  logged,
  platformLeg,
  routeTo,
  startGateway,
  startVendor,
  sleep,
  until,
  type PlatformLegClient
} from '../helpers/gateway'
import { uniqueFrame, uniqueFramesHash } from '../helpers/audio'
import { audioRoute } from '../helpers/legs'

const frame = uniqueFrame

const init = (contactId: number, over: Record<string, unknown> = {}): Record<string, unknown> => ({
  ...initMessage({ token: AUDIO_TOKEN, contactId, busNo: 4594, perspective: 'TX' }),
  ...over
})

t.test('100 legs x 5 s at 50 frames/s: every frame reaches the vendor in order and results come back', async t => {
  const LEGS = 100
  const FRAMES = 250
  // The emulator answers per 50 frames of audio it receives, however the gateway's writes batch them (the
  // writes follow audio.coalesceMs in time, which a busy machine stretches).
  const vendor = await startVendor(t, { kind: 'json-events', resultEveryFrames: 50, resultsByAudio: true })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const legs: PlatformLegClient[] = []
  for (let i = 0; i < LEGS; i++) legs.push(platformLeg(t, gw.url('/audio/demo'), init(200000 + i)))
  const answers = await Promise.all(legs.map(async l => await l.answer))
  t.ok(
    answers.every(a => a.command === 'CONNECTED'),
    'every leg is CONNECTED'
  )
  const hashes = legs.map(() => createHash('sha256'))
  // One drift-corrected 20 ms scheduler for all legs, as the platform's media server paces audio (pacing
  // only: what is asserted is what arrives, never when).
  const start = performance.now()
  let sent = 0
  while (sent < FRAMES) {
    const due = Math.min(FRAMES, Math.floor((performance.now() - start) / 20) + 1)
    for (; sent < due; sent++) {
      for (let i = 0; i < LEGS; i++) {
        const f = frame(i, sent)
        hashes[i].update(f)
        legs[i].send(f)
      }
    }
    await sleep(5)
  }
  const expected = new Map(hashes.map((h, i) => [200000 + i, h.digest('hex')]))
  const done = await until(() => vendor.sessions().filter(s => s.bytes === FRAMES * 160).length === LEGS)
  t.ok(done, 'every vendor session received all the audio (bytes: frames are coalesced into fewer writes)')
  let intact = 0
  for (const s of vendor.sessions()) {
    const contactId = (s.open as { start: { contactId: number } }).start.contactId
    if (s.sha256 === expected.get(contactId) && s.bytes === FRAMES * 160) intact++
  }
  t.equal(intact, LEGS, 'per leg, the bytes the vendor got are exactly those sent, in order')
  await until(() => legs.every(l => l.messages.length >= FRAMES / 50))
  t.ok(
    legs.every(l => l.messages.length === FRAMES / 50),
    'every leg got one result per 50 frames'
  )
  t.match(legs[0].messages[0], {
    command: 'MESSAGE',
    messageType: 'TRANSCRIPT',
    parameters: { isFinal: true, seq: 1, perspective: 'TX' }
  })
  for (const l of legs) l.ws.close(1000)
  await Promise.all(legs.map(async l => await l.closed))
  await until(() => vendor.sessions().every(s => s.closed))
  t.ok(
    vendor.sessions().every(s => s.closeCode === 1000 && s.texts.some(x => (x as { event?: string }).event === 'stop')),
    'each vendor session got the stop event and a normal close'
  )
})

t.test('frames sent before CONNECTED are held and delivered whole and in order', async t => {
  const vendor = await startVendor(t, { kind: 'json-events', readyDelayMs: 400 })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const leg = platformLeg(t, gw.url('/audio/demo'), init(7001))
  const hash = createHash('sha256')
  await new Promise<void>(resolve => leg.ws.once('open', () => resolve()))
  // The init went out on open; stream right behind it, without waiting for the answer. At once, not
  // paced: all ten are sent long before the vendor's 400 ms ready delay ends, however busy the machine.
  for (let i = 0; i < 10; i++) {
    const f = frame(1, i)
    hash.update(f)
    leg.send(f)
  }
  const answer = await leg.answer
  t.equal(answer.command, 'CONNECTED')
  t.equal(vendor.sessions()[0].bytes, 0, 'no audio reached the vendor before it was ready')
  for (let i = 10; i < 20; i++) {
    const f = frame(1, i)
    hash.update(f)
    leg.send(f)
  }
  await until(() => vendor.sessions()[0].bytes === 20 * 160)
  t.equal(vendor.sessions()[0].sha256, hash.digest('hex'), 'held and live audio arrive whole and in order')
  t.same(vendor.sessions()[0].errors, [], 'the vendor saw no audio before it said started')
  leg.ws.close(1000)
  await leg.closed
  await until(() => logged(gw, 'platform_closed'))
  t.notMatch(gw.logs.raw, AUDIO_TOKEN, 'the token never appears in a log line')
  t.ok(
    gw.logs.lines.some(
      l => l.event === 'connected' && l.contactId === 7001 && l.route === 'demo' && l.perspective === 'TX'
    ),
    'the leg logs with its identity'
  )
})

t.test(
  'more audio before CONNECTED than the hold buffer takes closes the leg with HOLD_BUFFER_OVERFLOW, counted',
  async t => {
    const vendor = await startVendor(t, { kind: 'json-events', readyDelayMs: 2000 })
    const gw = await startGateway(t, {
      audio: { holdBufferBytes: 1600 },
      routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
    })
    const leg = platformLeg(t, gw.url('/audio/demo'), init(7002))
    await new Promise<void>(resolve => leg.ws.once('open', () => resolve()))
    for (let i = 0; i < 11; i++) leg.send(frame(2, i))
    const answer = await leg.answer
    t.equal(answer.command, 'ERROR')
    t.equal(answer.messageType, 'HOLD_BUFFER_OVERFLOW')
    t.equal((await leg.closed).code, 1013)
    const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
    t.match(metrics, /assist_gateway_audio_dropped_frames_total\{route="demo",reason="hold_overflow"\} 11/)
    t.match(metrics, /assist_gateway_audio_sessions_total\{route="demo",outcome="hold_buffer_overflow"\} 1/)
  }
)

t.test('the vendor drops mid-call and failover is off: the platform gets a clear ERROR and a close', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, {
    audio: { failoverTimeoutSeconds: 0 },
    routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
  })
  const leg = platformLeg(t, gw.url('/audio/demo'), init(7003))
  t.equal((await leg.answer).command, 'CONNECTED')
  for (let i = 0; i < 5; i++) leg.send(frame(3, i))
  await until(() => vendor.sessions()[0]?.bytes === 5 * 160)
  vendor.dropAll()
  const closed = await leg.closed
  t.equal(closed.code, 1011)
  const error = leg.messages.find(m => m.command === 'ERROR')
  t.match(error, {
    command: 'ERROR',
    messageType: 'UPSTREAM_CLOSED',
    parameters: { code: 'UPSTREAM_CLOSED', vendorCloseCode: 1006 }
  })
})

t.test('the platform drops: the vendor gets the mapping close message, then a normal close', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const leg = platformLeg(t, gw.url('/audio/demo'), init(7004))
  t.equal((await leg.answer).command, 'CONNECTED')
  for (let i = 0; i < 5; i++) leg.send(frame(4, i))
  leg.ws.terminate()
  await until(() => vendor.sessions()[0]?.closed === true)
  const s = vendor.sessions()[0]
  t.equal(s.bytes, 5 * 160, 'audio sent before the drop was delivered')
  t.match(s.texts, [{ event: 'stop', stop: { reason: 'platform closed the leg' } }])
  t.equal(s.closeCode, 1000)
})

t.test('passthrough: init forwarded with the upstream credential, audio and MESSAGE frames unchanged', async t => {
  // Two writes of 100 ms (audio.coalesceMs): 10 platform frames.
  const vendor = await startVendor(t, { kind: 'passthrough', token: 'vendor-side-key-0001', resultEveryFrames: 2 })
  const gw = await startGateway(
    t,
    {
      routes: {
        pt: audioRoute('mappings/passthrough.yaml', [{ name: 'v', audio: vendor.url, credential: '${VENDOR_KEY}' }])
      }
    },
    { VENDOR_KEY: 'vendor-side-key-0001' }
  )
  const body = init(7005)
  const leg = platformLeg(t, gw.url('/audio/pt'), body)
  const answer = await leg.answer
  t.equal(answer.command, 'CONNECTED')
  t.match(answer.parameters, { vendor: 'passthrough-emulator' }, "the vendor's CONNECTED parameters reach the platform")
  for (let i = 0; i < 20; i++) leg.send(frame(5, i))
  await until(() => leg.messages.length === 2)
  const s = vendor.sessions()[0]
  t.equal(s.sha256, uniqueFramesHash(5, 0, 20), 'binary frames pass unchanged and in order')
  const { authenticationToken, ...rest } = body
  void authenticationToken
  t.match(s.open, rest, 'the init message is forwarded')
  t.same(
    leg.messages[0],
    {
      command: 'MESSAGE',
      messageType: 'TRANSCRIPT',
      message: 'heard 2 frames',
      parameters: { seq: 1, frames: 2, bytes: 1600, isFinal: true }
    },
    'MESSAGE frames arrive unchanged'
  )
  t.notMatch(gw.logs.raw, 'vendor-side-key-0001', 'the upstream credential is never logged')
})

t.test('passthrough without an upstream credential drops the token the gateway checked', async t => {
  const vendor = await startVendor(t, { kind: 'passthrough' })
  const gw = await startGateway(t, {
    routes: { pt: audioRoute('mappings/passthrough.yaml', [{ name: 'v', audio: vendor.url }]) }
  })
  const leg = platformLeg(t, gw.url('/audio/pt'), init(7006))
  t.equal((await leg.answer).command, 'CONNECTED')
  t.notOk('authenticationToken' in (vendor.sessions()[0].open as object), 'the platform token is not passed on')
})
