import t from 'tap'
import { join } from 'node:path'
import { writeFileSync } from 'node:fs'
import { EXPRESSION_LIMITS, loadMapping } from '../../../gateway/mapping/compile'
import { run, type MappingInput } from '../../../gateway/mapping/run'

const input: MappingInput = {
  init: {}, leg: { id: 'l', route: 'r', perspective: 'TX', contactId: '1', busNo: '2', requestId: null },
  route: { name: 'r', params: {}, checksToken: false }, upstream: { name: 'u', audio: null, credential: null, hasCredential: false }, msg: { n: 3 }
}

function mappingWith (t: { testdir: () => string }, emit: string): string {
  const dir = t.testdir()
  const file = join(dir, 'm.yaml')
  writeFileSync(file, `vendor: limits\naudio:\n  results:\n    - when: "true"\n      emit: ${JSON.stringify(emit)}\n`)
  return file
}

t.test('runaway recursion fails with a depth error instead of exhausting the stack', async t => {
  const m = loadMapping(mappingWith(t, '($f := function($n) { $n = 0 ? 0 : 1 + $f($n - 1) }; $f(100000))'))
  const out = await run(m.audio!.results[0].emit, input)
  t.equal(out.ok, false)
  if (!out.ok) t.match(out.error, `deeper than ${EXPRESSION_LIMITS.maxDepth}`)
})

t.test('a long-running expression fails at the time limit', async t => {
  const m = loadMapping(mappingWith(t, '$count([1..3000000].($ * 2))'))
  const started = Date.now()
  const out = await run(m.audio!.results[0].emit, input)
  t.equal(out.ok, false)
  if (!out.ok) t.match(out.error, `longer than ${EXPRESSION_LIMITS.timeoutMs} ms`)
  t.ok(Date.now() - started < EXPRESSION_LIMITS.timeoutMs * 8, 'stopped near the limit')
})

t.test('concurrent evaluations of one expression keep their own limits', async t => {
  const m = loadMapping(mappingWith(t, '($f := function($n) { $n = 0 ? 0 : 1 + $f($n - 1) }; $f(msg.n * 40))'))
  const outs = await Promise.all(Array.from({ length: 20 }, async () => await run(m.audio!.results[0].emit, input)))
  t.ok(outs.every(o => o.ok && o.value === 120), 'twenty interleaved evaluations each under the depth limit succeed')
})
