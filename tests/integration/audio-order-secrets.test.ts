import t from 'tap'
import { EARLY_RESULTS_MAX } from '../../gateway/audio/leg/early-results'
import type { VendorEmulator } from '../../gateway/tools/vendor-emulator'
import { AUDIO_TOKEN, TEXT_TOKEN, platformLeg, startGateway, startVendor, until } from '../helpers/gateway'
import { audioInit } from '../helpers/legs'

// Issue 9, item 5: no MESSAGE before CONNECTED; no configured secret in anything sent to the platform.

const init = (): Record<string, unknown> => audioInit(1001)

// Upstream credential and header values, as a careless vendor would reflect them. One holds characters
// JSON escapes, so the scrub must also find its escaped form and keep the frame valid JSON.
const VENDOR_KEY = 'vendor-key-9f8e7d6c5b4a'
const HEADER_SECRET = 'hdr"secret\\with/quote-42'
const SECRETS = [VENDOR_KEY, HEADER_SECRET, AUDIO_TOKEN]
const ENV = { VENDOR_KEY, HEADER_SECRET }

function secretRoute(vendor: VendorEmulator, mapping: string, auth = true): Record<string, unknown> {
  return {
    mapping,
    ...(auth ? { auth: { audio: ['${AUDIO_TOKEN}'], text: ['${TEXT_TOKEN}'] } } : {}),
    upstreams: [
      {
        name: 'r0',
        audio: vendor.url,
        text: vendor.httpUrl,
        credential: '${VENDOR_KEY}',
        headers: { 'x-tenant-secret': '${HEADER_SECRET}' }
      }
    ]
  }
}

/** Every text frame the platform receives, exactly as it came off the wire. */
function rawFrames(ws: import('ws').WebSocket): string[] {
  const out: string[] = []
  ws.on('message', (data, isBinary) => {
    if (!isBinary) out.push(data.toString())
  })
  return out
}

const esc = (s: string): string => JSON.stringify(s).slice(1, -1)

/** Every secret, as written and JSON-escaped once and twice, found in `text`. */
function leaks(text: string): string[] {
  return SECRETS.flatMap(s => [s, esc(s), esc(esc(s))]).filter(s => text.includes(s))
}

t.test('results a vendor sends before it says ready reach the platform after CONNECTED, in order', async t => {
  const vendor = await startVendor(t, { kind: 'json-events', earlyResults: 3, readyDelayMs: 300 })
  const gw = await startGateway(
    t,
    {
      routes: { demo: secretRoute(vendor, 'mappings/json-events.yaml') }
    },
    ENV
  )
  const leg = platformLeg(t, gw.url('/audio/demo'), init())
  const answer = await leg.answer
  t.equal(answer.command, 'CONNECTED', 'the first frame is CONNECTED')
  t.ok(await until(() => leg.messages.length >= 3), 'the early results arrive')
  t.same(
    leg.messages.slice(0, 3).map(m => [m.command, m.message]),
    [
      ['MESSAGE', 'early 1'],
      ['MESSAGE', 'early 2'],
      ['MESSAGE', 'early 3']
    ],
    'held results follow CONNECTED in the order the vendor sent them'
  )
  t.equal(vendor.sessions()[0].ready, true)
})

t.test('early results past the hold bound are dropped and counted, never sent before CONNECTED', async t => {
  const extra = 10
  const vendor = await startVendor(t, {
    kind: 'json-events',
    earlyResults: EARLY_RESULTS_MAX + extra,
    readyDelayMs: 300
  })
  const gw = await startGateway(t, { routes: { demo: secretRoute(vendor, 'mappings/json-events.yaml') } }, ENV)
  const leg = platformLeg(t, gw.url('/audio/demo'), init())
  t.equal((await leg.answer).command, 'CONNECTED')
  t.ok(await until(() => leg.messages.length >= EARLY_RESULTS_MAX))
  const metricLine =
    /assist_gateway_audio_vendor_messages_total\{route="demo",result="dropped_before_connected"\} (\d+)/
  let dropped = 0
  t.ok(
    await until(async () => {
      const m = metricLine.exec(await (await fetch(gw.adminUrl('/metrics'))).text())
      dropped = m === null ? 0 : Number(m[1])
      return dropped === extra
    }),
    'the overflow is counted as dropped_before_connected'
  )
  t.equal(dropped, extra)
  t.same(
    leg.messages.slice(0, EARLY_RESULTS_MAX).map(m => m.message),
    Array.from({ length: EARLY_RESULTS_MAX }, (_, i) => `early ${i + 1}`),
    'the first results are kept, in order'
  )
  t.notOk(
    leg.messages.some(m => m.message === `early ${EARLY_RESULTS_MAX + 1}`),
    'the overflow never arrives'
  )
})

