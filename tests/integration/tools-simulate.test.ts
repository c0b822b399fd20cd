import t from 'tap'
import { WebSocketServer, type WebSocket, type RawData } from 'ws'
import { initMessage, simulateAudio, type SimulatedLeg } from '../../gateway/tools/simulate'
import { FakeClock, flush } from '../helpers/fake-clock'
import { refusedPorts } from '../helpers/process'

type Json = Record<string, unknown>

interface Conn {
  ws: WebSocket
  init: Json | null
  data: Buffer[]
}

interface TestServer {
  url: string
  conns: Conn[]
  close(): Promise<void>
}

/** A platform-facing hook: answers CONNECTED, then echoes the init message back as a MESSAGE. */
async function hookServer(onFrame?: (c: Conn) => void): Promise<TestServer> {
  const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', perMessageDeflate: false })
  await new Promise<void>(r => wss.once('listening', () => r()))
  const conns: Conn[] = []
  wss.on('connection', ws => {
    const c: Conn = { ws, init: null, data: [] }
    conns.push(c)
    ws.on('message', (data: RawData, isBinary: boolean) => {
      if (isBinary) {
        c.data.push(data as Buffer)
        onFrame?.(c)
        return
      }
      c.init = JSON.parse(String(data)) as Json
      ws.send(
        JSON.stringify({ command: 'CONNECTED', messageType: 'COMMAND', message: 'BEGIN AUDIO STREAM', parameters: {} })
      )
      ws.send(JSON.stringify({ command: 'MESSAGE', messageType: 'ECHO', message: String(data), parameters: {} }))
    })
  })
  const { port } = wss.address() as { port: number }
  return {
    url: `ws://127.0.0.1:${port}/hook`,
    conns,
    close: () =>
      new Promise<void>(r => {
        for (const c of wss.clients) c.terminate()
        wss.close(() => r())
      })
  }
}

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting for condition')
    await new Promise(r => setTimeout(r, 2))
  }
}

/** A simulateAudio run on a fake clock: `done` once every leg closed. */
function running(legs: Promise<SimulatedLeg[]>): { legs: Promise<SimulatedLeg[]>; done: () => boolean } {
  let done = false
  void legs.then(() => {
    done = true
  })
  return { legs, done: () => done }
}

t.test('initMessage is a complete init message', async t => {
  const m = initMessage({ contactId: 7, busNo: 4594, perspective: 'MIX' })
  t.notOk('authenticationToken' in m, 'no token field without a token')
  t.same(Object.keys(m), [
    'executionInfo',
    'systemTelemetryData',
    'streamPerspective',
    'streamsConfiguration',
    'appParams',
    'appConfig'
  ])
  t.match(m, {
    executionInfo: {
      contactId: 7,
      busNo: 4594,
      requestId: Number,
      actionType: 'AgentAssist',
      actionId: Number,
      scriptName: String
    },
    systemTelemetryData: {
      consumerProcessHost: String,
      consumerProcessName: String,
      consumerProcessVersion: String,
      platformClusterAlias: String,
      platformScriptEngineHost: String,
      consumerMetaData: Object
    },
    streamPerspective: 'MIX',
    streamsConfiguration: '',
    appParams: {},
    appConfig: {}
  })
  t.equal(initMessage({ token: 'x', contactId: 1, busNo: 2, perspective: 'TX' }).authenticationToken, 'x')
})

