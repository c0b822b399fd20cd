import t from 'tap'
import { closeOf, untilOpen } from '../helpers/gateway'
import { createHash, randomBytes } from 'node:crypto'
import { WebSocket, type RawData } from 'ws'
import { startVendorEmulator, type EmulatorOptions, type VendorEmulator } from '../../gateway/tools/vendor-emulator'
import { FakeClock } from '../helpers/fake-clock'

type Json = Record<string, unknown>

interface Client {
  ws: WebSocket
  msgs: Json[]
  closed: Promise<{ code: number; reason: string }>
  /** Resolves once `n` text messages have arrived. */
  waitMessages(n: number): Promise<Json[]>
}

async function connect(url: string): Promise<Client> {
  const ws = new WebSocket(url, { perMessageDeflate: false })
  const msgs: Json[] = []
  const waiters: { n: number; done: () => void }[] = []
  ws.on('message', (data: RawData, isBinary: boolean) => {
    if (isBinary) return
    msgs.push(JSON.parse(String(data)) as Json)
    for (const w of waiters.splice(0)) {
      if (msgs.length >= w.n) w.done()
      else waiters.push(w)
    }
  })
  const closed = closeOf(ws)
  await untilOpen(ws)
  return {
    ws,
    msgs,
    closed,
    waitMessages: n =>
      new Promise<Json[]>(done => {
        if (msgs.length >= n) done(msgs)
        else waiters.push({ n, done: () => done(msgs) })
      })
  }
}

async function until(cond: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting for condition')
    await new Promise(r => setTimeout(r, 5))
  }
}

async function emulator(t: { teardown(fn: () => unknown): void }, opts: EmulatorOptions): Promise<VendorEmulator> {
  const emu = await startVendorEmulator(opts)
  t.teardown(() => emu.close())
  return emu
}

function init(token?: string): Json {
  return {
    ...(token === undefined ? {} : { authenticationToken: token }),
    executionInfo: {
      contactId: 42,
      busNo: 4594,
      requestId: 1,
      actionType: 'AgentAssist',
      actionId: 3,
      scriptName: 's'
    },
    streamPerspective: 'TX',
    streamsConfiguration: '',
    appParams: {},
    appConfig: {}
  }
}

function startEvent(): Json {
  return {
    event: 'start',
    streamId: 'MZ-1',
    start: {
      contactId: 42,
      busNo: 4594,
      track: 'inbound',
      mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 },
      customParameters: { lang: 'en' }
    }
  }
}

function sha(frames: Buffer[]): string {
  return createHash('sha256').update(Buffer.concat(frames)).digest('hex')
}

t.test('passthrough: happy path', async t => {
  const emu = await emulator(t, { kind: 'passthrough', resultEveryFrames: 5, token: 'sekret' })
  t.match(emu.url, /^ws:\/\/127\.0\.0\.1:\d+\/stream$/)
  const c = await connect(`${emu.url}?tenant=7`)
  c.ws.send(JSON.stringify(init('sekret')))
  const [connected] = await c.waitMessages(1)
  t.same(connected, {
    command: 'CONNECTED',
    messageType: 'COMMAND',
    message: 'BEGIN AUDIO STREAM',
    parameters: { vendor: 'passthrough-emulator', session: 1 }
  })
  const frames = Array.from({ length: 12 }, () => randomBytes(160))
  for (const f of frames) c.ws.send(f)
  const msgs = await c.waitMessages(3)
  t.same(msgs[1], {
    command: 'MESSAGE',
    messageType: 'TRANSCRIPT',
    message: 'heard 5 frames',
    parameters: { seq: 1, frames: 5, bytes: 800, isFinal: true }
  })
  t.match(msgs[2], { parameters: { seq: 2, frames: 10, bytes: 1600 } })
  c.ws.send(JSON.stringify({ hello: 1 }))
  c.ws.send('not json')
  await until(() => emu.sessions()[0].texts.length === 2)
  t.same(emu.sessions()[0].sha256, sha(frames), 'running digest available before close')
  c.ws.close(1000, 'bye')
  t.same(await c.closed, { code: 1000, reason: 'bye' })
  await until(() => emu.sessions()[0].closed)
  const r = emu.sessions()[0]
  t.match(r, {
    id: 1,
    kind: 'passthrough',
    path: '/stream?tenant=7',
    open: { authenticationToken: '[REDACTED]', executionInfo: { contactId: 42 } },
    ready: true,
    frames: 12,
    bytes: 12 * 160,
    sha256: sha(frames),
    texts: [{ hello: 1 }, { unparsed: 'not json' }],
    errors: [],
    closed: true,
    closeCode: 1000,
    closeReason: 'bye'
  })
  t.ok(r.firstFrameAt !== null && r.lastFrameAt !== null && r.firstFrameAt <= r.lastFrameAt)
  t.ok(r.closedAt !== null && r.closedAt >= r.openedAt)
  t.notMatch(JSON.stringify(emu.sessions()), /sekret/, 'token never stored')
  t.equal(msgs.length, 3, 'no result for the 2 frames past the last multiple')
})

