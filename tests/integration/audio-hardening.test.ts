import t from 'tap'
import WebSocket from 'ws'
import { OVERSIZE_READ_FACTOR } from '../../gateway/server/audio-route'
import { platformLeg, routeTo, startGateway, startVendor, until } from '../helpers/gateway'
import { audioInit } from '../helpers/legs'

// Issue 9, item 6: the init message's nesting limit, exact ids, frames over the size limit, invalid UTF-8.

const LIMIT = 4096
const init = (over: Record<string, unknown> = {}): Record<string, unknown> => ({
  ...audioInit(1001),
  ...over
})

async function setup(t: Parameters<typeof startVendor>[0], limit = LIMIT) {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, {
    uws: { maxPayloadBytes: limit },
    routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
  })
  return { vendor, gw }
}

async function metric(gw: { adminUrl: (p: string) => string }, re: RegExp): Promise<number> {
  const m = re.exec(await (await fetch(gw.adminUrl('/metrics'))).text())
  return m === null ? 0 : Number(m[1])
}

t.test('a 10,000-deep appParams answers ERROR MESSAGE_INVALID naming the pointer, close 1007', async t => {
  const { vendor, gw } = await setup(t, 256 * 1024)
  const depth = 10_000
  const deep = `${'{"a":'.repeat(depth)}{}${'}'.repeat(depth)}`
  const text = JSON.stringify(init({ appParams: '@@' })).replace('"@@"', deep)
  const leg = platformLeg(t, gw.url('/audio/demo'), text, { raw: true })
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR')
  t.equal(answer.messageType, 'MESSAGE_INVALID')
  const params = answer.parameters as { pointers: string[]; problems: { message: string }[] }
  t.equal(params.pointers.length, 1)
  t.equal(params.pointers[0], `/appParams${'/a'.repeat(63)}`, 'the first value past 64 levels')
  t.match(params.problems[0].message, /deeper than 64/)
  t.equal((await leg.closed).code, 1007)
  t.equal(vendor.sessions().length, 0, 'no vendor session')
})

t.test('ids above 2^53-1 are refused with the pointer; 2^53-1 itself reaches the vendor exact', async t => {
  const { vendor, gw } = await setup(t)
  const cases: [string, string][] = [
    [
      'a 16-digit string contactId',
      JSON.stringify(init({ executionInfo: { contactId: '9999999999999999', busNo: 4594 } }))
    ],
    [
      'a 16-digit number contactId',
      JSON.stringify(init({ executionInfo: { contactId: 7, busNo: 4594 } })).replace(':7,', ':9007199254740993,')
    ],
    [
      'a 19-digit string requestId',
      JSON.stringify(init({ executionInfo: { contactId: 1, busNo: 2, requestId: '1234567890123456789' } }))
    ]
  ]
  for (const [name, text] of cases) {
    const leg = platformLeg(t, gw.url('/audio/demo'), text, { raw: true })
    const answer = await leg.answer
    t.equal(answer.messageType, 'MESSAGE_INVALID', name)
    const params = answer.parameters as { pointers: string[]; problems: { pointer: string; message: string }[] }
    const pointer = name.includes('requestId') ? '/executionInfo/requestId' : '/executionInfo/contactId'
    t.same(params.pointers, [pointer], `${name}: the pointer`)
    t.match(params.problems[0].message, /9007199254740991/, `${name}: the reason`)
    t.equal((await leg.closed).code, 1007)
  }
  t.equal(vendor.sessions().length, 0, 'no vendor session for any of them')
  for (const contactId of [9007199254740991, '9007199254740991']) {
    const leg = platformLeg(t, gw.url('/audio/demo'), init({ executionInfo: { contactId, busNo: 4594 } }))
    t.equal((await leg.answer).command, 'CONNECTED', `contactId ${JSON.stringify(contactId)}`)
    leg.ws.close(1000)
    await leg.closed
  }
  t.same(
    vendor.sessions().map(s => (s.open as { start: { contactId: number } }).start.contactId),
    [9007199254740991, 9007199254740991],
    'the vendor got the exact digits'
  )
})

t.test('an audio frame over uws.maxPayloadBytes answers ERROR MESSAGE_TOO_LARGE and close 1009', async t => {
  const { gw } = await setup(t)
  const leg = platformLeg(t, gw.url('/audio/demo'), init())
  t.equal((await leg.answer).command, 'CONNECTED')
  leg.send(Buffer.alloc(160, 0xff))
  leg.send(Buffer.alloc(LIMIT + 1, 0xff))
  t.ok(await until(() => leg.messages.some(m => m.command === 'ERROR')), 'an ERROR frame arrived')
  const error = leg.messages.find(m => m.command === 'ERROR')!
  t.equal(error.messageType, 'MESSAGE_TOO_LARGE')
  t.equal((await leg.closed).code, 1009)
  t.ok(
    await until(
      async () => (await metric(gw, /audio_sessions_total\{route="demo",outcome="message_too_large"\} (\d+)/)) === 1
    ),
    'counted as message_too_large, not abandoned'
  )
})

t.test('an init message over uws.maxPayloadBytes answers ERROR MESSAGE_TOO_LARGE and close 1009', async t => {
  const { vendor, gw } = await setup(t)
  const leg = platformLeg(t, gw.url('/audio/demo'), init({ appParams: { pad: 'x'.repeat(LIMIT) } }))
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR')
  t.equal(answer.messageType, 'MESSAGE_TOO_LARGE')
  t.equal((await leg.closed).code, 1009)
  t.equal(vendor.sessions().length, 0)
})

t.test('past the read ceiling and for invalid UTF-8, uWS cuts the socket: counted by cause, not abandoned', async t => {
  const { gw } = await setup(t)
  const big = platformLeg(t, gw.url('/audio/demo'), init())
  t.equal((await big.answer).command, 'CONNECTED')
  big.send(Buffer.alloc(LIMIT * OVERSIZE_READ_FACTOR + 1, 0xff))
  t.equal((await big.closed).code, 1006, 'uWS sends no close frame past its read limit')

  // The init message itself, as a text frame that is not UTF-8.
  const bad = new WebSocket(gw.url('/audio/demo'), { perMessageDeflate: false })
  t.teardown(() => bad.terminate())
  bad.on('error', () => {})
  const frames: string[] = []
  bad.on('message', data => frames.push(data.toString()))
  const closed = new Promise<number>(resolve => bad.on('close', code => resolve(code)))
  bad.on('open', () => bad.send(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]), { binary: false }))
  t.equal(await closed, 1006, 'uWS validates UTF-8 before the gateway sees the frame')
  t.same(frames, [], 'and no frame can be sent')

  for (const outcome of ['too_large_cut', 'invalid_utf8'])
    t.ok(
      await until(
        async () =>
          (await metric(gw, new RegExp(`audio_sessions_total\\{route="demo",outcome="${outcome}"\\} (\\d+)`))) === 1
      ),
      `counted as ${outcome}`
    )
  t.equal(await metric(gw, /audio_sessions_total\{route="demo",outcome="abandoned"\} (\d+)/), 0, 'nothing abandoned')
})
