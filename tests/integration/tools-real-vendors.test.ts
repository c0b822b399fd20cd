import t from 'tap'
import { closeOf, untilOpen } from '../helpers/gateway'
import { createHash, randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { WebSocket, type RawData } from 'ws'
import {
  startRealVendor,
  twilioSignature,
  type RealVendorEmulator,
  type RealVendorOptions,
  type RealVendorSession
} from '../../gateway/tools/real-vendors'
import { FakeClock } from '../helpers/fake-clock'

type Json = Record<string, unknown>

interface Client {
  ws: WebSocket
  msgs: Json[]
  /** Headers of the 101 answer. */
  upgradeHeaders: IncomingMessage['headers']
  closed: Promise<{ code: number; reason: string }>
  /** Resolves with the first message (from index `from`) matching `pred`. */
  waitFor(pred: (m: Json) => boolean, from?: number, ms?: number): Promise<Json>
  sendJson(msg: unknown): void
}

async function connect(url: string, headers: Record<string, string> = {}): Promise<Client> {
  const ws = new WebSocket(url, { perMessageDeflate: false, headers })
  const msgs: Json[] = []
  let upgradeHeaders: IncomingMessage['headers'] = {}
  ws.on('upgrade', (res: IncomingMessage) => {
    upgradeHeaders = res.headers
  })
  ws.on('message', (data: RawData, isBinary: boolean) => {
    if (!isBinary) msgs.push(JSON.parse(String(data)) as Json)
  })
  const closed = closeOf(ws)
  await untilOpen(ws)
  return {
    ws,
    msgs,
    upgradeHeaders,
    closed,
    sendJson: msg => ws.send(JSON.stringify(msg)),
    waitFor: async (pred, from = 0, ms = 3000) => {
      const end = Date.now() + ms
      for (;;) {
        const hit = msgs.slice(from).find(pred)
        if (hit !== undefined) return hit
        if (Date.now() > end)
          throw new Error(`timed out waiting for a message; have ${JSON.stringify(msgs).slice(0, 400)}`)
        await sleep(5)
      }
    }
  }
}

/** Attempts an upgrade that the emulator should refuse; returns the HTTP answer. */
function refused(
  url: string,
  headers: Record<string, string> = {}
): Promise<{ status: number; headers: IncomingMessage['headers']; body: Json }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, headers })
    ws.on('open', () => reject(new Error('upgrade unexpectedly accepted')))
    ws.on('error', () => {})
    ws.on('unexpected-response', (_req, res: IncomingMessage) => {
      let text = ''
      res.on('data', (c: Buffer) => (text += c.toString()))
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) as Json })
      )
    })
  })
}

const sleep = (ms: number): Promise<void> => new Promise(r => setTimeout(r, ms))

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting for condition')
    await sleep(5)
  }
}

async function emulator(
  t: { teardown(fn: () => unknown): void },
  opts: RealVendorOptions
): Promise<RealVendorEmulator> {
  const emu = await startRealVendor(opts)
  t.teardown(() => emu.close())
  return emu
}

/** The (only or last) session, once closed. */
async function closedSession(emu: RealVendorEmulator, index = -1): Promise<RealVendorSession> {
  await until(() => {
    const s = emu.sessions().at(index)
    return s?.closed === true
  })
  return emu.sessions().at(index) as RealVendorSession
}

