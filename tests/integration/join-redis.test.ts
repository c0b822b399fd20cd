import t from 'tap'
import { audiohookStereoRoute } from '../helpers/stereo'
import { createHash, randomUUID } from 'node:crypto'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, platformLeg, startGateway, until } from '../helpers/gateway'
import { needRedis } from '../helpers/redis'

// A join route on a gateway with the Redis store: the joined session looks up its own affinity before it
// opens (audio/session/join.ts), then streams both channels as on one instance with the memory store.

const KEY = 'ah-api-key-0123456789'
const ORG = '2b1f3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d'

t.test('redis store: TX and RX of a contact join one AudioHook session; each leg gets CONNECTED', async t => {
  const REDIS_URL = await needRedis()
  const ah = await startRealVendor({ kind: 'audiohook', apiKey: KEY, resultEveryMs: 0 })
  t.teardown(async () => await ah.close())
  const gw = await startGateway(
    t,
    {
      redis: REDIS_URL,
      store: { keyPrefix: `test:${randomUUID()}:`, syncIntervalSeconds: 0.2, leaseSeconds: 10 },
      routes: {
        ah: audiohookStereoRoute(ah.url, 'AH_KEY', ORG, ['RX', 'TX'])
      }
    },
    { AH_KEY: KEY }
  )
  const open = (perspective: string) =>
    platformLeg(t, gw.url('/audio/ah'), initMessage({ token: AUDIO_TOKEN, contactId: 4242, busNo: 4594, perspective }))
  const tx = open('TX')
  const rx = open('RX')
  t.equal((await tx.answer).command, 'CONNECTED')
  t.equal((await rx.answer).command, 'CONNECTED')
  for (let k = 0; k < 10; k++) {
    tx.send(Buffer.alloc(160, 0x11))
    rx.send(Buffer.alloc(160, 0x22))
  }
  const voiced = (ch: number): number => {
    const c = ah.sessions()[0]?.channels?.[ch]
    return c === undefined ? 0 : c.samples - c.silence
  }
  t.ok(await until(() => voiced(0) === 1600 && voiced(1) === 1600, 10_000), 'both channels arrived')
  const s = ah.sessions()[0]
  t.equal(ah.sessions().length, 1, 'one vendor session for the contact')
  t.same(s.errors, [])
  const openMsg = (s.texts as Record<string, any>[]).find(m => m.type === 'open')
  t.same(openMsg?.parameters.media[0].channels, ['internal', 'external'], 'channel order as the route says: RX, TX')
  t.equal(
    s.channels![0].voicedSha256,
    createHash('sha256').update(Buffer.alloc(1600, 0x22)).digest('hex'),
    'channel 0 is RX'
  )
  tx.ws.close(1000)
  rx.ws.close(1000)
})
