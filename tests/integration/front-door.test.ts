import t from 'tap'
import { join } from 'node:path'
import { runCli } from '../helpers/cli'
import { AUDIO_TOKEN, routeTo, startGateway, startVendor } from '../helpers/gateway'

t.test('serve refuses to start when uWebSockets.js fell back to its pure-JS build', async t => {
  const dir = t.testdir({
    'gateway.yaml':
      'listen: { host: 127.0.0.1, port: 0 }\nadmin: { host: 127.0.0.1, port: 0 }\nroutes:\n  a: { mapping: mappings/passthrough.yaml, upstreams: [{ name: a, audio: "ws://127.0.0.1:1/x" }] }\n'
  })
  const { code, stdout, stderr } = await runCli(['serve', '--config', join(dir, 'gateway.yaml')], {
    UWS_USE_FALLBACK: '1'
  })
  const out = stdout + stderr
  t.not(code, 0, 'exits non-zero')
  t.match(out, /pure-JS fallback, not the native binary: refusing to serve/)
})

t.test('health, readiness, metrics and upstreams on the admin listener; examples on the public one', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, {
    routes: { demo: { ...routeTo([vendor], 'mappings/json-events.yaml'), default: true } }
  })
  t.equal((await fetch(gw.adminUrl('/livez'))).status, 200)
  const ready = await fetch(gw.adminUrl('/readyz'))
  t.equal(ready.status, 200)
  t.equal((await fetch(gw.url('/readyz'))).status, 200, 'readiness is also on the public listener for load balancers')
  const metrics = await fetch(gw.adminUrl('/metrics'))
  t.equal(metrics.status, 200)
  const text = await metrics.text()
  t.match(text, /assist_gateway_build_info\{version="[^"]+",uws_native="true"\} 1/)
  t.match(text, /# TYPE assist_gateway_audio_sessions_active gauge/)
  t.match(text, /^process_cpu_seconds_total\{worker="main"\} /m)
  const ups = (await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as {
    routes: { route: string; replicas: { name: string; state: string }[] }[]
  }
  t.match(ups, { routes: [{ route: 'demo', vendor: 'json-events', replicas: [{ name: 'r0', state: 'up' }] }] })
  t.equal((await fetch(gw.url('/metrics'))).status, 404, 'metrics are not on the public listener')
  const nf = await fetch(gw.url('/nope'))
  t.equal(nf.status, 404)
  t.equal(nf.headers.get('content-type'), 'application/problem+json')
})

t.test('the three audio example endpoints', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, {
    routes: { demo: { ...routeTo([vendor], 'mappings/json-events.yaml'), default: true } }
  })
  const base = '/agent_assist_audio_websocket_hooks'
  const url = (await (await fetch(gw.url(`${base}/example-websocket-server?route=demo`))).json()) as { url: string }
  t.equal(url.url, `ws://127.0.0.1:${gw.port}/audio/demo`)
  t.equal((await fetch(gw.url(`${base}/example-websocket-server?route=nope`))).status, 404)

  const example = (await (await fetch(gw.url(`${base}/initializemessage-example`))).json()) as Record<string, unknown>
  t.match(example, { executionInfo: { contactId: Number, busNo: Number }, streamPerspective: 'TX' })

  const post = async (body: string, route = 'demo'): Promise<{ status: number; json: any }> => {
    const r = await fetch(gw.url(`${base}/custom-assist-endpoint/initialize-audio-message-example?route=${route}`), {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json' }
    })
    return { status: r.status, json: await r.json() }
  }
  const ok = await post(JSON.stringify({ ...example, authenticationToken: AUDIO_TOKEN }))
  t.equal(ok.status, 200)
  t.match(ok.json, {
    response: { command: 'CONNECTED', messageType: 'COMMAND', message: 'BEGIN AUDIO STREAM' },
    closeCode: null
  })
  t.equal(ok.json.request.authenticationToken, '[REDACTED]', 'the dry-run never echoes the token')
  const bad = await post(JSON.stringify({ ...example, authenticationToken: 'nope-nope' }))
  t.match(bad.json, { response: { command: 'ERROR', messageType: 'AUTH_INVALID' }, closeCode: 1008 })
  const invalid = await post(JSON.stringify({ ...example, authenticationToken: AUDIO_TOKEN, streamPerspective: 'UP' }))
  t.match(invalid.json, {
    response: { command: 'ERROR', messageType: 'MESSAGE_INVALID', parameters: { pointers: ['/streamPerspective'] } },
    closeCode: 1007
  })
  const notJson = await post('{{{')
  t.match(notJson.json, { response: { messageType: 'MESSAGE_NOT_JSON' }, closeCode: 1007 })
  t.equal(vendor.sessions().length, 0, 'dry-runs never open a vendor session')
})

t.test('shutdown ends live legs with SHUTTING_DOWN and close 1012', async t => {
  const vendor = await startVendor(t, { kind: 'json-events' })
  const gw = await startGateway(t, { routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') } })
  const { platformLeg } = await import('../helpers/gateway')
  const { initMessage } = await import('../../gateway/tools/simulate')
  const leg = platformLeg(
    t,
    gw.url('/audio/demo'),
    initMessage({ token: AUDIO_TOKEN, contactId: 1, busNo: 2, perspective: 'RX' })
  )
  t.equal((await leg.answer).command, 'CONNECTED')
  await gw.close()
  const closed = await leg.closed
  t.equal(closed.code, 1012)
  t.match(leg.messages.at(-1), { command: 'ERROR', messageType: 'SHUTTING_DOWN' })
})
