import t from 'tap'
import { join } from 'node:path'
import { writeFileSync } from 'node:fs'
import { loadMapping } from '../../../gateway/mapping/compile'
import { EXPRESSION_LIMITS, compileExpr } from '../../../gateway/mapping/expr'
import { run, type MappingInput } from '../../../gateway/mapping/run'

const input: MappingInput = {
  init: {},
  leg: { id: 'l', route: 'r', perspective: 'TX', contactId: '1', busNo: '2', requestId: null },
  route: { name: 'r', params: {}, checksToken: false },
  upstream: { name: 'u', audio: null, credential: null, hasCredential: false },
  msg: { n: 3 }
}

function mappingWith(t: { testdir: () => string }, emit: string): string {
  const dir = t.testdir()
  const file = join(dir, 'm.yaml')
  writeFileSync(
    file,
    `vendor: limits\naudio:\n  time: { none: a test mapping }\n  results:\n    - when: "true"\n      emit: ${JSON.stringify(emit)}\n`
  )
  return file
}

/** A clock that moves only when read: every step of every evaluation costs `stepMs`. */
function steppingClock(stepMs: number): { now: () => number; reads: () => number } {
  let now = 0
  let reads = 0
  return {
    now: () => {
      reads++
      now += stepMs
      return now
    },
    reads: () => reads
  }
}

const RECURSE = '($f := function($n) { $n = 0 ? 0 : 1 + $f($n - 1) }; $f(msg.n * 40))'
/** Some hundreds of steps, 20 deep. */
const SMALL = '($f := function($n) { $n = 0 ? 0 : 1 + $f($n - 1) }; $f(20))'
/** Tail calls: JSONata does not grow the depth for these, so only the time limit can stop it. */
const FOREVER = '($f := function($n) { $f($n + 1) }; $f(0))'

t.test('runaway recursion fails with a depth error instead of exhausting the stack', async t => {
  const m = loadMapping(mappingWith(t, '($f := function($n) { $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100000))'))
  const out = await run(m.audio!.results[0].emit, input)
  t.equal(out.ok, false)
  if (!out.ok) t.match(out.error, `deeper than ${EXPRESSION_LIMITS.maxDepth}`)
})

t.test('an expression that never ends fails at the time limit, measured on the clock it is given', async t => {
  const clock = steppingClock(1)
  const out = await run(compileExpr(FOREVER, { clock: clock.now }), input)
  t.equal(out.ok, false)
  if (!out.ok) t.match(out.error, `longer than ${EXPRESSION_LIMITS.timeoutMs} ms`)
  // One clock read per step at 1 ms each: it stops right after its own 1000 ms, not later.
  t.ok(
    clock.reads() > EXPRESSION_LIMITS.timeoutMs && clock.reads() < EXPRESSION_LIMITS.timeoutMs + 10,
    `stopped at the limit (${clock.reads()} steps)`
  )
})

t.test('concurrent evaluations of one expression keep their own depth', async t => {
  // Depth only: a clock that never moves, so a busy machine's pauses cannot charge anyone time.
  const expr = compileExpr(RECURSE, { clock: () => 0 })
  const outs = await Promise.all(Array.from({ length: 20 }, async () => await run(expr, input)))
  const failed = outs.filter(o => !(o.ok && o.value === 120))
  t.same(failed, [], 'twenty interleaved evaluations each under the depth limit succeed')
})

t.test('interleaved evaluations are each charged only their own time', async t => {
  // Alone, one evaluation takes some hundreds of steps; twenty interleaved take twenty times as many
  // steps between the first and the last. At 1 ms a step, the wall time of the batch is far past
  // the limit, while each evaluation's own time stays under it.
  const clock = steppingClock(1)
  const expr = compileExpr(SMALL, { clock: clock.now })
  const alone = steppingClock(1)
  t.ok((await run(compileExpr(SMALL, { clock: alone.now }), input)).ok, 'one evaluation alone is under the limit')
  const ownMs = alone.reads()
  t.ok(
    ownMs < EXPRESSION_LIMITS.timeoutMs && ownMs * 20 > EXPRESSION_LIMITS.timeoutMs,
    `one costs ${ownMs} ms, twenty ${ownMs * 20} ms`
  )
  const outs = await Promise.all(Array.from({ length: 20 }, async () => await run(expr, input)))
  t.same(
    outs.map(o => (o.ok ? o.value : o.error)),
    Array(20).fill(20),
    'every interleaved evaluation succeeds'
  )
})

t.test('an evaluation over its own time fails while the interleaved ones under it succeed', async t => {
  const clock = steppingClock(1)
  const expr = compileExpr(FOREVER, { clock: clock.now })
  const fine = compileExpr(SMALL, { clock: clock.now })
  const outs = await Promise.all([run(expr, input), ...Array.from({ length: 5 }, async () => await run(fine, input))])
  t.equal(outs[0].ok, false, 'the runaway fails')
  t.ok(
    outs.slice(1).every(o => o.ok && o.value === 20),
    'the others, interleaved with it, succeed'
  )
})
