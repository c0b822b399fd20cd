import t from 'tap'
import { connect as tlsConnect } from 'node:tls'
import { request } from 'undici'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, TEXT_TOKEN, platformLeg, routeTo, startGateway, startVendor, until } from '../helpers/gateway'
import { holdingGate } from '../helpers/gate'
import { post, startTlsGateway, utterance, type Answer } from '../helpers/tls'
import { refusedPorts } from '../helpers/process'

const VENDOR_KEY = 'vendor-key-0a1b2c3d4e5f'

function pointersOf(a: Answer): string[] {
  return ((a.json?.invalidParams ?? []) as { pointer: string }[]).map(p => p.pointer).sort()
}

t.test('json-events over HTTPS: the vendor gets its own REST shape, the platform the unwrapped answer', async t => {
  const vendor = await startVendor(t, { kind: 'json-events', text: { token: VENDOR_KEY } })
  const route = routeTo([vendor], 'mappings/json-events.yaml', { default: true })
  ;(route.upstreams as Record<string, unknown>[])[0].credential = '${VENDOR_KEY}'
  const gw = await startTlsGateway(t, { routes: { demo: route } }, { VENDOR_KEY })

  const a = await post(gw.agent, gw.url('/text/demo'), utterance({ authorizationHeader: TEXT_TOKEN }))
  t.equal(a.status, 200)
  t.equal(a.headers['content-type'], 'application/json')
  t.same(a.json, {
    contactId: 584930211,
    participantId: 'patron',
    reply: 'echo: I was charged twice.',
    suggestions: [{ type: 'reply', text: 'echo: I was charged twice.', confidence: 0.9 }]
  })
  const [got] = vendor.textRequests()
  t.equal(got.path, '/v1/conversations/584930211/messages', 'the contact id went into the path')
  t.same(
    got.body,
    {
      conversationId: '584930211',
      businessUnit: 4594,
      tenant: 'tenant-eu-1',
      role: 'customer',
      text: 'I was charged twice.',
      attachments: { channel: 'chat' },
      config: { language: 'en-US' }
    },
    'fields renamed, patron became customer'
  )
  t.equal(got.headers.authorization, '[REDACTED]', 'the vendor credential was sent (the emulator checks it)')
  t.equal(got.headers['x-request-id'], a.headers['x-request-id'], 'the request id reaches the vendor')
  t.equal(got.status, 200)

  // The interface's default path, an Authorization header in bearer form, and the 2.8 field name.
  const b = await post(
    gw.agent,
    gw.url('/agent_assist_text_webhooks/utterance'),
    utterance({
      participantId: 'agent',
      messageData: undefined,
      messageMetaData: { image: 'https://x/y.png' },
      agentAssistAppConfig: { kb: 'billing', tone: 'formal' }
    }),
    { authorization: `Bearer ${TEXT_TOKEN}`, 'content-type': 'application/json; charset=utf-8' }
  )
  t.equal(b.status, 200)
  t.match(b.json, { participantId: 'agent' })
  t.match(
    vendor.textRequests()[1].body,
    { role: 'agent', attachments: { image: 'https://x/y.png' }, config: { kb: 'billing', tone: 'formal' } },
    'messageMetaData and agentAssistAppConfig reach the mapping'
  )

  // The raw configured value as the Authorization header is accepted too.
  t.equal(
    (await post(gw.agent, gw.url('/text/demo'), utterance({ participantId: 'system' }), { authorization: TEXT_TOKEN }))
      .status,
    200
  )
  t.equal(vendor.textRequests()[2].body && (vendor.textRequests()[2].body as { role: string }).role, 'system')

  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(metrics, 'assist_gateway_text_requests_total{route="demo",code="200"} 3')
  t.match(metrics, 'assist_gateway_upstream_requests_total{route="demo",upstream="r0",result="ok"} 3')
  t.match(metrics, /assist_gateway_text_request_duration_seconds_count\{route="demo"\} 3/)
  t.match(metrics, /assist_gateway_upstream_request_duration_seconds_count\{route="demo",upstream="r0"\} 3/)
  for (const secret of [TEXT_TOKEN, VENDOR_KEY]) {
    t.notMatch(a.text + b.text, secret, 'no answer holds a credential')
    t.notMatch(gw.logs.raw, secret, 'no log line holds a credential')
  }
})

