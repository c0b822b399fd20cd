import t from 'tap'
import {
  audioFailures,
  bestText,
  capacityOf,
  nextLegs,
  type SearchOptions,
  textLadderOver
} from '../../bench/capacity-search'

const OPTS: SearchOptions = { step: 250, resolution: 100, maxLegs: 5000 }

/** Run the search against a box that carries `capacity` legs: every count up to it passes. */
function search(capacity: number, o = OPTS): { tried: number[]; answer: number } {
  const tried: { legs: number; pass: boolean }[] = []
  for (let legs = nextLegs(tried, o); legs !== null; legs = nextLegs(tried, o)) {
    if (tried.length > 50) throw new Error(`no end: ${tried.map(x => x.legs).join(', ')}`)
    tried.push({ legs, pass: legs <= capacity })
  }
  return { tried: tried.map(x => x.legs), answer: capacityOf(tried) }
}

t.test('steps up until a step fails, then bisects to the resolution', async t => {
  const r = search(900)
  t.same(r.tried, [250, 500, 750, 1000, 880, 940])
  t.equal(r.answer, 880)
})

t.test('the answer is a passing count within the resolution below the true capacity', async t => {
  for (const capacity of [0, 1, 99, 250, 251, 749, 1234, 4999]) {
    const { answer, tried } = search(capacity)
    t.ok(answer <= capacity && capacity - answer <= OPTS.resolution, `capacity ${capacity}: ${answer} (${tried})`)
    t.equal(new Set(tried).size, tried.length, `capacity ${capacity}: no count tried twice`)
  }
})

t.test('stops at maxLegs when every step passes; a fine resolution bisects to the leg', async t => {
  t.same(search(10_000, { step: 2000, resolution: 100, maxLegs: 5000 }).tried, [2000, 4000, 5000])
  t.equal(search(10_000, { step: 2000, resolution: 100, maxLegs: 5000 }).answer, 5000)
  t.equal(search(137, { step: 250, resolution: 1, maxLegs: 5000 }).answer, 137)
})

t.test('a pass above the lowest failure (noise) does not count', async t => {
  const tried = [
    { legs: 250, pass: true },
    { legs: 500, pass: false },
    { legs: 750, pass: true }
  ]
  t.equal(capacityOf(tried), 250)
  t.equal(nextLegs(tried, OPTS), 380)
})

t.test('an audio step fails on latency, loss, a leg not streaming or short delivery, and says which', async t => {
  const ok = { legs: 100, streaming: 100, addedP99: 110, lost: 0, framesPerSec: 4950 }
  t.same(audioFailures(ok, 110), [])
  t.same(audioFailures({ ...ok, addedP99: 110.01 }, 110), ['p99 added > 110 ms'])
  t.same(audioFailures({ ...ok, addedP99: Number.NaN }, 110), ['p99 added > 110 ms'])
  t.same(audioFailures({ ...ok, lost: 3 }, 110), ['3 frames lost'])
  t.same(audioFailures({ ...ok, streaming: 98, framesPerSec: 4900 }, 110), [
    '2 legs not streaming',
    'delivered < 99 % of 5000/s'
  ])
})

t.test('text: the most req/s within 20 ms and without errors; the ladder ends after two misses', async t => {
  const runs = [
    { connections: 1, rps: 2000, p99: 1, errors: 0 },
    { connections: 8, rps: 9000, p99: 12, errors: 3 },
    { connections: 16, rps: 8000, p99: 19, errors: 0 },
    { connections: 32, rps: 8500, p99: 25, errors: 0 }
  ]
  t.equal(bestText(runs, 20)?.connections, 16)
  t.equal(bestText([runs[3]], 20), null)
  t.notOk(textLadderOver(runs, 20), 'one miss after a pass')
  t.ok(textLadderOver([...runs, { connections: 64, rps: 8600, p99: 40, errors: 0 }], 20))
})
