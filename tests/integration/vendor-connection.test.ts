import t, { type Test } from 'tap'
import type { AddressInfo } from 'node:net'
import { type WebSocket, WebSocketServer } from 'ws'
import type { ConnectionContext, VendorFailure } from '../../gateway/audio/connection/connection-contract'
import { ControlChain } from '../../gateway/audio/connection/control-chain'
import { VendorConnection } from '../../gateway/audio/connection/vendor-connection'
import type { MappingInput } from '../../gateway/mapping/run'
import { Metrics } from '../../gateway/telemetry/metrics'
import { FakeClock, flush } from '../helpers/fake-clock'
import { type audioMapping, Lines, route, SETTINGS } from '../unit/audio/harness'

// One vendor connection against a tiny real vendor (ws on 127.0.0.1, port 0): what it sends, and the
// typed ready / refused / lost it tells. Time (the ready deadline) is the fake clock's.

type Msg = { event?: string; [k: string]: unknown }
type AudioMapping = Parameters<typeof audioMapping>[0]

interface Vendor {
  url: string
  /** Text frames received, parsed, per connection, and the request headers of each. */
  texts: Msg[][]
  headers: Record<string, string | string[] | undefined>[]
  binary: number[]
  sockets: WebSocket[]
  connected: Promise<WebSocket>
}

async function vendor(
  t: Test,
  opts: { refuse?: number; onText?: (ws: WebSocket, m: Msg) => void } = {}
): Promise<Vendor> {
  const wss = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    verifyClient: (_info, cb) => (opts.refuse === undefined ? cb(true) : cb(false, opts.refuse))
  })
  await new Promise<void>(resolve => wss.once('listening', () => resolve()))
  let connected!: (ws: WebSocket) => void
  const v: Vendor = {
    url: `ws://127.0.0.1:${(wss.address() as AddressInfo).port}/stream`,
    texts: [],
    headers: [],
    binary: [],
    sockets: [],
    connected: new Promise(resolve => {
      connected = resolve
    })
  }
  wss.on('connection', (ws, req) => {
    const texts: Msg[] = []
    v.texts.push(texts)
    v.headers.push(req.headers)
    v.sockets.push(ws)
    ws.on('message', (data, isBinary) => {
      if (isBinary) v.binary.push((data as Buffer).length)
      else {
        const m = JSON.parse(data.toString()) as Msg
        texts.push(m)
        opts.onText?.(ws, m)
      }
    })
    connected(ws)
  })
  t.teardown(
    () =>
      new Promise<void>(resolve => {
        for (const ws of wss.clients) ws.terminate()
        wss.close(() => resolve())
      })
  )
  return v
}

/** Open one connection to `url` with this mapping; `told` resolves with the first thing it tells. */
function connect(t: Test, url: string, audio: AudioMapping, settings = SETTINGS) {
  const clock = new FakeClock()
  const metrics = new Metrics()
  const logs = new Lines()
  const r = route(clock, ['v'], audio, () => url)
  const ctx: ConnectionContext = {
    route: r,
    settings,
    metrics,
    clock,
    chain: new ControlChain(err => t.fail(`control work threw: ${String(err)}`)),
    counters: metrics.startLeg('r'),
    namespace: 'r',
    log: logs.log
  }
  const results: string[] = []
  const unconfirmed: { bytesSinceLife: number }[] = []
  let tell!: (v: { what: 'ready' | 'refused' | 'lost'; detail: unknown }) => void
  let told = new Promise<{ what: 'ready' | 'refused' | 'lost'; detail: unknown }>(resolve => {
    tell = resolve
  })
  const input = { init: { token: 'x' }, leg: { id: 'leg-7' }, route: {}, upstream: {} } as unknown as MappingInput
  const replica = r.pool.byName('v')!
  const conn = new VendorConnection(ctx, replica, input, {
    ready: (_c, params) => tell({ what: 'ready', detail: params }),
    refused: (_c, failure: VendorFailure) => tell({ what: 'refused', detail: failure }),
    lost: (_c, failure: VendorFailure) => tell({ what: 'lost', detail: failure }),
    result: text => results.push(text),
    unconfirmed: c => unconfirmed.push(c.lossReport!())
  })
  t.teardown(() => conn.abort())
  const next = async () => {
    const v = await told
    told = new Promise(resolve => {
      tell = resolve
    })
    return v
  }
  return { conn, clock, replica, results, logs, metrics, next, ctx, unconfirmed }
}