t.test(
  'passthrough: the platform JSON goes unchanged, with the authorizationHeader rule of the audio token',
  async t => {
    const vendor = await startVendor(t, { kind: 'passthrough' })
    const checked = routeTo([vendor], 'mappings/passthrough.yaml')
    const withKey = {
      ...routeTo([vendor], 'mappings/passthrough.yaml'),
      upstreams: [{ name: 'k', text: `${vendor.httpUrl}/assist`, credential: '${VENDOR_KEY}' }]
    }
    const open = { mapping: 'mappings/passthrough.yaml', upstreams: [{ name: 'o', text: vendor.httpUrl }] }
    const gw = await startTlsGateway(t, { routes: { checked, withKey, open } }, { VENDOR_KEY })

    const sent = utterance({ authorizationHeader: TEXT_TOKEN, extra: { kept: true } })
    const a = await post(gw.agent, gw.url('/text/checked'), sent)
    t.equal(a.status, 200)
    t.same(
      a.json,
      {
        command: 'MESSAGE',
        messageType: 'SUGGESTION',
        message: 'echo: I was charged twice.',
        parameters: { contactId: 584930211, participantId: 'patron', seq: 1 }
      },
      'the vendor answer, unchanged'
    )
    const { authorizationHeader: _gone, ...rest } = sent
    t.same(vendor.textRequests()[0].body, rest, 'forwarded unchanged, without the credential meant for the gateway')
    t.equal(vendor.textRequests()[0].path, '/')

    t.equal((await post(gw.agent, gw.url('/text/withKey'), sent)).status, 200)
    t.equal(vendor.textRequests()[1].path, '/assist', 'the replica URL path is used as it is')
    t.equal(
      (vendor.textRequests()[1].body as Record<string, unknown>).authorizationHeader,
      '[REDACTED]',
      'the replica credential replaced it (the emulator redacts what it records)'
    )

    const opened = utterance({ authorizationHeader: 'meant-for-the-vendor' })
    t.equal(
      (await post(gw.agent, gw.url('/text/open'), opened)).status,
      200,
      'a route without auth.text accepts any caller'
    )
    t.equal(
      (vendor.textRequests()[2].body as Record<string, unknown>).authorizationHeader,
      '[REDACTED]',
      'and forwards the header (it was meant for the vendor)'
    )
    t.notMatch(gw.logs.raw, VENDOR_KEY)
    t.notMatch(gw.logs.raw, TEXT_TOKEN)
  }
)

t.test('400 names every invalid field by JSON pointer; not JSON and not an object are 400 too', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startTlsGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const auth = { authorization: `Bearer ${TEXT_TOKEN}` }
  const bad = utterance({
    contactId: 'not-a-number',
    participantId: 'customer',
    tenantId: undefined,
    messageBody: 42,
    messageData: 'links',
    agentAssistAppConfig: [1]
  })
  const a = await post(gw.agent, gw.url('/text/demo'), bad, auth)
  t.equal(a.status, 400)
  t.equal(a.headers['content-type'], 'application/problem+json')
  t.equal(a.json.code, 'MESSAGE_INVALID')
  t.same(pointersOf(a), [
    '/agentAssistAppConfig',
    '/contactId',
    '/messageBody',
    '/messageData',
    '/participantId',
    '/tenantId'
  ])
  t.same([...a.json.pointers].sort(), pointersOf(a))
  t.notMatch(a.text, 'not-a-number', 'values are never echoed')

  const meta = await post(
    gw.agent,
    gw.url('/text/demo'),
    utterance({ messageData: undefined, messageMetaData: 7 }),
    auth
  )
  t.same(pointersOf(meta), ['/messageMetaData'], 'a 2.8 body is checked against AgentAssistUtterance_V1')

  const notJson = await post(gw.agent, gw.url('/text/demo'), '{"contactId": 1,', auth)
  t.equal(notJson.status, 400)
  t.equal(notJson.json.code, 'MESSAGE_NOT_JSON')
  const notObject = await post(gw.agent, gw.url('/text/demo'), '[1,2]', auth)
  t.equal(notObject.status, 400)
  t.same(notObject.json.pointers, ['/'])
  t.equal(vendor.textRequests().length, 0, 'nothing invalid reached the vendor')
  t.match(
    await (await fetch(gw.adminUrl('/metrics'))).text(),
    'assist_gateway_validation_failures_total{hook="text"} 4'
  )
})

