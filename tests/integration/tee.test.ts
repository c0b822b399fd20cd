import t from 'tap'
import { createHash } from 'node:crypto'
import type { VendorEmulator } from '../../gateway/tools/vendor-emulator'
import { TEXT_TOKEN, logged, platformLeg, routeTo, startGateway, startVendor, until } from '../helpers/gateway'
import { uniqueFrame, uniqueFramesHash } from '../helpers/audio'
import { utterance } from '../helpers/tls'
import { audioInit } from '../helpers/legs'

// Fan-out (route `tee`): one gateway, real emulators. Route `iso` has three tees that misbehave (one stops
// reading, one refuses every upgrade, one is killed mid-call); route `fwd` forwards its tee's results; route
// `txt` tees the text hook. What is asserted is bytes, messages and counts, never time.

/** A big platform frame (the loopback socket buffers of a tee that stops reading fill in a few MB). */
const BIG = 60_000
function bigFrame(seq: number): Buffer {
  const b = Buffer.alloc(BIG, seq & 0xff)
  b.writeUInt32BE(seq, 0)
  return b
}

async function scrape(gw: { adminUrl: (p: string) => string }): Promise<string> {
  return await (await fetch(gw.adminUrl('/metrics'))).text()
}

/** The value of one sample in a Prometheus text exposition (0 when absent). */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`)
  for (const line of text.split('\n')) {
    if (!line.startsWith(`assist_gateway_${name}{`)) continue
    const inner = line.slice(line.indexOf('{') + 1, line.lastIndexOf('}'))
    const have = inner.split(',')
    if (want.every(w => have.includes(w)) && have.length === want.length) return Number(line.split(' ').pop())
  }
  return 0
}

t.test('tees that stop reading, refuse or die: the primary and the platform lose and see nothing', async t => {
  const primary = await startVendor(t, { kind: 'passthrough', resultEveryFrames: 50, name: 'primary' })
  const slow = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0, name: 'slow' })
  const nope = await startVendor(t, { kind: 'passthrough', refuseUpgrade: 403, name: 'nope' })
  const doomed = await startVendor(t, { kind: 'json-events', resultEveryFrames: 10, name: 'doomed' })
  const fwdPrimary = await startVendor(t, { kind: 'passthrough', resultEveryFrames: 2, name: 'fwd-primary' })
  const echo = await startVendor(t, { kind: 'passthrough', resultEveryFrames: 1, name: 'echo' })
  const textPrimary = await startVendor(t, { kind: 'passthrough', name: 'text-primary' })
  const shadow = await startVendor(t, { kind: 'passthrough', name: 'shadow', text: { hang: true } })
  const tee = (name: string, v: VendorEmulator, mapping: string, extra: Record<string, unknown> = {}) => ({
    name,
    mapping,
    upstreams: [{ name: 'a', audio: v.url }],
    ...extra
  })
  const gw = await startGateway(t, {
    uws: { maxPayloadBytes: 65536 },
    // Room for the primary's big frames; the slow tee has its own small queue.
    audio: {
      holdBufferBytes: 16_000_000,
      bufferBytes: 16_000_000,
      vendorHighWaterBytes: 1_000_000,
      failoverTimeoutSeconds: 1
    },
    routes: {
      iso: routeTo([primary], 'mappings/passthrough.yaml', {
        tee: [
          tee('slow', slow, 'mappings/json-events.yaml', { bufferBytes: 120_000 }),
          tee('nope', nope, 'mappings/passthrough.yaml'),
          tee('doomed', doomed, 'mappings/json-events.yaml')
        ]
      }),
      fwd: routeTo([fwdPrimary], 'mappings/passthrough.yaml', {
        tee: [tee('echo', echo, 'mappings/passthrough.yaml', { results: 'forward' })]
      }),
      txt: routeTo([textPrimary], 'mappings/passthrough.yaml', {
        tee: [
          { name: 'shadow', mapping: 'mappings/passthrough.yaml', upstreams: [{ name: 'a', text: shadow.httpUrl }] },
          // Nothing listens there any more: every delivery to it fails.
          { name: 'gone', mapping: 'mappings/passthrough.yaml', upstreams: [{ name: 'a', text: nope.httpUrl }] }
        ]
      })
    }
  })

  t.test('isolation', async t => {
    const N = 400
    const leg = platformLeg(t, gw.url('/audio/iso'), audioInit(1301))
    t.equal((await leg.answer).command, 'CONNECTED', 'the leg is CONNECTED by the primary alone')
    await until(() => slow.sessions()[0]?.ready === true && doomed.sessions()[0]?.ready === true)
    t.ok(
      await until(() => logged(gw, 'tee_failed', { tee: 'nope', code: 'UPSTREAM_UNREACHABLE' })),
      'the refused tee ended, logged'
    )
    slow.pauseAll()
    const hash = createHash('sha256')
    for (let k = 0; k < N; k += 20) {
      for (let j = k; j < k + 20; j++) {
        const f = bigFrame(j)
        hash.update(f)
        leg.send(f)
      }
      // Paced by the primary: each batch is in before the next goes (the primary is never backed up).
      await until(() => primary.sessions()[0].frames === k + 20)
      if (k === 100) doomed.dropAll()
      if (k === 100) await doomed.close()
    }
    await until(async () => sample(await scrape(gw), 'audio_tee_sessions_total', ds('doomed', 'upstream_closed')) === 1)
    const p = primary.sessions()[0]
    t.equal(p.frames, N, 'the primary got every frame')
    t.equal(p.sha256, hash.digest('hex'), 'the primary got exactly the platform bytes, in order')
    t.equal(primary.sessions().length, 1, 'one primary session')
    t.equal(leg.ws.readyState, leg.ws.OPEN, 'the platform leg is still open')
    t.ok(
      leg.messages.every(m => m.command === 'MESSAGE' && (m.parameters as Record<string, unknown>).tee === undefined),
      'the platform saw only MESSAGE frames, none from a tee'
    )
    await until(() => leg.messages.length === N / 50)
    t.equal(leg.messages.length, N / 50, 'the platform got the primary results, no more')

    const m = await scrape(gw)
    const drops = (tee: string, reason: string): number =>
      sample(m, 'audio_tee_dropped_frames_total', { route: 'iso', tee, reason })
    t.ok(drops('slow', 'backpressure') > 0, `the slow tee's drops are counted (${drops('slow', 'backpressure')})`)
    t.equal(drops('nope', 'ended'), N, 'every frame the refused tee never got is counted')
    const doomedLost = drops('doomed', 'failover') + drops('doomed', 'failover_unreplayed') + drops('doomed', 'ended')
    t.ok(doomedLost > 0, `the killed tee's lost frames are counted (${doomedLost})`)
    t.ok(doomed.sessions()[0].frames + doomedLost >= N, 'what the killed tee got plus its drops cover the leg')
    t.equal(sample(m, 'audio_tee_sessions_total', ds('nope', 'upstream_unreachable')), 1, 'refused tee: counted')
    t.equal(sample(m, 'audio_dropped_frames_total', { route: 'iso', reason: 'backpressure' }), 0, 'primary: no drop')
    t.equal(nope.refusedUpgrades(), 1, 'the refused tee was tried once')
    t.equal(slow.sessions()[0].vendor, 'slow', 'each emulator names its sessions')

    slow.resumeAll()
    leg.ws.close(1000)
    t.same(await leg.closed, { code: 1000, reason: '' }, 'the leg ends when the platform ends it')
    await until(() => primary.sessions()[0].closed && slow.sessions()[0].closed)
    t.equal(primary.sessions()[0].closeCode, 1000, 'the primary says goodbye normally')
    const after = await scrape(gw)
    t.equal(sample(after, 'audio_tee_sessions_total', ds('slow', 'ok')), 1, 'the slow tee ended with the leg')
    t.equal(sample(after, 'audio_sessions_total', { route: 'iso', outcome: 'ok' }), 1, 'the leg ended ok')
  })

  t.test('results: forward merges the tee results, tagged with its name', async t => {
    const leg = platformLeg(t, gw.url('/audio/fwd'), audioInit(1302))
    t.equal((await leg.answer).command, 'CONNECTED')
    await until(() => echo.sessions()[0]?.ready === true)
    for (let k = 0; k < 20; k++) leg.send(uniqueFrame(2, k))
    await until(() => leg.messages.length === 6)
    const fromTee = leg.messages.filter(m => (m.parameters as Record<string, unknown>).tee === 'echo')
    const fromPrimary = leg.messages.filter(m => (m.parameters as Record<string, unknown>).tee === undefined)
    t.equal(fromTee.length, 4, 'the tee results (one per 5 frames) reached the platform')
    t.equal(fromPrimary.length, 2, 'the primary results (one per 10 frames) too, untagged')
    t.match(fromTee[0], { command: 'MESSAGE', messageType: 'TRANSCRIPT', parameters: { seq: 1, tee: 'echo' } })
    t.equal(echo.sessions()[0].sha256, uniqueFramesHash(2, 0, 20), 'the tee got the same bytes as the primary')
    t.equal(fwdPrimary.sessions()[0].sha256, echo.sessions()[0].sha256)
    t.equal(fwdPrimary.sessions()[0].vendor, 'fwd-primary')
    const m = await scrape(gw)
    t.equal(sample(m, 'audio_tee_messages_total', { route: 'fwd', tee: 'echo', result: 'forwarded' }), 4)
    const listed = (await (await fetch(gw.adminUrl('/admin/upstreams'))).json()) as { routes: { route: string }[] }
    t.ok(
      listed.routes.some(r => r.route === 'fwd/echo'),
      '/admin/upstreams lists the tee replicas as fwd/echo'
    )
    leg.ws.close(1000)
    await leg.closed
  })

  t.test('text: the primary answer does not wait for a slow or dead tee; the tee gets the utterance', async t => {
    await nope.close()
    const post = async (): Promise<{ status: number; json: unknown }> => {
      const res = await fetch(gw.url('/text/txt'), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(utterance({ authorizationHeader: TEXT_TOKEN }))
      })
      return { status: res.status, json: await res.json() }
    }
    const answer = (seq: number): unknown => ({
      command: 'MESSAGE',
      messageType: 'SUGGESTION',
      message: 'echo: I was charged twice.',
      parameters: { contactId: 584930211, participantId: 'patron', seq }
    })
    // The shadow tee hangs: the primary answers anyway, exactly as without a tee.
    t.same(await post(), { status: 200, json: answer(1) }, 'primary answer while the tee hangs')
    await until(() => shadow.textRequests().length === 1)
    t.equal(shadow.textRequests()[0].status, null, 'the tee got the utterance and has not answered')
    shadow.setText({})
    t.same(await post(), { status: 200, json: answer(2) }, 'primary answer unchanged')
    await until(() => shadow.textRequests().some(r => r.status === 200))
    const got = shadow.textRequests()[1]
    t.match(got.body, { contactId: 584930211, messageBody: 'I was charged twice.' }, 'the tee got the same utterance')
    t.notOk('authorizationHeader' in (got.body as object), 'the platform credential never reaches the tee')
    const labels = (tee: string, result: string) => ({ route: 'txt', tee, result })
    await until(
      async () => sample(await scrape(gw), 'text_tee_deliveries_total', labels('gone', 'upstream_unreachable')) === 2
    )
    const m = await scrape(gw)
    t.equal(sample(m, 'text_tee_deliveries_total', labels('shadow', 'ok')), 1, 'the delivery that was answered')
    t.equal(sample(m, 'text_tee_deliveries_total', labels('gone', 'upstream_unreachable')), 2, 'the dead tee: counted')
    t.equal(textPrimary.textRequests().length, 2, 'the primary vendor got each utterance once')
    t.notMatch(gw.logs.raw, TEXT_TOKEN, 'no log line holds the credential')
    await shadow.close() // its first request still hangs: it fails now, not at the text timeout
  })
})

const ds = (tee: string, outcome: string): Record<string, string> => ({ route: 'iso', tee, outcome })