const READY_ON_STARTED: AudioMapping = {
  url: async (i: any) => `${i.upstream.audio}?leg=${i.leg.id}`,
  headers: async (i: any) => ({ 'x-session': i.session.id, 'x-none': null }),
  open: async (i: any) => ({ event: 'start', leg: i.leg.id }),
  ready: {
    when: async (i: any) => i.msg.event === 'started',
    refused: async (i: any) => i.msg.event === 'error',
    reason: async (i: any) => i.msg.message,
    parameters: async (i: any) => ({ vendorId: i.msg.id })
  },
  results: [
    {
      when: async (i: any) => i.msg.event === 'transcript',
      emit: async (i: any) => ({ command: 'MESSAGE', messageType: 'TRANSCRIPT', message: i.msg.text, parameters: {} })
    }
  ],
  close: async () => ({ event: 'stop' }),
  closeWhen: async (i: any) => i.msg.event === 'stopped'
}

/** The vendor's side of READY_ON_STARTED: `start` answered with `started`. */
const STARTED = (ws: WebSocket, m: Msg): void => {
  if (m.event === 'start') ws.send(JSON.stringify({ event: 'started', id: 'v-1' }))
}

/** Pings every 1 s, a pong missed after 1 s: the heartbeat ticks every 250 ms. */
const LIVE = { ...SETTINGS, vendorPingSeconds: 1, vendorPongTimeoutSeconds: 1 }

/** A vendor that answers `started`, one ready connection to it (with `settings`), and the vendor's socket. */
async function readyConnection(t: Test, settings = LIVE) {
  const v = await vendor(t, { onText: STARTED })
  const c = connect(t, v.url, READY_ON_STARTED, settings)
  t.equal((await c.next()).what, 'ready')
  return { c, ws: await v.connected }
}

t.test('opens with the mapping URL and headers, sends the open frame, is ready on the vendor answer', async t => {
  const v = await vendor(t, {
    onText: (ws, m) => {
      if (m.event === 'start') {
        ws.send(JSON.stringify({ event: 'transcript', text: 'early' }))
        ws.send(JSON.stringify({ event: 'started', id: 'v-1' }))
      }
      if (m.event === 'stop') ws.send(JSON.stringify({ event: 'stopped' }))
    }
  })
  const c = connect(t, v.url, READY_ON_STARTED)
  t.same(await c.next(), { what: 'ready', detail: { vendorId: 'v-1' } })
  t.equal(c.conn.state, 'READY')
  t.match(v.headers[0], { 'x-session': /^[0-9a-f-]{36}$/ })
  t.notOk('x-none' in v.headers[0], 'null headers are left out')
  t.same(v.texts[0], [{ event: 'start', leg: 'leg-7' }])
  t.equal(c.replica.activeStreams, 1, 'the stream is leased')
  t.equal(c.replica.pendingHandshakes, 0)
  t.match(c.results, [/"message":"early"/], 'a result before readiness is read as a result')
  c.conn.writeAudio(new Uint8Array(160))
  c.conn.goodbye()
  const ws = await v.connected
  const code = await new Promise<number>(resolve => ws.once('close', resolve))
  t.equal(code, 1000, 'closed once the vendor said its goodbye (closeWhen)')
  await flush()
  t.same(c.unconfirmed, [], 'a goodbye the vendor completed leaves nothing unconfirmed')
  t.same(v.texts[0].at(-1), { event: 'stop' })
  t.same(v.binary, [160])
  await flush()
  t.equal(c.replica.activeStreams, 0, 'the lease is released')
})

t.test('no readiness within readyTimeoutSeconds: refused, not-ready (on the fake clock)', async t => {
  const v = await vendor(t)
  const c = connect(t, v.url, READY_ON_STARTED)
  await v.connected
  while (v.texts[0]?.length !== 1) await flush(1)
  c.clock.advance(1999)
  t.equal(c.conn.state, 'OPENING')
  c.clock.advance(1)
  t.same(await c.next(), { what: 'refused', detail: { kind: 'not-ready' } })
  t.equal(c.conn.state, 'CLOSED')
  t.equal(c.replica.activeStreams, 0)
})