t.test("401: missing or wrong credentials, and each hook refuses the other hook's credential", async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startTlsGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const missing = await post(gw.agent, gw.url('/text/demo'), utterance())
  t.equal(missing.status, 401)
  t.equal(missing.json.code, 'AUTH_MISSING')
  const wrong = await post(gw.agent, gw.url('/text/demo'), utterance({ authorizationHeader: 'wrong-wrong-wrong' }))
  t.equal(wrong.status, 401)
  t.equal(wrong.json.code, 'AUTH_INVALID')
  const audioOnText = await post(gw.agent, gw.url('/text/demo'), utterance({ authorizationHeader: AUDIO_TOKEN }))
  t.equal(audioOnText.status, 401, 'the audio credential is refused on the text hook')
  t.equal(audioOnText.json.code, 'AUTH_INVALID')
  const audioHeader = await post(gw.agent, gw.url('/text/demo'), utterance(), {
    authorization: `Bearer ${AUDIO_TOKEN}`
  })
  t.equal(audioHeader.status, 401, 'also as a bearer header')
  const invalidBody = await post(gw.agent, gw.url('/text/demo'), utterance({ contactId: 'x' }))
  t.equal(
    invalidBody.status,
    401,
    'credentials are checked before the schema: an unauthenticated caller learns nothing of the format'
  )

  const leg = platformLeg(
    t,
    gw.url('/audio/demo'),
    initMessage({ token: TEXT_TOKEN, contactId: 1, busNo: 2, perspective: 'TX' })
  )
  const answer = await leg.answer
  t.equal(answer.command, 'ERROR', 'the text credential is refused on the audio hook')
  t.equal(answer.messageType, 'AUTH_INVALID')
  t.equal(vendor.textRequests().length, 0)
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(metrics, 'assist_gateway_auth_failures_total{hook="text",reason="invalid"} 3')
  t.match(metrics, 'assist_gateway_auth_failures_total{hook="text",reason="missing"} 2')
  for (const s of [TEXT_TOKEN, AUDIO_TOKEN, 'wrong-wrong-wrong']) t.notMatch(gw.logs.raw, s)
})