/** Deterministic mu-law-ish bytes. */
function audio(bytes: number, seed = 1): Buffer {
  const b = Buffer.alloc(bytes)
  for (let i = 0; i < bytes; i++) b[i] = (i * 31 + seed * 7) & 0xff
  return b
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex')

// =============================================================================================
// Deepgram
// =============================================================================================

t.test('deepgram: a conforming client gets Results, Finalize, Metadata and a clean close', async t => {
  const emu = await emulator(t, { kind: 'deepgram', apiKey: 'dg-secret', resultEveryMs: 200 })
  t.match(emu.url, /^ws:\/\/127\.0\.0\.1:\d+\/v1\/listen$/)
  const c = await connect(`${emu.url}?model=nova-3&encoding=mulaw&sample_rate=8000&channels=1&punctuate=true&tag=x`, {
    Authorization: 'Token dg-secret'
  })
  const requestId = c.upgradeHeaders['dg-request-id']
  t.match(requestId, /^[0-9a-f-]{36}$/, '101 answer carries dg-request-id')
  const sent: Buffer[] = []
  for (let i = 0; i < 55; i++) {
    const f = audio(160, i) // 20 ms of 8 kHz mu-law
    sent.push(f)
    c.ws.send(f)
  }
  c.sendJson({ type: 'KeepAlive' })
  c.sendJson({ type: 'Finalize' })
  await c.waitFor(m => m.from_finalize === true)
  c.sendJson({ type: 'CloseStream' })
  const meta = await c.waitFor(m => m.type === 'Metadata')
  const { code } = await c.closed
  t.equal(code, 1000, 'closed 1000 after CloseStream')

  const results = c.msgs.filter(m => m.type === 'Results')
  t.equal(results.length, 6, '5 cadence results (1.1 s / 200 ms) + 1 from Finalize')
  for (const r of results) {
    t.match(r, {
      type: 'Results',
      channel_index: [0, 1],
      duration: Number,
      start: Number,
      is_final: true,
      speech_final: Boolean,
      channel: { alternatives: [{ transcript: String, confidence: Number, words: Array }] },
      metadata: { request_id: requestId, model_info: { name: 'nova-3' } }
    })
  }
  t.same(
    results.map(r => r.start),
    [0, 0.2, 0.4, 0.6, 0.8, 1],
    'segments are contiguous in audio time'
  )
  t.equal(results[5].duration, 0.1, 'Finalize flushes the pending 100 ms')
  const words = ((results[0].channel as Json).alternatives as Json[])[0].words as Json[]
  t.match(words[0], { word: String, start: Number, end: Number, confidence: Number, punctuated_word: String })
  t.match(meta, {
    type: 'Metadata',
    transaction_key: 'deprecated',
    request_id: requestId,
    duration: 1.1,
    channels: 1,
    created: String
  })
  t.equal(meta.sha256, sha(Buffer.concat(sent)), 'Metadata sha256 is of the audio')

  const s = await closedSession(emu)
  t.same(s.errors, [], 'no violations')
  t.equal(s.frames, 55)
  t.equal(s.audioBytes, 55 * 160)
  t.equal(s.sha256, sha(Buffer.concat(sent)))
  t.equal(s.keepalives, 1)
  t.equal(s.headers.authorization, '[REDACTED]', 'credential redacted')
  t.equal(s.query.encoding, 'mulaw')
  t.equal(s.closeCode, 1000)
})

t.test('deepgram: interim_results=true sends an interim before each final', async t => {
  const emu = await emulator(t, { kind: 'deepgram', resultEveryMs: 200 })
  const c = await connect(`${emu.url}?encoding=linear16&sample_rate=16000&channels=1&interim_results=true`)
  c.ws.send(Buffer.alloc(6400 * 2)) // 400 ms of 16 kHz PCM16, one frame
  await until(() => c.msgs.length >= 4)
  t.same(
    c.msgs.map(m => m.is_final),
    [false, true, false, true]
  )
  c.sendJson({ type: 'CloseStream' })
  await c.closed
  t.same((await closedSession(emu)).errors, [])
})

t.test('deepgram: bad query and bad credentials are refused at upgrade', async t => {
  const emu = await emulator(t, { kind: 'deepgram', apiKey: 'dg-secret' })
  const auth = { Authorization: 'Token dg-secret' }
  const noEncoding = await refused(`${emu.url}?sample_rate=8000&channels=1`, auth)
  t.equal(noEncoding.status, 400, 'missing encoding → 400')
  t.match(noEncoding.headers['dg-error'], /encoding is required/)
  t.match(noEncoding.body, { err_code: 'Bad Request', request_id: String })
  const badRate = await refused(`${emu.url}?encoding=mulaw&sample_rate=44100&channels=1`, auth)
  t.equal(badRate.status, 400)
  t.match(badRate.body.err_msg, /sample_rate must be 8000 or 16000/)
  t.equal(
    (await refused(`${emu.url}?encoding=mulaw&sample_rate=8000&channels=2`, auth)).status,
    400,
    'channels must be 1'
  )
  t.equal(
    (await refused(`${emu.url}?encoding=mulaw&sample_rate=8000&channels=1&interim_results=yes`, auth)).status,
    400
  )
  const noKey = await refused(`${emu.url}?encoding=mulaw&sample_rate=8000&channels=1`)
  t.equal(noKey.status, 401, 'no credentials → 401')
  t.match(noKey.body, { err_code: 'INVALID_AUTH' })
  t.equal(
    (await refused(`${emu.url}?encoding=mulaw&sample_rate=8000&channels=1`, { Authorization: 'Token wrong' })).status,
    401
  )
  const bearer = await connect(`${emu.url}?encoding=mulaw&sample_rate=8000&channels=1`, {
    Authorization: 'Bearer dg-secret'
  })
  bearer.ws.close(1000)
  await bearer.closed
  const sessions = emu.sessions()
  t.equal(sessions.length, 7, 'refused upgrades are reported too')
  t.match(sessions[0].errors[0], /encoding is required/)
  t.same(sessions[6].errors, [], 'Bearer is accepted')
  t.equal((await refused(emu.url.replace('/v1/listen', '/v2/listen'))).status, 404, 'wrong path → 404')
})

t.test('deepgram: odd-sized linear16 frames and unknown text messages are recorded, the stream goes on', async t => {
  const emu = await emulator(t, { kind: 'deepgram', resultEveryMs: 100 })
  const c = await connect(`${emu.url}?encoding=linear16&sample_rate=8000&channels=1`)
  c.ws.send(Buffer.alloc(1601))
  c.sendJson({ type: 'Flush' })
  c.ws.send('not json')
  c.sendJson({ type: 'KeepAlive', extra: 1 })
  await c.waitFor(m => m.type === 'Results')
  c.sendJson({ type: 'CloseStream' })
  await c.closed
  const s = await closedSession(emu)
  t.equal(s.errors.length, 4)
  t.match(s.errors[0], /1601 bytes is not a whole number of linear16 samples/)
  t.match(s.errors[1], /unknown message type "Flush"/)
  t.match(s.errors[2], /not a JSON object/)
  t.match(s.errors[3], /KeepAlive: unexpected field\(s\) extra/)
  t.equal(s.closeCode, 1000, 'the stream still ends normally')
})

t.test('deepgram: no audio or KeepAlive for idleCloseMs closes 1011 NET-0001', async t => {
  const clock = new FakeClock()
  const emu = await emulator(t, { kind: 'deepgram', idleCloseMs: 500, clock })
  const c = await connect(`${emu.url}?encoding=mulaw&sample_rate=8000&channels=1`)
  c.ws.send(audio(160))
  await until(() => emu.sessions()[0].frames === 1)
  clock.advance(499)
  t.same(emu.sessions()[0].errors, [], 'still open 1 ms before idleCloseMs')
  clock.advance(1)
  const { code, reason } = await c.closed
  t.equal(code, 1011)
  t.match(reason, /NET-0001/)
  const s = await closedSession(emu)
  t.match(s.errors, [/no audio or KeepAlive for 500 ms/])
})

t.test('deepgram: KeepAlive every 150 ms keeps an idle stream open past idleCloseMs', async t => {
  const clock = new FakeClock()
  const emu = await emulator(t, { kind: 'deepgram', idleCloseMs: 500, clock })
  const c = await connect(`${emu.url}?encoding=mulaw&sample_rate=8000&channels=1`)
  for (let i = 0; i < 8; i++) {
    c.sendJson({ type: 'KeepAlive' })
    await until(() => emu.sessions()[0].keepalives === i + 1)
    clock.advance(150)
  }
  t.same(emu.sessions()[0].errors, [], 'still open after 1.2 s of KeepAlive only')
  t.notOk(emu.sessions()[0].closed)
  c.sendJson({ type: 'CloseStream' })
  t.equal((await c.closed).code, 1000)
  const s = await closedSession(emu)
  t.equal(s.keepalives, 8)
  t.same(s.errors, [])
})

// =============================================================================================
// AssemblyAI
// =============================================================================================

t.test('assemblyai: Begin, partial and final Turns, ForceEndpoint, Terminate → Termination', async t => {
  const emu = await emulator(t, { kind: 'assemblyai', apiKey: 'aai-secret', resultEveryMs: 500 })
  t.match(emu.url, /\/v3\/ws$/)
  const c = await connect(
    `${emu.url}?sample_rate=8000&encoding=pcm_mulaw&format_turns=true&speech_model=universal-streaming-english`,
    { Authorization: 'aai-secret' }
  )
  const begin = await c.waitFor(m => m.type === 'Begin')
  t.match(begin, { type: 'Begin', id: /^[0-9a-f-]{36}$/, expires_at: Number })
  // Begin went out between the upgrade and its arrival here: expires_at is 3 h after that moment.
  const cap = (at: number): number => Math.floor((at + 3 * 3600 * 1000) / 1000)
  const expires = begin.expires_at as number
  t.ok(expires >= cap(emu.sessions()[0].openedAt) && expires <= cap(Date.now()), 'expires_at is 3 h after Begin')
  const sent: Buffer[] = []
  for (let i = 0; i < 24; i++) {
    const f = audio(400, i) // 50 ms of 8 kHz mu-law: the documented chunk size
    sent.push(f)
    c.ws.send(f)
  }
  c.sendJson({ type: 'UpdateConfiguration', end_of_turn_confidence_threshold: 0.5, max_turn_silence: 1000 })
  c.sendJson({ type: 'ForceEndpoint' })
  await until(() => c.msgs.filter(m => m.type === 'Turn' && m.end_of_turn === true).length === 6)
  c.sendJson({ type: 'Terminate' })
  const term = await c.waitFor(m => m.type === 'Termination')
  t.equal((await c.closed).code, 1000)

  const turns = c.msgs.filter(m => m.type === 'Turn')
  for (const turn of turns) {
    t.match(turn, {
      type: 'Turn',
      turn_order: Number,
      turn_is_formatted: Boolean,
      end_of_turn: Boolean,
      transcript: String,
      end_of_turn_confidence: Number,
      words: Array
    })
    t.match((turn.words as Json[])[0], {
      start: Number,
      end: Number,
      text: String,
      confidence: Number,
      word_is_final: Boolean
    })
  }
  t.same(
    turns.map(x => [x.turn_order, x.end_of_turn, x.turn_is_formatted]),
    [
      [0, false, false],
      [0, true, false],
      [0, true, true],
      [1, false, false],
      [1, true, false],
      [1, true, true],
      [2, true, false],
      [2, true, true] // ForceEndpoint ends the 200 ms in progress
    ]
  )
  t.match(turns[2].transcript, /^[A-Z].*\.$/, 'formatted turn is capitalised and punctuated')
  t.match(term, { type: 'Termination', audio_duration_seconds: 1, session_duration_seconds: Number })
  const s = await closedSession(emu)
  t.same(s.errors, [])
  t.equal(s.sha256, sha(Buffer.concat(sent)))
  t.equal(s.headers.authorization, '[REDACTED]')
})

t.test('assemblyai: a 20 ms chunk is an input duration violation (Error 3007, close 3007)', async t => {
  const emu = await emulator(t, { kind: 'assemblyai' })
  const c = await connect(`${emu.url}?sample_rate=8000&encoding=pcm_mulaw`)
  await c.waitFor(m => m.type === 'Begin')
  c.ws.send(audio(160))
  const err = await c.waitFor(m => m.type === 'Error')
  t.match(err, {
    type: 'Error',
    error_code: 3007,
    error: /^Input duration violation: 20 ms\. Expected between 50 and 1000 ms$/
  })
  t.equal((await c.closed).code, 3007)
  t.match((await closedSession(emu)).errors, [/Input duration violation/])
})

t.test('assemblyai: a 1.2 s chunk is also a violation; pcm_s16le at 16 kHz 50 ms is fine', async t => {
  const emu = await emulator(t, { kind: 'assemblyai' })
  const ok = await connect(`${emu.url}?sample_rate=16000&encoding=pcm_s16le`)
  ok.ws.send(Buffer.alloc(1600))
  ok.sendJson({ type: 'Terminate' })
  await ok.closed
  t.same((await closedSession(emu, 0)).errors, [])
  const big = await connect(`${emu.url}?sample_rate=16000&encoding=pcm_s16le`)
  big.ws.send(Buffer.alloc(38400))
  t.equal((await big.closed).code, 3007)
  t.match((await closedSession(emu, 1)).errors, [/1200 ms/])
})

t.test('assemblyai: missing encoding, missing key and unknown messages close with the documented codes', async t => {
  const emu = await emulator(t, { kind: 'assemblyai', apiKey: 'k' })
  const noEnc = await connect(`${emu.url}?sample_rate=8000`, { Authorization: 'k' })
  t.match(await noEnc.waitFor(m => m.type === 'Error'), { error_code: 3006, error: /encoding is required/ })
  t.equal((await noEnc.closed).code, 3006)
  const noKey = await connect(`${emu.url}?sample_rate=8000&encoding=pcm_mulaw`)
  t.match(await noKey.waitFor(m => m.type === 'Error'), {
    error_code: 1008,
    error: 'Unauthorized Connection: Missing Authorization header'
  })
  t.equal((await noKey.closed).code, 1008)
  const unknown = await connect(`${emu.url}?sample_rate=8000&encoding=pcm_mulaw`, { Authorization: 'k' })
  unknown.sendJson({ type: 'terminate_session' })
  t.match(await unknown.waitFor(m => m.type === 'Error'), {
    error_code: 3006,
    error: 'Invalid Message Type: terminate_session'
  })
  t.equal((await unknown.closed).code, 3006)
  // usm-streaming.yml (the published AsyncAPI file) defines no KeepAlive: it is an unknown type like any other.
  const keepalive = await connect(`${emu.url}?sample_rate=8000&encoding=pcm_mulaw&inactivity_timeout=5`, {
    Authorization: 'k'
  })
  keepalive.sendJson({ type: 'KeepAlive' })
  t.match(await keepalive.waitFor(m => m.type === 'Error'), {
    error_code: 3006,
    error: 'Invalid Message Type: KeepAlive'
  })
  t.equal((await keepalive.closed).code, 3006)
  const sessions = emu.sessions()
  t.equal(sessions.length, 4)
  t.ok(
    sessions.every(s => s.errors.length === 1),
    'each violation recorded once'
  )
})

t.test('assemblyai: audio faster than real time is a 3007 "Audio Transmission Rate Exceeded"', async t => {
  // common-errors.mdx: 3007 "Audio Transmission Rate Exceeded: Received <time> sec. audio in <time> sec".
  const clock = new FakeClock()
  const emu = await emulator(t, { kind: 'assemblyai', clock })
  const c = await connect(`${emu.url}?sample_rate=8000&encoding=pcm_mulaw`)
  await c.waitFor(m => m.type === 'Begin')
  for (let i = 0; i < 40; i++) c.ws.send(audio(400, i)) // 2 s at once: within the emulator's 2 s allowance
  await until(() => emu.sessions()[0].audioBytes === 40 * 400)
  t.same(emu.sessions()[0].errors, [])
  clock.advance(1000)
  for (let i = 0; i < 21; i++) c.ws.send(audio(400, i)) // 3.05 s of audio 1 s after Begin
  const err = await c.waitFor(m => m.type === 'Error')
  t.match(err, { error_code: 3007, error: /^Audio Transmission Rate Exceeded: Received 3\.05 sec\. audio in 1 sec$/ })
  t.equal((await c.closed).code, 3007)
})

t.test('assemblyai: sessionMaxMs closes 3008 like the 3-hour cap, without blaming the client', async t => {
  const clock = new FakeClock()
  const emu = await emulator(t, { kind: 'assemblyai', sessionMaxMs: 300, clock })
  const c = await connect(`${emu.url}?sample_rate=8000&encoding=pcm_mulaw`)
  await c.waitFor(m => m.type === 'Begin')
  clock.advance(299)
  t.notOk(emu.sessions()[0].closed, 'open 1 ms before the cap')
  clock.advance(1)
  const err = await c.waitFor(m => m.type === 'Error')
  t.match(err, { error_code: 3008, error: 'Session Expired: Maximum session duration exceeded' })
  const { code, reason } = await c.closed
  t.equal(code, 3008)
  t.equal(reason, 'Session Expired: Maximum session duration exceeded')
  t.same((await closedSession(emu)).errors, [])
})

t.test('assemblyai: inactivityTimeoutMs shortens the inactivity_timeout the client asked for', async t => {
  const clock = new FakeClock()
  const emu = await emulator(t, { kind: 'assemblyai', inactivityTimeoutMs: 1000, clock })
  const c = await connect(`${emu.url}?sample_rate=8000&encoding=pcm_mulaw&inactivity_timeout=5`)
  await c.waitFor(m => m.type === 'Begin')
  clock.advance(900)
  c.ws.send(audio(400))
  await until(() => emu.sessions()[0].audioBytes === 400)
  clock.advance(999)
  t.same(emu.sessions()[0].errors, [], 'audio started the timeout over')
  clock.advance(1)
  const err = await c.waitFor(m => m.type === 'Error')
  t.match(err, { error_code: 3005, error: /no audio for 1000 ms/ })
  t.equal((await c.closed).code, 3005)
  t.match((await closedSession(emu)).errors, [/inactivity timeout/])
})

// =============================================================================================
// Twilio Media Streams
// =============================================================================================

const STREAM_SID = `MZ${'a'.repeat(32)}`
const ACCOUNT_SID = `AC${'b'.repeat(32)}`
const CALL_SID = `CA${'c'.repeat(32)}`

function twilioStart(seq = '1'): Json {
  return {
    event: 'start',
    sequenceNumber: seq,
    streamSid: STREAM_SID,
    start: {
      accountSid: ACCOUNT_SID,
      streamSid: STREAM_SID,
      callSid: CALL_SID,
      tracks: ['inbound'],
      customParameters: { contactId: '42' },
      mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 }
    }
  }
}

