import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse, stringify } from 'yaml'
import { initMessage } from '../../gateway/tools/simulate'
import { checkFramesFinals, framesFinals, playNumbered, transcribingVendor } from '../helpers/audio'
import { AUDIO_TOKEN, logged, platformLeg, sleep, startGateway, until } from '../helpers/gateway'
import { audioRoute } from '../helpers/legs'

// Issue 32 item 3 from outside, through `serve` as it ships and mappings/deepgram.yaml, with the Deepgram
// emulator as a process of its own transcribing what it hears (each final names the platform frames it
// covers, with Deepgram's `start` and `duration`: the Results of Deepgram's live-streaming reference and
// @deepgram/sdk's LiveTranscriptionEvent). Not a failover this time: the gateway's own rotation (a vendor
// session replaced before its cap, make-before-break: audio.rotateAfterSeconds) and a platform reconnect
// (the platform leg drops and re-attaches within audio.reattachGraceSeconds). Each final reaches the
// platform once across them, on the call's timeline, never backwards.

const ROOT = join(__dirname, '..', '..')

const init = (contactId: number): Record<string, unknown> =>
  initMessage({ token: AUDIO_TOKEN, contactId, busNo: 4594, perspective: 'TX' })

t.test(
  'rotation: vendor sessions replaced every 2 s by the gateway, each final once, on the call timeline',
  async t => {
    const vendor = await transcribingVendor(t, 'deepgram')
    const mapping = parse(readFileSync(join(ROOT, 'mappings', 'deepgram.yaml'), 'utf8')) as Record<string, any>
    mapping.audio.rotateAfterSeconds = 2
    const gw = await startGateway(
      t,
      {
        routes: {
          demo: {
            mapping: './deepgram-rotating.yaml',
            auth: { audio: ['${AUDIO_TOKEN}'] },
            upstreams: [{ name: 'v', audio: vendor.url }]
          }
        }
      },
      {},
      { 'deepgram-rotating.yaml': stringify(mapping) }
    )
    const legs = [0, 1].map(i => platformLeg(t, gw.url('/audio/demo'), init(937000 + i)))
    for (const l of legs) t.equal((await l.answer).command, 'CONNECTED')
    const TOTAL = 400
    await playNumbered(legs, 0, TOTAL)
    t.ok(
      await until(() => legs.every(l => framesFinals(l.messages, 'duration').some(f => f.to >= TOTAL - 60)), 20_000),
      'every leg got finals to near the end'
    )
    t.ok(
      gw.logs.lines.filter(l => l.event === 'rotated').length >= 2 * legs.length,
      'each leg was moved to a new vendor session at least twice'
    )
    for (const [i, leg] of legs.entries()) checkFramesFinals(t, `leg ${i}`, leg.messages, 'duration')
  }
)

t.test('platform reconnect: the leg drops mid-segment and re-attaches within the grace, each final once', async t => {
  const vendor = await transcribingVendor(t, 'deepgram')
  const gw = await startGateway(t, {
    audio: { reattachGraceSeconds: 5 },
    routes: { demo: audioRoute('mappings/deepgram.yaml', [{ name: 'v', audio: vendor.url }]) }
  })
  const first = platformLeg(t, gw.url('/audio/demo'), init(938000))
  t.equal((await first.answer).command, 'CONNECTED')
  // Dropped mid-segment (frames 200-249 are the vendor's next final): no final is due while it is away.
  await playNumbered([first], 0, 225)
  await sleep(200)
  first.ws.terminate()
  await first.closed
  t.ok(await until(() => logged(gw, 'platform_closed')), 'the gateway saw the platform leg go')
  await sleep(300)
  const second = platformLeg(t, gw.url('/audio/demo'), init(938000))
  t.equal((await second.answer).command, 'CONNECTED', 're-attached')
  const TOTAL = 450
  await playNumbered([second], 225, TOTAL)
  const all = (): Record<string, unknown>[] => [...first.messages, ...second.messages]
  t.ok(
    await until(() => framesFinals(all(), 'duration').some(f => f.to >= TOTAL - 60), 20_000),
    'finals to near the end'
  )
  const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
  t.match(
    metrics,
    /assist_gateway_audio_reattach_total\{route="demo",result="same_session"\} 1/,
    'the same vendor session'
  )
  checkFramesFinals(t, 'the leg across both sockets', all(), 'duration')
})
