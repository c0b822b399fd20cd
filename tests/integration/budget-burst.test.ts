import t from 'tap'
import { randomUUID } from 'node:crypto'
import { initMessage } from '../../gateway/tools/simulate'
import { platformLeg, routeTo, startGateway, startVendor } from '../helpers/gateway'
import { needRedis } from '../helpers/redis'
import { audioInit } from '../helpers/legs'

// The failure budget (auth.failureBudget) counts failed authentications per client address. A balancer or
// a platform reconnecting every leg after a drain opens many valid legs at once from one address: found by
// `npm run bench -- relay` (40 legs at once, half refused TOO_MANY_FAILURES with no failure at all), since
// an accepted leg held its budget check open until its placement (a Redis round trip) was done.

t.test('a burst of valid legs from one address, more than the budget allows failures: every leg connects', async t => {
  const vendor = await startVendor(t, { kind: 'json-events', resultEveryFrames: 0 })
  const gw = await startGateway(t, {
    redis: await needRedis(),
    store: { keyPrefix: `test:${randomUUID()}:`, syncIntervalSeconds: 0.2, leaseSeconds: 10 },
    auth: { failureBudget: { failures: 3, windowSeconds: 60 } },
    routes: { demo: routeTo([vendor], 'mappings/json-events.yaml') }
  })
  const N = 24
  const legs = Array.from({ length: N }, (_, i) => platformLeg(t, gw.url('/audio/demo'), audioInit(7000 + i)))
  const what = (a: Record<string, unknown>): unknown => (a.command === 'ERROR' ? a.messageType : a.command)
  const answers = await Promise.all(legs.map(l => l.answer))
  t.same(
    answers.map(what),
    Array.from({ length: N }, () => 'CONNECTED'),
    `${N} valid legs at once, budget of 3 failures: all CONNECTED, none TOO_MANY_FAILURES`
  )
  // The budget still holds for wrong credentials from that address.
  const wrong = Array.from({ length: 6 }, (_, i) =>
    platformLeg(
      t,
      gw.url('/audio/demo'),
      initMessage({ token: 'wrong-token-0000', contactId: 7100 + i, busNo: 4594, perspective: 'TX' })
    )
  )
  const refused = (await Promise.all(wrong.map(l => l.answer))).map(what)
  t.ok(refused.includes('TOO_MANY_FAILURES'), 'wrong credentials past the budget are still refused for the window')
  t.notOk(refused.includes('CONNECTED'))
})