function twilioMedia(seq: number, chunk: number, payload: Buffer): Json {
  return {
    event: 'media',
    sequenceNumber: String(seq),
    streamSid: STREAM_SID,
    media: {
      track: 'inbound',
      chunk: String(chunk),
      timestamp: String((chunk - 1) * 20),
      payload: payload.toString('base64')
    }
  }
}

t.test('twilio-media: connected, start, media, mark, dtmf, stop: no violations and transcripts arrive', async t => {
  const emu = await emulator(t, { kind: 'twilio-media', resultEveryMs: 500 })
  t.match(emu.url, /\/media$/)
  const c = await connect(emu.url)
  c.sendJson({ event: 'connected', protocol: 'Call', version: '1.0.0' })
  c.sendJson(twilioStart())
  const sent: Buffer[] = []
  for (let i = 1; i <= 50; i++) {
    const f = audio(160, i)
    sent.push(f)
    c.sendJson(twilioMedia(i + 1, i, f))
  }
  c.sendJson({ event: 'mark', sequenceNumber: '52', streamSid: STREAM_SID, mark: { name: 'greeting-done' } })
  c.sendJson({
    event: 'dtmf',
    sequenceNumber: '53',
    streamSid: STREAM_SID,
    dtmf: { track: 'inbound_track', digit: '5' }
  })
  await until(() => c.msgs.length === 2)
  c.sendJson({
    event: 'stop',
    sequenceNumber: '54',
    streamSid: STREAM_SID,
    stop: { accountSid: ACCOUNT_SID, callSid: CALL_SID }
  })
  const { code, reason } = await c.closed
  t.equal(code, 1000)
  t.equal(reason, 'stream stopped')
  t.equal(c.msgs.length, 2, 'two transcripts for 1 s of audio at 500 ms')
  for (const m of c.msgs) t.match(m, { event: 'transcript', streamSid: STREAM_SID, text: String, isFinal: true })
  const s = await closedSession(emu)
  t.same(s.errors, [])
  t.equal(s.frames, 50)
  t.equal(s.audioBytes, 8000, 'base64 payloads decoded')
  t.ok(s.bytes > s.audioBytes, 'wire bytes include the JSON envelope')
  t.equal(s.sha256, sha(Buffer.concat(sent)))
  t.equal(s.texts.length, 5, 'connected, start, mark, dtmf, stop (media are counted, not kept)')
})

