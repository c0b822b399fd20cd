import t from 'tap'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { logged, platformLeg, startGatewayInProcess, until } from '../helpers/gateway'
import { stream } from '../helpers/audio'
import { audioInit } from '../helpers/legs'

// A parked vendor session (the platform connection lost, the re-attach grace running) on a replica that
// goes down is ended with the mapping's close sequence, not cut with 1006: nobody is there to fail over for.

type Json = Record<string, any>

const KEY = 'ah-api-key-parked-0123456789'
const ORG = 'd7934305-0972-4844-938e-9060eef73d05'

t.test('audiohook: a replica marked down ends its parked session with close → closed, not 1006', async t => {
  const emu = await startRealVendor({ kind: 'audiohook', apiKey: KEY, resultEveryMs: 0 })
  t.teardown(async () => await emu.close())
  // One process: it marks the replica down through the pool itself, where every down verdict (probe, fleet, passive) goes.
  const gw = await startGatewayInProcess(
    t,
    {
      audio: { reattachGraceSeconds: 60 },
      routes: {
        x: {
          mapping: 'mappings/audiohook.yaml',
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [{ name: 'v', audio: emu.url, credential: '${VENDOR_KEY}' }],
          params: { organizationId: ORG }
        }
      }
    },
    { VENDOR_KEY: KEY }
  )
  const leg = platformLeg(t, gw.url('/audio/x'), audioInit(7))
  t.equal((await leg.answer).command, 'CONNECTED')
  await stream(leg, 0, 25)
  leg.ws.terminate() // the platform connection is lost: the session is parked for the grace period
  const types = (): string[] => ((emu.sessions()[0]?.texts ?? []) as Json[]).map(m => m.type as string)
  t.ok(await until(() => types().includes('paused')), 'parked: the vendor was told paused')

  // Every down verdict (probe, fleet, passive) goes through the pool's markDown.
  const pool = gw.server.state.routes.get('x')!.pool
  pool.markDown(pool.byName('v')!, 'probe', 'marked down by the test')
  t.ok(await until(() => emu.sessions()[0].closed), 'the vendor session ended')
  const s = emu.sessions()[0]
  t.equal(types().at(-1), 'close', 'the mapping close frame was the last message')
  t.equal(s.closeCode, 1000, 'closed with the mapping close code, not 1006')
  t.same(s.errors, [], 'the vendor recorded no protocol error (the close transaction ran)')
  t.ok(await until(() => logged(gw, 'parked_session_replica_down')), 'logged once')
})
