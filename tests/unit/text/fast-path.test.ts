import t from 'tap'
import jsonata from 'jsonata'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import type { Outcome } from '../../../gateway/mapping/run'
import { accelerate, compileFast, evaluate, evaluateNow } from '../../../gateway/mapping/fast-path'
import type { TextInput } from '../../../gateway/mapping/text'

// The fast path must give exactly what JSONata gives. Each expression is run by both on many generated
// inputs: the plain function (when it does not hand the case back) and jsonata's own evaluate.

function rng(seed: number): () => number {
  return () => {
    seed |= 0
    seed = (seed + 0x6d2b79f5) | 0
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

const KEYS = ['a', 'b', 'c', 'request', 'contactId', 'data']
function value(r: () => number, depth: number): unknown {
  const k = r()
  if (depth > 3 || k < 0.3) {
    const scalars = [0, 1, -2, 0.1 + 0.2, 584930211, '', 'x', 'patron', true, false, null, 1e21]
    return scalars[Math.floor(r() * scalars.length)]
  }
  if (k < 0.55) return Array.from({ length: Math.floor(r() * 4) }, () => value(r, depth + 1))
  const o: Record<string, unknown> = {}
  for (const key of KEYS) if (r() < (depth === 0 ? 0.7 : 0.45)) o[key] = value(r, depth + 1)
  return o
}

const shipped: string[] = []
for (const file of ['json-events.yaml', 'passthrough.yaml']) {
  const m = parse(readFileSync(join(__dirname, '..', '..', '..', 'mappings', file), 'utf8')) as {
    text: { request: Record<string, string>; response?: string }
  }
  for (const k of ['path', 'headers', 'body']) if (m.text.request[k] !== undefined) shipped.push(m.text.request[k])
  if (m.text.response !== undefined) shipped.push(m.text.response)
}

const CORPUS = [
  ...shipped,
  'a',
  'a.b',
  'a.b.c',
  '$.a',
  '$$.a.b',
  '$',
  '$$',
  'data.a.b',
  'a.{ "x": b, "y": $$.c }',
  'a.b.{ "k": $ }',
  '{ "x": a, "y": a.b, "z": "lit" }',
  '{}',
  '[a, b]',
  '[a, [b]]',
  '[]',
  '[[a], c]',
  'a ? b : c',
  'a ? b',
  'a.b ? "yes" : "no"',
  'a = b',
  'a != "x"',
  'a = 1',
  'a.b = a.c',
  'a and b',
  'a or b',
  'a and (b or c)',
  'a & b',
  '"s" & a.b & "e"',
  '$string(a)',
  '$string(a.b)',
  '$merge([a, b])',
  '$merge(a)',
  '$merge([{"q": 1}, a])',
  '$exists(a.b)',
  '$boolean(a)',
  '$not(a)',
  'a.b = 1 ? "one" : a.c',
  'true',
  'false',
  'null',
  '1.5',
  '"x"',
  '-1'
]
const OUTSIDE = [
  'a[0]',
  'a.b[x=1]',
  '$count(a)',
  'a + 1',
  '($x := 1; $x)',
  'a{b: c}',
  'a.*',
  '**.a',
  'a^(b)',
  '$string()',
  'function($x){$x}',
  '{ a: 1 }',
  '{ "a": 1, "a": 2 }',
  'a#$i',
  '%.a'
]

const show = (v: unknown): string => (v === undefined ? 'undefined' : JSON.stringify(v))

t.test('every subset expression gives what JSONata gives, on many inputs', async t => {
  const r = rng(20261122)
  // The gateway always evaluates on its own input object, so the roots are objects; anything goes below.
  const inputs = Array.from({ length: 400 }, () => value(r, 0)).filter(
    v => v !== null && typeof v === 'object' && !Array.isArray(v)
  )
  inputs.push(
    {},
    { a: [] },
    { a: [[1, 2], [3]] },
    { a: [{ b: 1 }, { b: [2, 3] }] },
    { a: { b: [5] } },
    { a: [{ b: { c: 1 } }] }
  )
  let compared = 0
  let handedBack = 0
  for (const src of CORPUS) {
    const fast = compileFast(jsonata(src).ast())
    if (fast === null) {
      t.fail(`${src} should be in the subset`)
      continue
    }
    const slow = jsonata(src)
    let mismatches = 0
    for (const input of inputs) {
      let expected: string
      try {
        expected = show(await slow.evaluate(input))
      } catch (e) {
        expected = `error ${(e as { code?: string }).code ?? ''}`
      }
      let got: string
      try {
        got = show(fast(input, input))
      } catch {
        handedBack++
        continue
      }
      compared++
      if (got !== expected && mismatches++ < 3) t.equal(got, expected, `${src} on ${JSON.stringify(input)}`)
    }
    t.equal(mismatches, 0, `${src}: same results`)
  }
  t.ok(
    handedBack < compared / 10,
    `the fast path handles most cases itself (${compared} compared, ${handedBack} handed back)`
  )
})

t.test('everything outside the subset keeps the JSONata evaluator', async t => {
  for (const src of OUTSIDE) {
    let ast: unknown
    try {
      ast = jsonata(src).ast()
    } catch {
      continue
    }
    t.equal(compileFast(ast), null, src)
  }
})

t.test('evaluation hands cases the fast path does not model, and its failures, to JSONata', async t => {
  const check = async (src: string, input: unknown): Promise<Outcome> => {
    const slow = jsonata(src)
    return await evaluate(
      accelerate(src, async i => await slow.evaluate(i)),
      input as TextInput
    )
  }
  // Grouping over an array item is JSONata's.
  const grouped = 'a.{ "k": b }'
  const input = { a: [[{ b: 1 }, { b: 2 }]] }
  t.same(
    JSON.stringify(await check(grouped, input)),
    JSON.stringify({ ok: true, value: await jsonata(grouped).evaluate(input) })
  )
  t.match(await check('$string(a)', { a: Infinity }), { ok: false, error: /D3001/ }, "JSONata's own error, as a value")
  t.match(await check('$merge(a)', { a: [1] }), { ok: false, error: /T0412/ })
  const fast = accelerate('a.b', async () => {
    throw new Error('not called')
  })
  t.same(
    evaluateNow(fast, { a: { b: 1 } } as unknown as TextInput),
    { ok: true, value: 1 },
    'the fast path answers synchronously'
  )
})