t.test('twilio-media: a sequenceNumber gap and a chunk gap are recorded', async t => {
  const emu = await emulator(t, { kind: 'twilio-media' })
  const c = await connect(emu.url)
  c.sendJson({ event: 'connected', protocol: 'Call', version: '1.0.0' })
  c.sendJson(twilioStart())
  c.sendJson(twilioMedia(2, 1, audio(160)))
  c.sendJson(twilioMedia(4, 2, audio(160))) // seq 3 missing
  c.sendJson(twilioMedia(5, 4, audio(160))) // chunk 3 missing
  c.sendJson({
    event: 'stop',
    sequenceNumber: '6',
    streamSid: STREAM_SID,
    stop: { accountSid: ACCOUNT_SID, callSid: CALL_SID }
  })
  await c.closed
  const s = await closedSession(emu)
  t.same(s.errors, ['media: sequenceNumber 4, expected 3 (gap)', 'media.chunk 4 on inbound, expected 3'])
})

t.test('twilio-media: malformed start, payload, binary frames and a close before stop are recorded', async t => {
  const emu = await emulator(t, { kind: 'twilio-media' })
  const c = await connect(emu.url)
  c.sendJson({ event: 'connected', protocol: 'Call', version: '1.0.0' })
  const start = twilioStart()
  ;(start.start as Json).mediaFormat = { encoding: 'audio/x-mulaw', sampleRate: '8000', channels: 1 }
  ;(start.start as Json).tracks = ['inbound', 'inbound']
  c.sendJson(start)
  c.sendJson({
    ...twilioMedia(2, 1, audio(160)),
    media: { track: 'inbound', chunk: '1', timestamp: '0', payload: 'not base64!' }
  })
  c.ws.send(audio(160))
  c.sendJson({ ...twilioMedia(3, 2, audio(160)), sequenceNumber: 3 })
  await until(() => emu.sessions()[0].errors.length >= 5)
  c.ws.close(1000)
  const s = await closedSession(emu)
  t.match(s.errors, [
    /start\.tracks must be/,
    /start\.mediaFormat\.sampleRate must be 8000/,
    /media\.payload must be non-empty base64/,
    /binary frame of 160 bytes/,
    /sequenceNumber must be a decimal string/,
    /closed by the client before a stop event/
  ])
})