t.test('the vendor refuses with a message: refused, with the message as a value', async t => {
  const v = await vendor(t, { onText: ws => ws.send(JSON.stringify({ event: 'error', message: 'bad model' })) })
  const c = connect(t, v.url, READY_ON_STARTED)
  t.same(await c.next(), { what: 'refused', detail: { kind: 'refused', vendorMessage: 'bad model' } })
})

t.test('an upgrade answered 401 is refused as a typed value: unreachable, upgrade, 401 (no text to parse)', async t => {
  const v = await vendor(t, { refuse: 401 })
  const c = connect(t, v.url, READY_ON_STARTED)
  t.same(await c.next(), { what: 'refused', detail: { kind: 'unreachable', socket: { kind: 'upgrade', status: 401 } } })
  t.equal(c.replica.activeStreams, 0)
  t.equal(c.replica.pendingHandshakes, 0)
})

t.test('nobody listening: unreachable with the network code', async t => {
  const v = await vendor(t)
  const c = connect(t, v.url.replace(/:\d+/, ':1'), READY_ON_STARTED)
  t.match(await c.next(), {
    what: 'refused',
    detail: { kind: 'unreachable', socket: { kind: 'network', code: 'ECONNREFUSED' } }
  })
})

t.test(
  'lost after ready: the close code and reason as a value; a failing url expression is a mapping failure',
  async t => {
    const v = await vendor(t)
    const c = connect(t, v.url, { ...READY_ON_STARTED, ready: null })
    t.equal((await c.next()).what, 'ready', 'no ready rule: ready once the open frame is out')
    ;(await v.connected).close(4001, 'quota')
    t.same(await c.next(), { what: 'lost', detail: { kind: 'closed', code: 4001, reason: 'quota', socket: null } })

    const m = connect(t, v.url, {
      url: async () => {
        throw new Error('no url for secret-value')
      }
    })
    t.match(await m.next(), { what: 'refused', detail: { kind: 'mapping', stage: 'url', error: /secret-value/ } })
    t.match(m.logs.lines, [{ event: 'mapping_error', stage: 'url' }])
  }
)

// ---- the vendor's control over audio (audio.control), general rules -------------------------------

/** A vendor that pauses (`hold`: audio held) and ends (`disconnect`) the session; the close frame says why. */
const CONTROLLED: AudioMapping = {
  ...READY_ON_STARTED,
  ready: null,
  control: [
    {
      when: async (i: any) => i.msg.event === 'hold',
      set: null,
      reply: null,
      emit: null,
      audio: 'pause',
      end: null,
      reconnect: false
    },
    {
      when: async (i: any) => i.msg.event === 'disconnect',
      set: async () => ({ closeReason: 'disconnect' }),
      reply: null,
      emit: null,
      audio: null,
      end: 'failover',
      reconnect: false
    }
  ],
  close: async (i: any) => ({ event: 'stop', reason: i.session.state.closeReason ?? 'end' })
}

const stopped = async (v: Vendor): Promise<Msg> => {
  while (v.texts[0]?.at(-1)?.event !== 'stop') await flush(1)
  return v.texts[0].at(-1)!
}

// AudioHook (reference server, serversessionimpl.ts onBinaryMessage) disconnects on audio in PAUSED; the
// held audio of a pause that never ended was flushed at hang-up (issue 22).
t.test(
  'audio held under a vendor pause that reaches the connection (a close drain) is discarded, counted, never sent',
  async t => {
    const v = await vendor(t, { onText: (ws, m) => m.event === 'start' && ws.send(JSON.stringify({ event: 'hold' })) })
    const c = connect(t, v.url, CONTROLLED)
    t.equal((await c.next()).what, 'ready')
    while (c.conn.bufferedAmount !== Number.POSITIVE_INFINITY) await flush(1)
    for (let i = 0; i < 3; i++) c.conn.writeAudio(new Uint8Array(160))
    c.conn.goodbye()
    t.same(await stopped(v), { event: 'stop', reason: 'end' })
    t.same(v.binary, [], 'not a byte of the held audio went to the vendor')
    t.equal(c.ctx.counters.dropVendorPaused, 3, 'counted as vendor_paused')
  }
)

