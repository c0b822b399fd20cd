import t from 'tap'
import { EXPRESSION_LIMITS, compileExpr } from '../../gateway/mapping/expr'
import { type MappingInput, run } from '../../gateway/mapping/run'

// On the real clock, so it runs for the shipped time limit: kept out of the unit suite, whose limit
// tests (tests/unit/mapping/limits.test.ts) drive time through a clock they are given.

const input: MappingInput = {
  init: {},
  leg: { id: 'l', route: 'r', perspective: 'TX', contactId: '1', busNo: '2', requestId: null },
  route: { name: 'r', params: {}, checksToken: false },
  upstream: { name: 'u', audio: null, credential: null, hasCredential: false },
  msg: {}
}

/** Tail calls: JSONata does not grow the depth for these, so only the time limit can stop it. */
const FOREVER = '($f := function($n) { $f($n + 1) }; $f(0))'

t.test('the shipped time limit stops a never-ending expression on the real clock', async t => {
  t.ok(EXPRESSION_LIMITS.timeoutMs > 0, 'a time limit is shipped')
  const out = await run(compileExpr(FOREVER), input)
  t.equal(out.ok, false)
  if (!out.ok) t.match(out.error, 'LIMIT_TIME')
})