t.test('twilio-media: with apiKey, X-Twilio-Signature (or Bearer) is required', async t => {
  const emu = await emulator(t, { kind: 'twilio-media', apiKey: 'auth-token' })
  const wssUrl = `wss://127.0.0.1:${emu.port}/media?x=1`
  const signed = await connect(`${emu.url}?x=1`, { 'X-Twilio-Signature': twilioSignature('auth-token', wssUrl) })
  signed.ws.close(1000)
  await signed.closed
  t.equal(emu.sessions()[0].headers['x-twilio-signature'], '[REDACTED]')
  t.equal((await refused(`${emu.url}?x=1`, { 'X-Twilio-Signature': twilioSignature('other', wssUrl) })).status, 401)
  t.equal((await refused(emu.url)).status, 401)
  const bearer = await connect(emu.url, { Authorization: 'Bearer auth-token' })
  bearer.ws.close(1000)
  await bearer.closed
})

// =============================================================================================
// AudioHook
// =============================================================================================

const ORG = randomUUID()

/** A small AudioHook client that keeps seq, serverseq and position right (unless told otherwise). */
class AhClient {
  seq = 0
  samples = 0
  discarded = 0
  constructor(
    readonly c: Client,
    readonly id: string
  ) {}

  get serverseq(): number {
    const seqs = this.c.msgs.map(m => m.seq as number)
    return seqs.length === 0 ? 0 : Math.max(...seqs)
  }