t.test('404, 405, 413 and 415 come from the front door, before the body is read', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startTlsGateway(
    t,
    {
      text: { maxBodyBytes: 1024 },
      routes: { demo: routeTo([vendor], 'mappings/json-events.yaml'), noText: routeTo([vendor], './audio-only.yaml') }
    },
    {},
    { files: { 'audio-only.yaml': 'vendor: audio-only\naudio: { time: { none: a test vendor with no results } }\n' } }
  )
  const auth = { authorization: TEXT_TOKEN }
  const nf = await post(gw.agent, gw.url('/text/nope'), utterance(), auth)
  t.equal(nf.status, 404)
  t.equal(nf.json.code, 'ROUTE_NOT_FOUND')
  t.equal(
    (await post(gw.agent, gw.url('/text/noText'), utterance(), auth)).status,
    404,
    'a route whose mapping has no text section'
  )
  t.equal(
    (await post(gw.agent, gw.url('/agent_assist_text_webhooks/utterance'), utterance(), auth)).status,
    404,
    'no route is marked default'
  )

  for (const [method, path] of [
    ['GET', '/text/demo'],
    ['PUT', '/text/demo'],
    ['DELETE', '/agent_assist_text_webhooks/utterance']
  ]) {
    const r = await request(gw.url(path), { method, dispatcher: gw.agent })
    const body = (await r.body.json()) as { code: string }
    t.equal(r.statusCode, path === '/text/demo' ? 405 : 404, `${method} ${path}`)
    if (r.statusCode === 405) {
      t.equal(body.code, 'METHOD_NOT_ALLOWED')
      t.equal(r.headers.allow, 'POST')
    }
  }

  const big = JSON.stringify(utterance({ messageBody: 'x'.repeat(2000) }))
  const tooLarge = await post(gw.agent, gw.url('/text/demo'), big, auth)
  t.equal(tooLarge.status, 413)
  t.equal(tooLarge.json.code, 'MESSAGE_TOO_LARGE')
  t.equal(tooLarge.headers.connection, 'close', 'the connection is closed so the client stops sending')

  // No content-length (chunked): the limit holds while reading.
  const chunked = await new Promise<string>((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port: gw.port, ca: gw.ca, servername: 'localhost' }, () => {
      s.write(
        `POST /text/demo HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\nauthorization: ${TEXT_TOKEN}\r\ntransfer-encoding: chunked\r\n\r\n`
      )
      for (let i = 0; i < 4; i++) s.write(`400\r\n${'x'.repeat(1024)}\r\n`)
    })
    let got = ''
    s.on('data', d => {
      got += String(d)
      if (/\r\n\r\n[\s\S]*\}$/.test(got)) {
        s.destroy()
        resolve(got)
      }
    })
    s.on('error', () => resolve(got))
    s.on('close', () => resolve(got))
    // Only names a hang (the answer comes as soon as the gateway reads past the limit): generous on purpose.
    setTimeout(() => reject(new Error('no answer to a chunked body over the limit within 30 s')), 30_000).unref()
  })
  t.match(chunked, /^HTTP\/1\.1 413 /)
  t.match(chunked, /\r\nconnection: close\r\n/i)

  const plain = await post(gw.agent, gw.url('/text/demo'), JSON.stringify(utterance()), {
    ...auth,
    'content-type': 'text/plain'
  })
  t.equal(plain.status, 415)
  t.equal(plain.json.code, 'UNSUPPORTED_MEDIA_TYPE')
  const none = await request(gw.url('/text/demo'), {
    method: 'POST',
    dispatcher: gw.agent,
    body: JSON.stringify(utterance()),
    headers: auth
  })
  t.equal(none.statusCode, 415, 'no content type at all')
  await none.body.dump()
  t.equal(vendor.textRequests().length, 0)

  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(
    metrics,
    'assist_gateway_text_requests_total{route="",code="404"} 3',
    'an unknown route is counted without its name'
  )
  t.match(metrics, 'assist_gateway_text_requests_total{route="demo",code="413"} 2')
})

