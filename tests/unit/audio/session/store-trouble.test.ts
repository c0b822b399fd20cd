import t from 'tap'
import { join } from 'node:path'
import { runSetup } from '../../../../gateway/audio/connection/setup-steps'
import type { ConnectionContext } from '../../../../gateway/audio/connection/connection-contract'
import type { SessionDeps } from '../../../../gateway/audio/session/session-contract'
import { sessionOver } from '../../../../gateway/audio/session/teardown'
import { loadMapping } from '../../../../gateway/mapping/compile'
import { MemoryStore } from '../../../../gateway/store/memory'
import { RedisOwners } from '../../../../gateway/store/redis-owners'
import { Metrics } from '../../../../gateway/telemetry/metrics'
import { FakeClock } from '../../../helpers/fake-clock'
import { LEG_INPUT, Lines, route, SETTINGS } from '../harness'

// The shared store in trouble under a mapping's steps (docs/reference/mapping.md, "Unary gRPC calls"), on the
// shipped Dialogflow mapping. No call is made here: the store holds the contact's results (or fails first).
// - Redis away: a contact's group cannot be counted (store/redis-owners.ts `countMembers` answers null), so a
//   leg's end leaves the `when: last` steps and the shared results alone, and says why once.
// - A store command that fails: the setup fails as a replica that cannot be reached (UNAVAILABLE: the leg tries
//   the next replica), never an exception on the session's control chain (which ends the leg INTERNAL).

const audio = loadMapping(join(__dirname, '..', '..', '..', '..', 'mappings', 'dialogflow-agent-assist.yaml')).audio!
const DONE = 'done:{"name":"projects/p/locations/global/conversations/c1"}'

/** A memory store with some of its shared operations replaced. */
function storeWith(over: Partial<Pick<MemoryStore, 'swapShared' | 'countMembers' | 'dropShared'>>): MemoryStore {
  return Object.assign(new MemoryStore('test'), over)
}

function world(store: MemoryStore) {
  const clock = new FakeClock()
  const r = route(clock, ['a'], audio, () => 'grpc://127.0.0.1:9')
  const logs = new Lines()
  const deps = { route: r, settings: SETTINGS, metrics: new Metrics(), store, clock, host: null, log: logs.log }
  return { r, logs, deps: deps as unknown as SessionDeps, ctx: { ...deps, group: { joinedOn: null } } }
}

const settle = async (done: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !done(); i++) await new Promise(r => setImmediate(r))
}

t.test('Redis away: the group answers unknown, not the empty table of this process', async t => {
  const owners = new RedisOwners(
    {
      eval: async () => {
        throw new Error('not used: Redis is away')
      }
    } as never,
    k => k,
    () => {},
    () => false
  )
  t.equal(await owners.countMembers('c', 'r:TX', true, 60_000), null, 'a join: unknown')
  t.equal(await owners.countMembers('c', 'r:RX', false, 60_000), null, 'a leave: unknown, not 0')
})

t.test('a leg ending while its contact cannot be counted: no CompleteConversation, no drop, one line why', async t => {
  let dropped = 0
  const store = storeWith({
    countMembers: async () => null,
    dropShared: async () => {
      dropped++
    },
    swapShared: async () => DONE
  })
  const { r, logs, deps } = world(store)
  sessionOver(deps, 'r:1:2:TX', 'session-1', LEG_INPUT, null, r.pool.replicas[0]!)
  const skipped = () => logs.lines.filter(l => l.event === 'teardown_last_skipped')
  await settle(() => skipped().length > 0)
  await settle(() => false)
  t.equal(skipped().length, 1, 'said once')
  t.match(skipped()[0], { why: 'the shared store is away' })
  t.equal(dropped, 0, 'the shared results stay')
  t.same(
    logs.lines.filter(l => l.event === 'teardown_failed'),
    [],
    'no step ran (the only one is `when: last`: it would have called CompleteConversation and failed here)'
  )
})

t.test('a store command that fails in the setup is a transient failure, never thrown', async t => {
  const refused = async (): Promise<never> => {
    throw new Error('READONLY You cannot write against a read only replica.')
  }
  for (const [what, over] of [
    ['the shared step', { swapShared: refused }],
    ['the join', { swapShared: async () => DONE, countMembers: refused }]
  ] as const) {
    const { r, ctx } = world(storeWith(over))
    const out = await runSetup(ctx as unknown as ConnectionContext, audio, r.pool.replicas[0]!, LEG_INPUT, () => true)
    t.match(out, { ok: false, failure: { kind: 'unreachable', socket: { kind: 'grpc', status: 14 } } }, what)
  }
})

t.test('a store command that fails in the teardown: the `last` steps and the drop are skipped, logged', async t => {
  let dropped = 0
  const store = storeWith({
    countMembers: async () => {
      throw new Error('Connection is closed.')
    },
    dropShared: async () => {
      dropped++
    }
  })
  const { r, logs, deps } = world(store)
  sessionOver(deps, 'r:1:2:TX', 'session-1', LEG_INPUT, null, r.pool.replicas[0]!)
  await settle(() => logs.lines.some(l => l.event === 'teardown_last_skipped'))
  t.match(
    logs.lines.find(l => l.event === 'teardown_last_skipped'),
    { why: 'Connection is closed.' }
  )
  t.equal(dropped, 0)
  t.notOk(
    logs.lines.some(l => l.event === 'teardown_failed'),
    'not a failed teardown'
  )
})