  position(): string {
    return `PT${Math.round((this.samples / 8000 + this.discarded) * 1000) / 1000}S`
  }

  send(type: string, parameters: Json, overrides: Json = {}): void {
    this.c.sendJson({
      version: '2',
      id: this.id,
      type,
      seq: ++this.seq,
      serverseq: this.serverseq,
      position: this.position(),
      parameters,
      ...overrides
    })
  }

  audio(bytes: Buffer): void {
    this.c.ws.send(bytes)
    this.samples += bytes.length
  }

  open(media: Json[] = [{ type: 'audio', format: 'PCMU', channels: ['external'], rate: 8000 }]): void {
    this.send('open', {
      organizationId: ORG,
      conversationId: randomUUID(),
      participant: { id: randomUUID(), ani: '+15551234567', aniName: 'Caller', dnis: '+15557654321' },
      media,
      language: 'en-US'
    })
  }
}

async function ahConnect(emu: RealVendorEmulator, extra: Record<string, string> = {}): Promise<AhClient> {
  const id = randomUUID()
  const c = await connect(emu.url, {
    'Audiohook-Organization-Id': ORG,
    'Audiohook-Session-Id': id,
    'Audiohook-Correlation-Id': randomUUID(),
    ...extra
  })
  return new AhClient(c, id)
}