t.test(
  '502 on a bad vendor answer, 503 when no replica can be reached, one other replica tried on connect failure',
  async t => {
    const failing = await startVendor(t, { kind: 'json-events', text: { status: 500 } })
    const good = await startVendor(t, { kind: 'json-events' })
    const [dead, dead2] = await refusedPorts(2)
    const gw = await startTlsGateway(t, {
      routes: {
        failing: routeTo([failing], 'mappings/json-events.yaml'),
        failover: {
          ...routeTo([good], 'mappings/json-events.yaml'),
          upstreams: [
            { name: 'dead', text: `http://127.0.0.1:${dead}` },
            { name: 'good', text: good.httpUrl }
          ]
        },
        unreachable: {
          ...routeTo([good], 'mappings/json-events.yaml'),
          upstreams: [
            { name: 'd1', text: `http://127.0.0.1:${dead}` },
            { name: 'd2', text: `http://127.0.0.1:${dead2}` }
          ]
        },
        audioOnly: { ...routeTo([good], 'mappings/json-events.yaml'), upstreams: [{ name: 'a', audio: good.url }] }
      }
    })
    const auth = { authorization: TEXT_TOKEN }
    const e500 = await post(gw.agent, gw.url('/text/failing'), utterance(), auth)
    t.equal(e500.status, 502)
    t.equal(e500.json.code, 'UPSTREAM_BAD_ANSWER')
    t.equal(e500.json.vendorStatus, 500)
    failing.setText({ status: 502 })
    const e502 = await post(gw.agent, gw.url('/text/failing'), utterance(), auth)
    t.equal(e502.status, 502)
    t.equal(e502.json.vendorStatus, 502)
    failing.setText({ status: 200 })
    t.equal(
      (await post(gw.agent, gw.url('/text/failing'), utterance(), auth)).status,
      200,
      'the same replica answers again'
    )

    for (let i = 0; i < 4; i++) {
      const r = await post(gw.agent, gw.url('/text/failover'), utterance({ messageBody: `try ${i}` }), auth)
      t.equal(r.status, 200, `request ${i}: the unreachable replica is skipped for the other one`)
    }
    t.equal(good.textRequests().length, 4)

    const down = await post(gw.agent, gw.url('/text/unreachable'), utterance(), auth)
    t.equal(down.status, 503)
    t.equal(down.json.code, 'UPSTREAM_UNREACHABLE')
    const none = await post(gw.agent, gw.url('/text/audioOnly'), utterance(), auth)
    t.equal(none.status, 503)
    t.equal(none.json.code, 'NO_HEALTHY_UPSTREAM')

    await until(() => gw.logs.lines.filter(l => l.event === 'text_failed').length >= 4)
    const failed = gw.logs.lines.filter(l => l.event === 'text_failed')
    t.equal(failed.length, 4, 'every failure is logged once')
    t.ok(
      failed.every(l => l.level === 'error'),
      '5xx-class failures log at error'
    )
    t.match(
      failed.find(l => l.code === 'UPSTREAM_UNREACHABLE'),
      { route: 'unreachable', result: 'connect_failed' }
    )
    const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
    t.match(metrics, 'assist_gateway_upstream_requests_total{route="failing",upstream="r0",result="status_5xx"} 2')
    t.match(metrics, 'assist_gateway_upstream_requests_total{route="failover",upstream="dead",result="connect_failed"}')
    t.match(metrics, 'assist_gateway_upstream_requests_total{route="audioOnly",upstream="",result="no_replica"} 1')
  }
)

t.test('a vendor answer the mapping cannot use is 502, a mapping that fails on a valid message is 500', async t => {
  const vendor = await startVendor(t, { kind: 'passthrough' })
  const files = {
    'unwrap.yaml': 'vendor: unwrap\ntext:\n  request: { body: "message" }\n  response: "response.body.data.reply"\n',
    // Passes serve's dry run at start (its example utterance has messageData.links; this test's has none).
    'broken.yaml':
      'vendor: broken\ntext:\n  request:\n    body: "message"\n' +
      '    path: \'$exists(request.messageData.links) ? "/ok" : $string(request.contactId)\'\n'
  }
  const gw = await startTlsGateway(
    t,
    { routes: { unwrap: routeTo([vendor], './unwrap.yaml'), broken: routeTo([vendor], './broken.yaml') } },
    {},
    { files }
  )
  const auth = { authorization: TEXT_TOKEN }
  const bad = await post(gw.agent, gw.url('/text/unwrap'), utterance(), auth)
  t.equal(bad.status, 502)
  t.equal(bad.json.code, 'UPSTREAM_BAD_ANSWER')
  const broken = await post(gw.agent, gw.url('/text/broken'), utterance(), auth)
  t.equal(broken.status, 500)
  t.equal(broken.json.code, 'MAPPING_FAILED')
  t.equal(vendor.textRequests().length, 1, 'a request the mapping could not build is never sent')
  await until(() => gw.logs.lines.some(l => l.code === 'MAPPING_FAILED'))
  t.match(
    gw.logs.lines.find(l => l.code === 'MAPPING_FAILED'),
    { pointer: '/text/request/path', mappingError: /starts with "\/"/ }
  )
  t.match(
    await (await fetch(gw.adminUrl('/metrics'))).text(),
    'assist_gateway_mapping_errors_total{route="broken",stage="text_request"} 1'
  )
})

