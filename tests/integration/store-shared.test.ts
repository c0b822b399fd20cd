import t, { type Test } from 'tap'
import { MemoryStore } from '../../gateway/store/memory'
import type { Store } from '../../gateway/store/port'
import { redisStorePair } from '../helpers/redis'

// A contact's shared values and groups (store/port.ts swapShared, dropShared, countMembers) on the memory
// store and on real Redis (store/redis-scripts.ts SWAP_SHARED, COUNT_MEMBERS): what a mapping's shared setup
// steps and its teardown `when: last` stand on (mapping/steps-run.ts).

async function sharing(t: Test, a: Store, b: Store): Promise<void> {
  const both = await Promise.all([
    a.swapShared('c1', 'conv', null, 'pending:a', 60_000),
    b.swapShared('c1', 'conv', null, 'pending:b', 60_000)
  ])
  t.equal(both[0], both[1], 'two claims at once agree on one value')
  const mine = both[0] as string
  t.match(mine, /^pending:[ab]$/)
  t.equal(await b.swapShared('c1', 'conv', 'pending:x', 'done:1', 60_000), mine, 'a wrong expectation changes nothing')
  t.equal(await a.swapShared('c1', 'conv', mine, 'done:1', 60_000), 'done:1', 'the claimer publishes its result')
  t.equal(await b.swapShared('c1', 'conv', null, 'pending:b', 60_000), 'done:1', 'the other reads it')
  t.equal(await b.swapShared('c1', 'part', null, 'done:2', 60_000), 'done:2', 'another field of the contact')
  await a.dropShared('c1')
  t.equal(
    await b.swapShared('c1', 'conv', null, 'pending:b', 60_000),
    'pending:b',
    'dropped: every field is free again'
  )
  t.equal(await b.swapShared('c1', 'conv', 'pending:b', null, 60_000), null, 'a claim given up')
  t.equal(await a.countMembers('g1', 'TX', true, 60_000), 1)
  t.equal(await b.countMembers('g1', 'RX', true, 60_000), 2)
  t.equal(await b.countMembers('g1', 'RX', true, 60_000), 2, 'joining twice counts once')
  t.equal(await a.countMembers('g1', 'TX', false, 60_000), 1, 'one left')
  t.equal(await b.countMembers('g1', 'RX', false, 60_000), 0, 'the last one left')
  t.equal(await b.countMembers('g1', 'RX', false, 60_000), 0, 'leaving an empty group')
}

t.test('memory store', async t => {
  const m = new MemoryStore('m')
  await sharing(t, m, m)
})

t.test('Redis: two instances share the values and groups', async t => {
  const [a, b] = await redisStorePair(t)
  await sharing(t, a, b)
})