// Genesys help, "What happens during a successful session": after the server's disconnect the client
// runs the close transaction and sends no audio after its close (issue 22: 187 frames went after one).
t.test('after a control rule ended the session, no audio goes to it, even from a writer still holding it', async t => {
  const v = await vendor(t, {
    onText: (ws, m) => m.event === 'start' && ws.send(JSON.stringify({ event: 'disconnect' }))
  })
  const c = connect(t, v.url, CONTROLLED)
  t.equal((await c.next()).what, 'ready')
  t.match(await c.next(), { what: 'lost', detail: { kind: 'ended' } }, 'the vendor ended it: lost')
  c.conn.writeAudio(new Uint8Array(160))
  t.same(await stopped(v), { event: 'stop', reason: 'disconnect' }, 'the close frame says the vendor ended it')
  c.conn.writeAudio(new Uint8Array(160))
  await flush(5)
  t.same(v.binary, [], 'nothing after the disconnect')
  t.equal(c.ctx.counters.dropAfterClose, 2, 'counted as after close')
})

t.test('a disconnect read after the gateway decided to close still makes the close frame say "disconnect"', async t => {
  const v = await vendor(t)
  const c = connect(t, v.url, CONTROLLED)
  t.equal((await c.next()).what, 'ready')
  // The control chain is busy: the vendor's message waits behind other work, and the gateway closes meanwhile.
  let release!: () => void
  c.ctx.chain.run(() => new Promise<void>(resolve => (release = resolve)))
  ;(await v.connected).send(JSON.stringify({ event: 'disconnect' }))
  while (c.ctx.counters.framesFromVendor === 0) await flush(1)
  c.conn.goodbye()
  release()
  t.same(await stopped(v), { event: 'stop', reason: 'disconnect' }, 'not "end": the vendor had disconnected')
})

t.test(
  'issue 19: a goodbye a frozen vendor never completes (its last ping unanswered) says what it had not read: the audio since its last pong',
  async t => {
    const { c, ws } = await readyConnection(t)
    for (let i = 0; i < 3; i++) c.conn.writeAudio(new Uint8Array(160))
    // The ping is due at 1 s; with nothing more written it goes alone one heartbeat tick (250 ms) later.
    c.clock.advance(1250)
    while (c.conn.lossReport().bytesSinceLife !== 0) await flush(1)
    t.pass('a pong: the vendor read the first 3 frames')
    // Frozen: the vendor reads nothing more (no audio, no ping, no close frame).
    ;(ws as unknown as { _socket: { pause: () => void } })._socket.pause()
    for (let i = 0; i < 5; i++) c.conn.writeAudio(new Uint8Array(160))
    c.clock.advance(1000)
    c.conn.goodbye()
    await flush()
    t.equal(c.conn.state, 'CLOSING')
    c.clock.advance(1000)
    // The missed pong ends it within the pong timeout; a few more ticks let the close reach the connection.
    for (let i = 0; i < 40 && c.unconfirmed.length === 0; i++) {
      c.clock.advance(250)
      await flush(1)
    }
    t.same(
      c.unconfirmed.map(l => l.bytesSinceLife),
      [5 * 160],
      'told once, with the 5 frames written since the last pong'
    )
  }
)

t.test('a due heartbeat ping rides with the next audio write (one TCP write), or goes alone a tick later', async t => {
  const { c, ws } = await readyConnection(t)
  const seen: string[] = []
  const chunks: Buffer[] = []
  ws.on('message', (_d, isBinary) => {
    if (isBinary) seen.push('audio')
  })
  ws.on('ping', () => seen.push('ping'))
  ;(ws as unknown as { _socket: { on: (e: 'data', f: (b: Buffer) => void) => void } })._socket.on('data', b =>
    chunks.push(b)
  )
  const until = async (n: number): Promise<void> => {
    for (let i = 0; i < 500 && seen.length < n; i++) await flush(1)
  }
  c.conn.writeAudio(new Uint8Array(160))
  await until(1)
  c.clock.advance(1000) // the ping is due at 1 s (ticks of 250 ms)
  await flush()
  t.same(seen, ['audio'], 'a due ping waits for the next write')
  chunks.length = 0
  c.conn.writeAudio(new Uint8Array(160))
  await until(3)
  t.same(seen, ['audio', 'audio', 'ping'], 'then goes right behind it')
  // A masked client frame of 160 bytes is 2 + 2 + 4 + 160 bytes; the ping (0x89) follows in the same write.
  t.ok(
    chunks.some(b => b[0] === 0x82 && b.length >= 174 && b[168] === 0x89),
    'the audio frame and the ping reached the vendor as one write'
  )
  for (let i = 0; i < 200 && c.conn.lossReport().bytesSinceLife !== 0; i++) await flush(1)
  t.equal(c.conn.lossReport().bytesSinceLife, 0, 'its pong confirmed that write too')
  c.clock.advance(1000) // due again, with nothing written since
  await flush()
  t.same(seen, ['audio', 'audio', 'ping'], 'not yet')
  c.clock.advance(250)
  await until(4)
  t.same(seen, ['audio', 'audio', 'ping', 'ping'], 'alone, one tick later')
})