t.test('audiohook: open → opened, ping → pong, audio → transcript events, pause/resume, close → closed', async t => {
  const emu = await emulator(t, { kind: 'audiohook', apiKey: 'ah-key', resultEveryMs: 500 })
  const ah = await ahConnect(emu, {
    'X-API-KEY': 'ah-key',
    Signature: 'sig1=:abc=:',
    'Signature-Input': 'sig1=("@request-target");keyid="ah-key"'
  })
  ah.open([
    { type: 'audio', format: 'PCMU', channels: ['external', 'internal'], rate: 8000 },
    { type: 'audio', format: 'PCMU', channels: ['external'], rate: 8000 }
  ])
  const opened = await ah.c.waitFor(m => m.type === 'opened')
  t.match(opened, {
    version: '2',
    id: ah.id,
    type: 'opened',
    seq: 1,
    clientseq: 1,
    parameters: { media: [{ type: 'audio', format: 'PCMU', channels: ['external'], rate: 8000 }] }
  })
  ah.send('ping', {})
  t.match(await ah.c.waitFor(m => m.type === 'pong'), { seq: 2, clientseq: 2, parameters: {} })
  const sent: Buffer[] = []
  for (let i = 0; i < 10; i++) {
    const f = audio(800, i) // 100 ms
    sent.push(f)
    ah.audio(f)
  }
  await until(() => ah.c.msgs.filter(m => m.type === 'event').length === 2)
  ah.send('paused', {})
  ah.send('resumed', { start: 'PT1S', discarded: 'PT0.5S' })
  ah.discarded += 0.5
  ah.audio(audio(800))
  ah.send('discarded', { start: 'PT1.6S', discarded: 'PT0.2S' })
  ah.discarded += 0.2
  ah.send('update', { language: 'fr-FR' })
  await ah.c.waitFor(m => m.type === 'updated')
  ah.send('ping', { rtt: 'PT0.012S' })
  ah.send('close', { reason: 'end' })
  await ah.c.waitFor(m => m.type === 'closed')
  ah.c.ws.close(1000)
  await ah.c.closed

  const events = ah.c.msgs.filter(m => m.type === 'event')
  t.equal(events.length, 2)
  const entity = ((events[0].parameters as Json).entities as Json[])[0]
  t.match(entity, {
    type: 'transcript',
    data: {
      id: /^[0-9a-f-]{36}$/,
      channelId: 0,
      isFinal: true,
      offset: 'PT0S',
      duration: 'PT0.5S',
      alternatives: [{ confidence: Number, interpretations: [{ type: 'display', transcript: String }] }]
    }
  })
  t.equal((((events[1].parameters as Json).entities as Json[])[0].data as Json).offset, 'PT0.5S')
  const seqs = ah.c.msgs.map(m => m.seq)
  t.same(
    seqs,
    seqs.map((_, i) => i + 1),
    'server seq counts 1, 2, 3, …'
  )
  const s = await closedSession(emu)
  t.same(s.errors, [])
  t.equal(s.keepalives, 2, 'pings counted')
  t.equal(s.signed, true, 'signature headers seen (not verified)')
  t.equal(s.headers['x-api-key'], '[REDACTED]')
  t.equal(s.headers['signature-input'], '[REDACTED]', 'signature-input names the key id')
  t.equal(s.sha256, sha(Buffer.concat([...sent, audio(800)])))
})