t.test('passthrough, resultsByAudio: results count 20 ms of audio however the writes are coalesced', async t => {
  const emu = await emulator(t, { kind: 'passthrough', resultEveryFrames: 5, resultsByAudio: true })
  const c = await connect(emu.url)
  c.ws.send(JSON.stringify(init()))
  await c.waitMessages(1)
  // 100 ms writes (800 bytes): one result per write; a 60 ms write then a 40 ms one cross 5 units once more.
  for (let i = 0; i < 3; i++) c.ws.send(randomBytes(800))
  c.ws.send(randomBytes(480))
  c.ws.send(randomBytes(320))
  const msgs = await c.waitMessages(5)
  t.same(
    msgs.slice(1).map(m => (m.parameters as Json).seq),
    [1, 2, 3, 4],
    'a result at 5, 10, 15 and 20 units of 160 bytes'
  )
  t.match(msgs[4], { message: 'heard 20 frames', parameters: { frames: 5, bytes: 3200 } }, 'frames: messages received')
})

t.test('passthrough: violations', async t => {
  const emu = await emulator(t, { kind: 'passthrough', token: 'sekret' })

  const a = await connect(emu.url)
  a.ws.send('{not json')
  t.match((await a.waitMessages(1))[0], { command: 'ERROR', messageType: 'INVALID_MESSAGE', parameters: {} })
  t.equal((await a.closed).code, 1007)

  const b = await connect(emu.url)
  b.ws.send(Buffer.alloc(160))
  t.match((await b.waitMessages(1))[0], { command: 'ERROR', messageType: 'INVALID_MESSAGE' })
  t.equal((await b.closed).code, 1007)

  const c = await connect(emu.url)
  c.ws.send(JSON.stringify(init('wrong-token-value')))
  const [answer] = await c.waitMessages(1)
  t.same(answer, { command: 'ERROR', messageType: 'AUTH_INVALID', message: 'invalid token', parameters: {} })
  t.equal((await c.closed).code, 1008)

  const d = await connect(emu.url)
  d.ws.send(JSON.stringify(init()))
  t.match((await d.waitMessages(1))[0], { messageType: 'AUTH_INVALID' })
  t.equal((await d.closed).code, 1008)

  await until(() => emu.sessions().every(s => s.closed))
  const [ra, rb, rc, rd] = emu.sessions()
  t.match(ra, { closeCode: 1007, ready: false, open: null, errors: [/not JSON/] })
  t.match(rb, { closeCode: 1007, frames: 0, errors: ['binary frame before init message'] })
  t.match(rc, { closeCode: 1008, ready: false, errors: ['invalid token'], open: { authenticationToken: '[REDACTED]' } })
  t.match(rd, { closeCode: 1008, errors: ['invalid token'] })
  t.notMatch(JSON.stringify(emu.sessions()), /wrong-token-value/)
})

t.test('passthrough: readyDelayMs, audio before CONNECTED is counted and noted once', async t => {
  const clock = new FakeClock()
  const emu = await emulator(t, { kind: 'passthrough', readyDelayMs: 150, resultEveryFrames: 0, clock })
  const c = await connect(emu.url)
  c.ws.send(JSON.stringify(init('anything')))
  const frames = [randomBytes(160), randomBytes(160), randomBytes(33)]
  for (const f of frames) c.ws.send(f)
  await until(() => emu.sessions()[0]?.frames === 3)
  clock.advance(149)
  t.equal(emu.sessions()[0].ready, false, 'no CONNECTED before readyDelayMs')
  clock.advance(1)
  const [connected] = await c.waitMessages(1)
  t.match(connected, { command: 'CONNECTED' })
  t.equal(emu.sessions()[0].ready, true, 'CONNECTED once readyDelayMs passed')
  for (let i = 0; i < 5; i++) c.ws.send(randomBytes(160))
  await until(() => emu.sessions()[0].frames === 8)
  const r = emu.sessions()[0]
  t.same(r.errors, ['audio before CONNECTED'])
  t.equal(r.bytes, 160 * 7 + 33)
  t.equal(c.msgs.length, 1, 'resultEveryFrames 0 sends no results')
  c.ws.close()
  await c.closed
})