t.test(
  'a json-events vendor echoing its upgrade headers and start event carries no secret to the platform',
  async t => {
    const vendor = await startVendor(t, { kind: 'json-events', echo: true, earlyResults: 1, readyDelayMs: 100 })
    const gw = await startGateway(t, { routes: { demo: secretRoute(vendor, 'mappings/json-events.yaml') } }, ENV)
    const leg = platformLeg(t, gw.url('/audio/demo'), init())
    const raw = rawFrames(leg.ws)
    t.equal((await leg.answer).command, 'CONNECTED')
    t.ok(await until(() => leg.messages.some(m => String(m.message).includes('upgrade'))), 'the echo arrived')
    const echo = leg.messages.find(m => String(m.message).includes('upgrade'))!
    const echoed = JSON.parse(String(echo.message)) as { upgrade: { headers: Record<string, string> } }
    t.equal(echoed.upgrade.headers['x-tenant-secret'], '[REDACTED]', 'the secret header was echoed, scrubbed')
    t.same(leaks(raw.join('\n')), [], 'no frame holds a secret in any form')
    for (const f of raw) t.doesNotThrow(() => JSON.parse(f), 'every frame is still JSON')
  }
)

t.test(
  "a passthrough vendor echoing the init message: its own secrets scrubbed, the caller's own words as sent",
  async t => {
    // `pass` checks no token: the platform's token is meant for the vendor and forwarded, so the vendor sees
    // it; `other` lists the same value in auth.audio. Another route's secret is not this route's to scrub, and
    // the caller sent it itself: it comes back as sent, so the answer confirms nothing (issue 18 item 5).
    const vendor = await startVendor(t, { kind: 'passthrough', echo: true })
    const gw = await startGateway(
      t,
      {
        routes: {
          pass: {
            mapping: 'mappings/passthrough.yaml',
            auth: { text: ['${TEXT_TOKEN}'] },
            upstreams: [{ name: 'r0', audio: vendor.url, headers: { 'x-tenant-secret': '${HEADER_SECRET}' } }]
          },
          other: secretRoute(vendor, 'mappings/passthrough.yaml')
        }
      },
      ENV
    )
    const leg = platformLeg(t, gw.url('/audio/pass'), init())
    const raw = rawFrames(leg.ws)
    const answer = await leg.answer
    t.equal(answer.command, 'CONNECTED')
    const params = answer.parameters as Record<string, string>
    t.match(params.echo, /\[REDACTED\]/, "the route's own header secret in the CONNECTED echo was scrubbed")
    t.ok(await until(() => leg.messages.length >= 1), 'the echo MESSAGE arrived')
    const all = raw.join('\n')
    t.same(
      leaks(all).filter(l => !l.includes(AUDIO_TOKEN)),
      [],
      "no secret of the route's vendors in CONNECTED or MESSAGE frames"
    )
    t.ok(
      all.includes(AUDIO_TOKEN),
      "the caller's own token comes back as it sent it: never as a [REDACTED] confirmation"
    )
  }
)

t.test('a vendor refusal echoing the credential reaches the platform as ERROR without it', async t => {
  const vendor = await startVendor(t, { kind: 'passthrough', echo: true, token: 'another-token-the-vendor-wants' })
  const gw = await startGateway(t, { routes: { demo: secretRoute(vendor, 'mappings/passthrough.yaml') } }, ENV)
  const leg = platformLeg(t, gw.url('/audio/demo'), init())
  const raw = rawFrames(leg.ws)
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR')
  t.equal(answer.messageType, 'UPSTREAM_REFUSED')
  t.match(String((answer.parameters as Record<string, unknown>).vendorMessage), /invalid token in .*\[REDACTED\]/)
  t.equal((await leg.closed).code, 1011)
  t.same(leaks(raw.join('\n')), [], 'no secret in the ERROR frame')
})

t.test(
  "a text vendor echoing the caller's own words: as sent, even where they equal a secret (no confirmation)",
  async t => {
    const vendor = await startVendor(t, { kind: 'passthrough' })
    const gw = await startGateway(t, { routes: { demo: secretRoute(vendor, 'mappings/passthrough.yaml') } }, ENV)
    /** The caller's utterance `messageBody` on route demo. */
    const say = async (messageBody: string): Promise<Response> =>
      await fetch(gw.url('/text/demo'), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          authorizationHeader: TEXT_TOKEN,
          contactId: 1001,
          busNo: 4594,
          tenantId: 't1',
          participantId: 'patron',
          messageBody
        })
      })
    const res = await say(`my key is ${VENDOR_KEY} and ${HEADER_SECRET}`)
    const text = await res.text()
    t.equal(res.status, 200)
    t.match(JSON.parse(text), { message: `echo: my key is ${VENDOR_KEY} and ${HEADER_SECRET}` })
    const guess = await say('my key is vendor-key-0000000000')
    t.match(await guess.json(), { message: 'echo: my key is vendor-key-0000000000' }, 'a wrong guess comes back alike')
  }
)