t.test('one leg: init, real-time pacing, looping clip, printed lines without the token', async t => {
  const srv = await hookServer()
  t.teardown(() => srv.close())
  // Not a multiple of 160 bytes, so some frames straddle the loop point.
  const clip = Buffer.from(Array.from({ length: 750 }, (_, i) => i % 251))
  const lines: string[] = []
  const clock = new FakeClock()
  const run = running(
    simulateAudio({
      url: srv.url,
      token: 'tok-SECRET-123',
      clip,
      perspective: 'RX',
      seconds: 1,
      contactIdBase: 555,
      busNo: 99,
      appParams: { lang: 'en' },
      print: l => lines.push(l),
      clock
    })
  )
  // Real-time pacing on the simulator's clock: frame k is due k × 20 ms after the init message.
  await until(() => srv.conns[0]?.data.length === 1)
  const counts: number[] = [1]
  for (let k = 1; k < 50; k++) {
    clock.advance(20)
    await until(() => srv.conns[0].data.length >= k + 1)
    counts.push(srv.conns[0].data.length)
  }
  t.same(
    counts,
    Array.from({ length: 50 }, (_, k) => k + 1),
    'one frame at once, then one more every 20 ms'
  )
  // After the last frame, a second for trailing messages, then the close.
  clock.advance(999)
  await flush()
  t.notOk(run.done(), 'still open 999 ms after the last frame')
  clock.advance(1)
  const legs = await run.legs
  const [leg] = legs
  t.match(leg, { index: 0, framesSent: 50, bytesSent: 8000, closeCode: 1000, messages: [{ messageType: 'ECHO' }] })
  t.match(leg.answer, { command: 'CONNECTED' })
  t.equal(leg.error, undefined)

  const c = srv.conns[0]
  t.match(c.init, {
    authenticationToken: 'tok-SECRET-123',
    executionInfo: { contactId: 555, busNo: 99, actionType: 'AgentAssist' },
    streamPerspective: 'RX',
    appParams: { lang: 'en' }
  })
  t.equal(c.data.length, 50)
  t.ok(
    c.data.every(d => d.length === 160),
    'every frame is 160 bytes'
  )
  t.same(Buffer.concat(c.data), Buffer.concat(Array(11).fill(clip)).subarray(0, 8000), 'clip looped in order')

  t.equal(lines[0], 'leg 0 contact 555 RX')
  t.equal(lines[1].startsWith('leg 0 answer {"command":"CONNECTED"'), true)
  t.match(lines[2], /^leg 0 message \{/)
  t.equal(lines[3], 'leg 0 closed 1000 done')
  t.equal(lines[4], 'leg 0 sent 50 frames (8000 bytes), got 1 messages')
  t.notMatch(lines.join('\n'), /tok-SECRET-123/, 'the echoed token is never printed')
  t.match(lines[2], /\[REDACTED\]/)
})

t.test('several legs share one scheduler; default length is the clip', async t => {
  const srv = await hookServer()
  t.teardown(() => srv.close())
  const clip = Buffer.alloc(500, 0xff) // 3 full frames and a 20-byte tail
  const legs = await simulateAudio({ url: srv.url, clip, legs: 3 })
  t.equal(legs.length, 3)
  for (const leg of legs) t.match(leg, { framesSent: 4, bytesSent: 500, closeCode: 1000 })
  t.same(
    legs.map(l => l.index),
    [0, 1, 2]
  )
  const ids = srv.conns.map(c => (c.init?.executionInfo as Json | undefined)?.contactId as number).sort()
  t.same(ids, [ids[0], ids[0] + 1, ids[0] + 2], 'one contact per leg, counting up')
  t.ok(srv.conns.every(c => c.init?.streamPerspective === 'TX' && !('authenticationToken' in (c.init ?? {}))))
  t.same(
    srv.conns[0].data.map(d => d.length),
    [160, 160, 160, 20]
  )
})

t.test('a server close stops the leg and is recorded', async t => {
  const srv = await hookServer(c => {
    if (c.data.length !== 5) return
    c.ws.send('not json')
    c.ws.close(4000, 'go away')
  })
  t.teardown(() => srv.close())
  const lines: string[] = []
  const clock = new FakeClock()
  const run = running(
    simulateAudio({ url: srv.url, clip: Buffer.alloc(160), seconds: 5, print: l => lines.push(l), clock })
  )
  await until(() => srv.conns[0]?.data.length === 1)
  for (let k = 1; !run.done() && k < 250; k++) {
    clock.advance(20)
    await until(() => run.done() || srv.conns[0].data.length >= k + 1)
  }
  const [leg] = await run.legs
  t.ok(clock.now() < 5000, `the leg ended before the 5 s clip did (at ${clock.now()} ms)`)
  t.equal(leg.closeCode, 4000)
  t.equal(leg.closeReason, 'go away')
  t.same(leg.messages.at(-1), { unparsed: 'not json' }, 'text that is not JSON is kept as unparsed')
  t.ok(leg.framesSent >= 5 && leg.framesSent < 20, `stopped sending (sent ${leg.framesSent})`)
  t.ok(lines.includes('leg 0 closed 4000 go away'))
})

t.test('a dropped connection is recorded as 1006', async t => {
  const srv = await hookServer(c => {
    if (c.data.length === 3) c.ws.terminate()
  })
  t.teardown(() => srv.close())
  const [leg] = await simulateAudio({ url: srv.url, clip: Buffer.alloc(160), seconds: 5 })
  t.equal(leg.closeCode, 1006)
})

t.test('connection refused', async t => {
  const [port] = await refusedPorts(1)
  const [leg] = await simulateAudio({ url: `ws://127.0.0.1:${port}/`, clip: Buffer.alloc(160) })
  t.equal(leg.closeCode, 1006)
  t.match(leg.error, /ECONNREFUSED/)
  t.equal(leg.framesSent, 0)
})

t.test('bad options are rejected', async t => {
  await t.rejects(simulateAudio({ url: 'ws://127.0.0.1:1/', clip: Buffer.alloc(0) }), /clip is empty/)
  await t.rejects(simulateAudio({ url: 'ws://127.0.0.1:1/', clip: Buffer.alloc(1), legs: 0 }), /legs/)
  await t.rejects(simulateAudio({ url: 'ws://127.0.0.1:1/', clip: Buffer.alloc(1), seconds: -1 }), /seconds/)
})

t.test('issue 22: each run is its own call (a fresh contact) unless contactIdBase says otherwise', async t => {
  // Two runs on one route with the same contact re-attach to each other's vendor session (same contactId,
  // busNo and perspective: docs/concepts/sessions.md, "Re-attach"); a run of the simulator is a new call.
  const srv = await hookServer()
  t.teardown(() => srv.close())
  const clip = Buffer.alloc(160, 0xff)
  const lines: string[] = []
  await simulateAudio({ url: srv.url, clip, print: l => lines.push(l) })
  await simulateAudio({ url: srv.url, clip })
  const [a, b] = srv.conns.map(c => (c.init!.executionInfo as Json).contactId as number)
  t.not(a, b, 'two runs, two contacts')
  t.ok(Number.isSafeInteger(a) && a >= 1_000_000_000, 'a valid contactId')
  t.ok(lines.includes(`leg 0 contact ${a} TX`), 'the run prints its contact')
  await simulateAudio({ url: srv.url, clip, contactIdBase: 4242 })
  await simulateAudio({ url: srv.url, clip, contactIdBase: 4242 })
  t.same(
    srv.conns.slice(2).map(c => (c.init!.executionInfo as Json).contactId),
    [4242, 4242],
    'a given contact is kept (to rehearse a re-attach on purpose)'
  )
})