t.test(
  'a frozen vendor is found once silent for ping + timeout, whether its ping rode with a later write or not',
  async t => {
    // Pings to a vendor silent 1 s, lost when silent 2 s (issue 32: counted from the last thing it sent, here
    // the ready): the clock's one heartbeat ticks every 250 ms from the ready.
    const { c, ws } = await readyConnection(t)
    // Frozen from the start: it reads nothing more, so no pong ever comes.
    ;(ws as unknown as { _socket: { pause: () => void } })._socket.pause()
    let lost = false
    void c.next().then(e => {
      lost = e.what === 'lost'
    })
    // Audio every 120 ms: the ping falls due on the tick at 1,000 ms and rides with the write at 1,080 ms.
    for (let at = 60; at <= 1980; at += 60) {
      c.clock.advance(60)
      if (at % 120 === 60) c.conn.writeAudio(new Uint8Array(960))
      await flush(2)
    }
    t.notOk(lost, 'not before the pong is due')
    // Silent 2 s on the tick at 2,000 ms: the ping that rode with a later write does not push it back.
    c.clock.advance(20)
    for (let i = 0; i < 300 && !lost; i++) await flush(1)
    t.ok(lost, 'the missed pong ended it on the tick at 2,000 ms')
  }
)

t.test(
  'a connection ended by the vendor (a control rule) is not told unconfirmed: its session was told it was lost',
  async t => {
    const { c, ws } = await readyConnection(t, SETTINGS)
    c.conn.writeAudio(new Uint8Array(160))
    ws.terminate()
    t.equal((await c.next()).what, 'lost')
    await flush()
    t.same(c.unconfirmed, [], "a loss while ready is the session's to count (recover), not unconfirmed")
  }
)

t.test(
  'issue 19: confirm answers after a pong to a ping sent then (pings on), at once without pings, and never from a frozen vendor',
  async t => {
    const { c } = await readyConnection(t)
    c.conn.writeAudio(new Uint8Array(160))
    let confirmed = 0
    c.conn.confirm(() => confirmed++)
    t.equal(confirmed, 0, 'not before the pong')
    for (let i = 0; i < 200 && confirmed === 0; i++) await flush(1)
    t.equal(confirmed, 1, 'the pong to the ping sent then')
    t.equal(c.conn.lossReport().bytesSinceLife, 0, 'which covered the frame written before it')

    const quiet = await vendor(t, { onText: STARTED })
    const q = connect(t, quiet.url, READY_ON_STARTED)
    t.equal((await q.next()).what, 'ready')
    let atOnce = 0
    q.conn.confirm(() => atOnce++)
    t.equal(atOnce, 1, 'no pings on this connection: confirmed at once')

    const frozen = await vendor(t, { onText: STARTED })
    const f = connect(t, frozen.url, READY_ON_STARTED, LIVE)
    t.equal((await f.next()).what, 'ready')
    const ws = await frozen.connected
    ;(ws as unknown as { _socket: { pause: () => void } })._socket.pause()
    let never = 0
    f.conn.confirm(() => never++)
    for (let i = 0; i < 40 && f.conn.state === 'READY'; i++) {
      f.clock.advance(250)
      await flush(1)
    }
    t.match(await f.next(), { what: 'lost', detail: { kind: 'closed', socket: { kind: 'missed-pong' } } })
    t.equal(never, 0, 'a frozen vendor never confirms: it is lost (its session recovers with the replay)')
  }
)