t.test('an asynchronous route answers 202 at once, delivers in the background, and refuses past its queue', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  // The route reaches the vendor through a gate that holds its connections until released: the order of
  // events (202 first, vendor later; one in flight while more arrive) holds by construction, not by a delay.
  const gate = await holdingGate(t, vendor.httpUrl)
  // The queue is per worker process: one client connection keeps every request on one worker.
  const gw = await startTlsGateway(
    t,
    {
      text: { asyncQueueSize: 2, asyncConcurrency: 1 },
      routes: {
        bg: {
          ...routeTo([vendor], 'mappings/json-events.yaml', { async: true }),
          upstreams: [{ name: 'r0', audio: vendor.url, text: gate.url }]
        }
      }
    },
    {},
    { connections: 1 }
  )
  const auth = { authorization: TEXT_TOKEN }
  const first = await post(gw.agent, gw.url('/text/bg'), utterance({ messageBody: 'one' }), auth)
  t.equal(first.status, 202)
  t.ok(
    vendor.textRequests().every(r => r.status === null),
    'answered before the vendor did'
  )
  t.same(first.json, { accepted: true, requestId: first.headers['x-request-id'] })
  // One in flight, two waiting: the fourth does not fit.
  t.ok(await until(() => gate.connections() > 0), 'the first utterance is in flight')
  const more = await Promise.all(
    ['two', 'three', 'four'].map(
      async m => await post(gw.agent, gw.url('/text/bg'), utterance({ messageBody: m }), auth)
    )
  )
  t.same(
    more.map(r => r.status),
    [202, 202, 503]
  )
  t.equal(more[2].json.code, 'QUEUE_FULL')
  gate.release()
  t.ok(
    await until(() => vendor.textRequests().filter(r => r.status === 200).length === 3),
    'the three accepted utterances are delivered'
  )
  // A background failure is counted and logged once.
  vendor.setText({ status: 503 })
  t.equal((await post(gw.agent, gw.url('/text/bg'), utterance({ messageBody: 'five' }), auth)).status, 202)
  t.ok(await until(() => gw.logs.lines.some(l => l.event === 'text_failed')))
  t.equal(gw.logs.lines.filter(l => l.event === 'text_failed').length, 1)
  t.match(
    gw.logs.lines.find(l => l.event === 'text_failed'),
    { async: true, code: 'UPSTREAM_BAD_ANSWER', vendorStatus: 503, requestId: String }
  )
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(metrics, 'assist_gateway_upstream_requests_total{route="bg",upstream="r0",result="status_5xx"} 1')
  t.match(metrics, 'assist_gateway_text_requests_total{route="bg",code="202"} 4')
  t.match(metrics, 'assist_gateway_text_requests_total{route="bg",code="503"} 1')
})

t.test('plain HTTP only without tls, with a start-up warning; HTTPS has none', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const plain = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  // Each process logs it as it builds its listener; a worker's line may come after the gateway says it is up.
  t.ok(
    await until(() => plain.logs.lines.some(l => l.event === 'plain_listener' && l.level === 'warn')),
    'a start-up warning: plain WS/HTTP'
  )
  const r = await fetch(plain.url('/text/demo'), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: TEXT_TOKEN },
    body: JSON.stringify(utterance())
  })
  t.equal(r.status, 200)
  await r.body?.cancel()
  const tls = await startTlsGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  t.notOk(tls.logs.lines.some(l => l.event === 'plain_listener'))
  t.match(
    tls.logs.lines.find(l => l.event === 'listening'),
    { tls: true }
  )
})