t.test('audiohook: a seq gap is recorded and answered with disconnect {reason:"error"}', async t => {
  const emu = await emulator(t, { kind: 'audiohook' })
  const ah = await ahConnect(emu)
  ah.open()
  await ah.c.waitFor(m => m.type === 'opened')
  ah.seq++ // skip one
  ah.send('ping', {})
  const disc = await ah.c.waitFor(m => m.type === 'disconnect')
  t.match(disc, { type: 'disconnect', parameters: { reason: 'error', info: /seq 3, expected 2/ } })
  ah.send('close', { reason: 'error' })
  await ah.c.waitFor(m => m.type === 'closed')
  ah.c.ws.close(1000)
  const s = await closedSession(emu)
  t.same(
    s.errors,
    ['ping: seq 3, expected 2 (not monotonically increasing)'],
    'one error; counting resumes after the gap'
  )
  t.equal(s.signed, false)
})

t.test('audiohook: audio before open, a wrong position and a close without close/closed are recorded', async t => {
  const emu = await emulator(t, { kind: 'audiohook' })
  const ah = await ahConnect(emu)
  ah.c.ws.send(audio(160))
  await ah.c.waitFor(m => m.type === 'disconnect')
  ah.open()
  await ah.c.waitFor(m => m.type === 'opened')
  ah.audio(audio(800))
  ah.send('ping', {}, { position: 'PT5S' })
  await until(() => emu.sessions()[0].errors.length === 2)
  ah.c.ws.close(1000)
  const s = await closedSession(emu)
  t.match(s.errors, [
    /Received audio in state PREPARING/,
    /position PT5S does not match the audio received \(PT0.1S\)/,
    /closed by the client in state ACTIVE/
  ])
  t.equal(ah.c.msgs.filter(m => m.type === 'disconnect').length, 1, 'disconnect is sent once')
})

t.test(
  'audiohook: a wrong API key → 401; a session, correlation or organization id that is not a UUID: cut (1006)',
  async t => {
    // As the reference server: request auth before the upgrade; createAudioHookSession throws after it.
    const emu = await emulator(t, { kind: 'audiohook', apiKey: 'ah-key' })
    const base = {
      'Audiohook-Organization-Id': ORG,
      'Audiohook-Session-Id': randomUUID(),
      'Audiohook-Correlation-Id': randomUUID(),
      'X-API-KEY': 'ah-key'
    }
    t.equal((await refused(emu.url, { ...base, 'X-API-KEY': 'nope' })).status, 401)
    for (const [name, value] of [
      ['Audiohook-Session-Id', 'not-a-uuid'],
      ['Audiohook-Correlation-Id', `probe-${randomUUID()}`],
      ['Audiohook-Organization-Id', 'org']
    ]) {
      const c = await connect(emu.url, { ...base, [name]: value })
      t.equal((await c.closed).code, 1006, `${name} ${value}: the socket is cut, no close frame`)
      t.match((await closedSession(emu)).errors, [new RegExp(`invalid "${name.toLowerCase()}"`)])
    }
    t.equal(emu.sessions().length, 4)
  }
)

// =============================================================================================
// Shared surface
// =============================================================================================

t.test('every kind answers /healthz and /sessions, and closeAll/dropAll/close end sessions', async t => {
  for (const kind of ['deepgram', 'assemblyai', 'twilio-media', 'audiohook'] as const) {
    const emu = await emulator(t, { kind })
    const health = (await (await fetch(`${emu.httpUrl}/healthz`)).json()) as Json
    t.same(health, { ok: true, kind })
    t.equal((await fetch(`${emu.httpUrl}/nope`)).status, 404)
    const headers: Record<string, string> =
      kind === 'audiohook'
        ? {
            'Audiohook-Organization-Id': ORG,
            'Audiohook-Session-Id': randomUUID(),
            'Audiohook-Correlation-Id': randomUUID()
          }
        : {}
    const query =
      kind === 'deepgram'
        ? '?encoding=mulaw&sample_rate=8000&channels=1'
        : kind === 'assemblyai'
          ? '?sample_rate=8000&encoding=pcm_mulaw'
          : ''
    const a = await connect(emu.url + query, headers)
    const b = await connect(emu.url + query, { ...headers, 'Audiohook-Session-Id': randomUUID() })
    emu.closeAll(4000, 'bye')
    t.same(await a.closed, { code: 4000, reason: 'bye' }, `${kind}: closeAll sends a close frame`)
    t.equal((await b.closed).code, 4000)
    const listed = (await (await fetch(`${emu.httpUrl}/sessions`)).json()) as RealVendorSession[]
    t.equal(listed.length, 2, `${kind}: /sessions lists both`)
    const c = await connect(emu.url + query, { ...headers, 'Audiohook-Session-Id': randomUUID() })
    emu.dropAll()
    t.equal((await c.closed).code, 1006, `${kind}: dropAll destroys the socket`)
    await emu.close()
    t.ok(emu.sessions().every(s => s.closed))
  }
})