t.test('json-events: happy path', async t => {
  const emu = await emulator(t, { kind: 'json-events', resultEveryFrames: 4 })
  const c = await connect(emu.url)
  c.ws.send(JSON.stringify(startEvent()))
  t.same((await c.waitMessages(1))[0], { event: 'started', streamId: 'MZ-1' })
  const frames = Array.from({ length: 9 }, () => randomBytes(160))
  for (const f of frames) c.ws.send(f)
  const msgs = await c.waitMessages(3)
  t.same(msgs[1], {
    event: 'transcript',
    streamId: 'MZ-1',
    seq: 1,
    text: 'heard 4 frames',
    isFinal: true,
    frames: 4,
    bytes: 640
  })
  t.match(msgs[2], { seq: 2, frames: 8, bytes: 1280 })
  const stop = { event: 'stop', streamId: 'MZ-1', stop: { reason: 'hangup' } }
  c.ws.send(JSON.stringify(stop))
  t.same((await c.waitMessages(4))[3], { event: 'stopped', streamId: 'MZ-1', frames: 9, bytes: 1440 })
  t.same(await c.closed, { code: 1000, reason: 'stopped' })
  await until(() => emu.sessions()[0].closed)
  t.match(emu.sessions()[0], {
    kind: 'json-events',
    path: '/stream',
    open: startEvent(),
    ready: true,
    frames: 9,
    bytes: 1440,
    sha256: sha(frames),
    texts: [stop],
    errors: [],
    closeCode: 1000
  })
})

t.test('json-events: bad start events', async t => {
  const emu = await emulator(t, { kind: 'json-events' })
  type Start = Json & { start: Json & { mediaFormat: Json; customParameters?: unknown } }
  const mutate = (f: (m: Start) => void): string => {
    const m = startEvent() as Start
    f(m)
    return JSON.stringify(m)
  }
  const cases: [string, string, RegExp][] = [
    ['not json', '{"event":', /not JSON/],
    ['array', '[1,2]', /JSON object/],
    ['wrong event', mutate(m => (m.event = 'media')), /^event/],
    ['no streamId', mutate(m => delete m.streamId), /^streamId/],
    ['numeric streamId', mutate(m => (m.streamId = 5)), /^streamId/],
    ['no start', mutate(m => delete (m as Json).start), /^start must/],
    ['string contactId', mutate(m => (m.start.contactId = '42')), /^start\.contactId/],
    ['fractional busNo', mutate(m => (m.start.busNo = 1.5)), /^start\.busNo/],
    ['bad track', mutate(m => (m.start.track = 'sideways')), /^start\.track/],
    ['no mediaFormat', mutate(m => delete (m.start as Json).mediaFormat), /^start\.mediaFormat must/],
    ['encoding', mutate(m => (m.start.mediaFormat.encoding = 'audio/l16')), /^start\.mediaFormat\.encoding/],
    ['sampleRate', mutate(m => (m.start.mediaFormat.sampleRate = 16000)), /^start\.mediaFormat\.sampleRate/],
    ['channels', mutate(m => (m.start.mediaFormat.channels = 2)), /^start\.mediaFormat\.channels/],
    ['customParameters', mutate(m => (m.start.customParameters = ['x'])), /^start\.customParameters/]
  ]
  for (const [name, text, re] of cases) {
    const c = await connect(emu.url)
    c.ws.send(text)
    const [answer] = await c.waitMessages(1)
    t.match(answer, { event: 'error', code: 'bad_start', message: re }, name)
    t.equal((await c.closed).code, 1008, `${name}: closed 1008`)
  }
  const ok = mutate(m => {
    delete m.start.customParameters
    m.start.track = 'both'
  })
  const c = await connect(emu.url)
  c.ws.send(ok)
  t.match((await c.waitMessages(1))[0], { event: 'started' }, 'customParameters is optional')
  c.ws.close()
  await c.closed

  const d = await connect(emu.url)
  d.ws.send(Buffer.alloc(160))
  t.match((await d.waitMessages(1))[0], { event: 'error', code: 'audio_before_start' })
  t.equal((await d.closed).code, 1008)
  await until(() => emu.sessions().every(s => s.closed))
  t.match(emu.sessions().at(-1), { errors: ['audio before start'], frames: 0 })
  t.ok(
    emu
      .sessions()
      .slice(0, cases.length)
      .every(s => s.errors.length === 1 && s.closeCode === 1008)
  )
})

