import t from 'tap'
import { AUDIO_TOKEN, platformLeg, routeTo, startGateway, startVendor, until } from '../helpers/gateway'
import { refusedPorts } from '../helpers/process'
import { audioInit } from '../helpers/legs'

const init = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  ...audioInit(1001),
  ...over
})

t.test(
  'a valid init message is answered CONNECTED / COMMAND / BEGIN AUDIO STREAM once the vendor is ready',
  async t => {
    const vendor = await startVendor(t, { kind: 'json-events' })
    const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
    const leg = platformLeg(t, gw.url('/audio/demo'), init())
    const answer = await leg.answer
    t.equal(answer.command, 'CONNECTED')
    t.equal(answer.messageType, 'COMMAND')
    t.equal(answer.message, 'BEGIN AUDIO STREAM')
    t.type(answer.parameters, 'object')
    const s = vendor.sessions()
    t.equal(s.length, 1, 'one vendor session')
    t.equal(s[0].ready, true)
    t.match(s[0].open, {
      event: 'start',
      start: {
        contactId: 1001,
        busNo: 4594,
        track: 'inbound',
        mediaFormat: { encoding: 'audio/x-mulaw', sampleRate: 8000, channels: 1 }
      }
    })
  }
)

t.test('numeric and MX perspectives are accepted and normalized', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const cases = [
    [0, 'inbound'],
    [1, 'outbound'],
    [2, 'both'],
    ['MX', 'both'],
    ['1', 'outbound']
  ] as const
  for (const [p] of cases) {
    const leg = platformLeg(t, gw.url('/audio/demo'), init({ streamPerspective: p }))
    t.equal((await leg.answer).command, 'CONNECTED', `perspective ${JSON.stringify(p)}`)
    leg.ws.close(1000)
    await leg.closed
  }
  t.same(
    vendor.sessions().map(s => (s.open as { start: { track: string } }).start.track),
    cases.map(([, track]) => track)
  )
})

t.test('a missing token is refused with ERROR and close 1008', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const body = init()
  delete body.authenticationToken
  const leg = platformLeg(t, gw.url('/audio/demo'), body)
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR')
  t.equal(answer.messageType, 'AUTH_MISSING')
  t.equal((await leg.closed).code, 1008)
  t.equal(vendor.sessions().length, 0, 'no vendor session was opened')
})

t.test('a wrong token is refused with ERROR and close 1008, and never echoed or logged', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const wrong = 'wrong-token-9f8e7d6c5b4a'
  const leg = platformLeg(t, gw.url('/audio/demo'), init({ authenticationToken: wrong }))
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR')
  t.equal(answer.messageType, 'AUTH_INVALID')
  t.equal((await leg.closed).code, 1008)
  t.notMatch(JSON.stringify(answer), wrong, 'the answer does not echo the token')
  t.ok(
    await until(() => gw.logs.lines.some(l => l.event === 'leg_failed' && l.code === 'AUTH_INVALID')),
    'the refusal is logged'
  )
  t.notMatch(gw.logs.raw, wrong, 'no log line holds the presented token')
  t.notMatch(gw.logs.raw, AUDIO_TOKEN, 'no log line holds the configured token')
})

t.test('broken JSON is refused with ERROR MESSAGE_NOT_JSON and close 1007', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const leg = platformLeg(t, gw.url('/audio/demo'), '{"executionInfo": {', { raw: true })
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR')
  t.equal(answer.messageType, 'MESSAGE_NOT_JSON')
  t.equal((await leg.closed).code, 1007)
})

t.test('a schema violation names the bad fields by JSON pointer, never their values', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const body = init({ streamPerspective: 'SIDEWAYS-perspective-value' })
  ;(body.executionInfo as Record<string, unknown>).contactId = 'not-a-number-value'
  delete (body.executionInfo as Record<string, unknown>).busNo
  const leg = platformLeg(t, gw.url('/audio/demo'), body)
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR')
  t.equal(answer.messageType, 'MESSAGE_INVALID')
  const params = answer.parameters as { pointers: string[] }
  t.same(params.pointers.slice().sort(), ['/executionInfo/busNo', '/executionInfo/contactId', '/streamPerspective'])
  t.notMatch(JSON.stringify(answer), 'not-a-number-value')
  t.notMatch(JSON.stringify(answer), 'SIDEWAYS-perspective-value')
  t.equal((await leg.closed).code, 1007)
})

t.test('a binary first frame is refused with close 1007', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const { default: WebSocket } = await import('ws')
  const ws = new WebSocket(gw.url('/audio/demo'))
  const texts: string[] = []
  ws.on('message', d => texts.push(d.toString()))
  ws.on('open', () => ws.send(Buffer.alloc(160, 0xff)))
  const code = await new Promise<number>(resolve => ws.on('close', c => resolve(c)))
  t.equal(code, 1007)
  t.equal(JSON.parse(texts[0]).messageType, 'FIRST_FRAME_NOT_TEXT')
})

t.test('a route whose upstream is unreachable is answered ERROR and close 1013', async t => {
  const [port] = await refusedPorts(1)
  const gw = await startGateway(t, {
    routes: {
      dead: {
        mapping: 'mappings/json-events.yaml',
        auth: { audio: ['${AUDIO_TOKEN}'] },
        upstreams: [
          { name: 'a', audio: `ws://127.0.0.1:${port}/stream` },
          { name: 'b', audio: `ws://127.0.0.1:${port}/other` }
        ]
      }
    }
  })
  const leg = platformLeg(t, gw.url('/audio/dead'), init())
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR')
  t.equal(answer.messageType, 'UPSTREAM_UNREACHABLE')
  t.equal((await leg.closed).code, 1013)
})

t.test('an unknown route is refused before the upgrade with 404', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const { default: WebSocket } = await import('ws')
  const ws = new WebSocket(gw.url('/audio/nope'))
  const status = await new Promise<number>(resolve => {
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0)
      ws.terminate()
    })
    ws.on('error', () => {})
  })
  t.equal(status, 404)
})

t.test('a vendor that refuses the session gives ERROR UPSTREAM_REFUSED with its reason', async t => {
  const vendor = await startVendor(t, { kind: 'passthrough', token: 'vendor-key-abcdef' })
  const gw = await startGateway(t, { routes: { pt: routeTo([vendor], 'mappings/passthrough.yaml') } })
  const leg = platformLeg(t, gw.url('/audio/pt'), init())
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR')
  t.equal(answer.messageType, 'UPSTREAM_REFUSED')
  t.equal((await leg.closed).code, 1011)
})

t.test('no init message within the handshake timeout closes the leg with 1008', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, {
    audio: { handshakeTimeoutSeconds: 0.3 },
    routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
  })
  const { default: WebSocket } = await import('ws')
  const ws = new WebSocket(gw.url('/audio/demo'))
  const texts: string[] = []
  ws.on('message', d => texts.push(d.toString()))
  const code = await new Promise<number>(resolve => ws.on('close', c => resolve(c)))
  t.equal(code, 1008)
  t.equal(JSON.parse(texts[0]).messageType, 'HANDSHAKE_TIMEOUT')
})
