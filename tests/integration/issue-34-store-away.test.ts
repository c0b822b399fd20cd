import t from 'tap'
import { join } from 'node:path'
import { initMessage } from '../../gateway/tools/simulate'
import { AUDIO_TOKEN, platformLeg, startGateway, until } from '../helpers/gateway'
import { type StatusServers, statusServers } from '../helpers/grpc-status-server'
import { haveRedisServer, startRedis } from '../helpers/redis-servers'

// A contact's group while Redis is away (docs/reference/mapping.md, "Unary gRPC calls"): `serve` as it ships
// with a Redis store (a private redis-server on a free port, killed mid-call), the shipped
// mappings/dialogflow-agent-assist.yaml and a gRPC server built from the official Dialogflow protos
// (helpers/grpc-status-server.ts). The contact's legs joined its group in Redis; with Redis gone, this instance
// cannot count the others' legs, so a leg's end must not complete the conversation (CompleteConversation,
// conversation.proto) while another leg of the contact still streams into it, and says why (once per leg's end).
// Before the fix the count came from this process's table, which never saw the group (0): the `last` steps ran,
// and here found no conversation name either (it too is in Redis), so only the log line tells the two apart.

const skip = haveRedisServer
  ? false
  : 'redis-server and redis-cli are not on PATH (Debian: apt-get install redis-server)'
const MAPPING = join(__dirname, '..', '..', 'mappings', 'dialogflow-agent-assist.yaml')
const COMPLETE = 'Conversations/CompleteConversation'

t.test('Redis away: a leg’s end completes nothing while the contact’s other leg lives', { skip }, async t => {
  const redis = await startRedis(t)
  const df: StatusServers = await statusServers(t, 1)
  const gw = await startGateway(t, {
    redis: `redis://127.0.0.1:${redis.port}`,
    store: { keyPrefix: 'store-away:', syncIntervalSeconds: 0.2, leaseSeconds: 2 },
    routes: {
      df: {
        mapping: MAPPING,
        auth: { audio: ['${AUDIO_TOKEN}'] },
        params: { project: 'demo-project', conversationProfile: 'profile-1' },
        upstreams: df.replicas.map(r => ({ name: r.name, audio: r.url }))
      }
    }
  })
  const leg = (perspective: 'TX' | 'RX') =>
    platformLeg(
      t,
      gw.url('/audio/df'),
      initMessage({ token: AUDIO_TOKEN, contactId: 935300, busNo: 4594, perspective })
    )
  const rx = leg('RX')
  t.match(await rx.answer, { command: 'CONNECTED' })
  const tx = leg('TX')
  t.match(await tx.answer, { command: 'CONNECTED' })
  t.equal(await redis.cli('scard', '{store-away:}members:df:4594:935300:dialogflow-agent-assist'), '2', 'both joined')
  await redis.kill()
  t.ok(await until(() => gw.logs.lines.some(l => l.event === 'store_down')), 'the gateway knows Redis is away')
  tx.ws.close(1000)
  await tx.closed
  t.ok(
    await until(() => gw.logs.lines.some(l => l.event === 'teardown_last_skipped')),
    'the TX leg’s end says why it leaves the conversation alone'
  )
  t.match(
    gw.logs.lines.find(l => l.event === 'teardown_last_skipped'),
    { why: 'the shared store is away' }
  )
  t.same(df.count(COMPLETE), [0], 'not completed: the RX leg still streams into it')
  t.equal(rx.ws.readyState, rx.ws.OPEN, 'the RX leg lives on')
})