t.test('json-events: readyDelayMs, unknown events, audio after stop', async t => {
  const clock = new FakeClock()
  const emu = await emulator(t, { kind: 'json-events', readyDelayMs: 120, resultEveryFrames: 0, clock })
  const c = await connect(emu.url)
  c.ws.send(JSON.stringify(startEvent()))
  c.ws.send(Buffer.alloc(160, 1))
  c.ws.send(Buffer.alloc(160, 2))
  await until(() => emu.sessions()[0]?.frames === 2)
  clock.advance(119)
  t.equal(emu.sessions()[0].ready, false, 'no started before readyDelayMs')
  clock.advance(1)
  t.match((await c.waitMessages(1))[0], { event: 'started' })
  c.ws.send(JSON.stringify({ event: 'mark', name: 'x' }))
  t.match((await c.waitMessages(2))[1], { event: 'error', code: 'unknown_event', message: /mark/ })
  c.ws.send('garbage')
  t.match((await c.waitMessages(3))[2], { event: 'error', code: 'unknown_event' })
  c.ws.send(JSON.stringify({ event: 'stop', streamId: 'MZ-1', stop: { reason: 'done' } }))
  c.ws.send(Buffer.alloc(160, 3))
  c.ws.send(Buffer.alloc(160, 4))
  t.match((await c.waitMessages(4))[3], { event: 'stopped', frames: 2, bytes: 320 })
  t.equal((await c.closed).code, 1000)
  await until(() => emu.sessions()[0].closed)
  const r = emu.sessions()[0]
  t.equal(r.frames, 2, 'audio after stop is not counted')
  t.same(r.errors, ['audio before started', 'unknown event "mark"', 'text message is not JSON', 'audio after stop'])
  t.same(r.texts, [
    { event: 'mark', name: 'x' },
    { unparsed: 'garbage' },
    { event: 'stop', streamId: 'MZ-1', stop: { reason: 'done' } }
  ])
})

t.test('dropAll and closeAll', async t => {
  const emu = await emulator(t, { kind: 'passthrough' })
  const a = await connect(emu.url)
  const b = await connect(emu.url)
  a.ws.send(JSON.stringify(init()))
  b.ws.send(JSON.stringify(init()))
  await Promise.all([a.waitMessages(1), b.waitMessages(1)])
  emu.dropAll()
  t.equal((await a.closed).code, 1006)
  t.equal((await b.closed).code, 1006)
  await until(() => emu.sessions().every(s => s.closed))
  t.ok(emu.sessions().every(s => s.closeCode === 1006))

  const c = await connect(emu.url)
  c.ws.send(JSON.stringify(init()))
  await c.waitMessages(1)
  emu.closeAll(4001, 'maintenance')
  t.same(await c.closed, { code: 4001, reason: 'maintenance' })
})

t.test('HTTP endpoints and close()', async t => {
  const emu = await startVendorEmulator({ kind: 'json-events' })
  const health = await fetch(`${emu.httpUrl}/healthz`)
  t.equal(health.status, 200)
  t.same(await health.json(), { ok: true })
  const c = await connect(`${emu.url}?a=b`)
  c.ws.send(JSON.stringify(startEvent()))
  await c.waitMessages(1)
  c.ws.send(Buffer.from([1, 2, 3]))
  await until(() => emu.sessions()[0].frames === 1)
  const sessions = (await (await fetch(`${emu.httpUrl}/sessions`)).json()) as Json[]
  t.match(sessions, [{ id: 1, path: '/stream?a=b', frames: 1, bytes: 3, sha256: sha([Buffer.from([1, 2, 3])]) }])
  t.equal((await fetch(`${emu.httpUrl}/nope`)).status, 404)
  t.equal((await fetch(`${emu.httpUrl}/sessions`, { method: 'POST' })).status, 404)
  await emu.close()
  t.equal((await c.closed).code, 1006, 'close() terminates open sessions')
  await t.rejects(connect(emu.url), 'no longer listening')
  await emu.close()
})

t.test('rejects an unknown kind', async t => {
  await t.rejects(startVendorEmulator({ kind: 'nope' as 'passthrough' }), /unknown emulator kind/)
})
