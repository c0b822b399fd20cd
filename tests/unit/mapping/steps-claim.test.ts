import t from 'tap'
import { join } from 'node:path'
import { loadMapping } from '../../../gateway/mapping/compile'
import type { GrpcStep } from '../../../gateway/mapping/steps'
import { runSteps, type StepsOutcome } from '../../../gateway/mapping/steps-run'
import { MemoryStore } from '../../../gateway/store/memory'
import { FakeClock } from '../../helpers/fake-clock'

// The wait for another leg's shared step (gateway/mapping/steps-run.ts `shared`), on a clock that only moves when
// the test says: the claim's until and the waiter's patience are both read from it. No call is made: the step's
// request is the shipped teardown's, null without a conversation (nothing to send: the runner answers a mapping
// failure, "did not produce a request"), so a step this leg took over ends at once, without a socket.

const mapping = loadMapping(join(__dirname, '..', '..', '..', 'mappings', 'dialogflow-agent-assist.yaml'))
const audio = mapping.audio!
const INPUT = {
  init: {},
  leg: { id: 'l', route: 'df', perspective: 'TX', contactId: '1', busNo: '2', requestId: null },
  route: { name: 'df', params: { project: 'p', conversationProfile: 'c' }, checksToken: false },
  upstream: { name: 'a', audio: 'grpc://127.0.0.1:9', credential: null, hasCredential: false }
}
const TARGET = { url: 'grpc://127.0.0.1:9', credential: null, headers: {} }

/** The shared `conversation` step with `deadlineSeconds` and a request that comes out null. */
function step(deadlineMs: number): GrpcStep {
  return { ...audio.teardown![0]!, share: audio.setup![0]!.share, deadlineMs, pointer: '/audio/setup/0' }
}

/** A run of `s` waiting on `claim` (another leg's, made at the clock's now); `settled` once it answered. */
async function waiting(
  s: GrpcStep,
  claimUntil: (now: number) => number,
  over: { untilIn?: number; alive?: () => boolean } = {}
) {
  // Started at the wall clock's now, so a runner that read Date.now for the claims would agree with it at first.
  const clock = new FakeClock(Date.now())
  const store = new MemoryStore('test')
  await store.swapShared('c', 'conversation', null, `pending:other:${claimUntil(clock.now())}`, 60_000)
  const until = over.untilIn === undefined ? {} : { until: clock.now() + over.untilIn }
  const scope = { store, clock, contact: 'c', shareMs: 60_000, wallNow: clock.now, alive: over.alive, ...until }
  const run = { out: null as StepsOutcome | null }
  void runSteps([s], INPUT, TARGET, scope).then(o => {
    run.out = o
  })
  /** Move the clock `ms` on, 50 ms (the poll) at a time, until the run answered. */
  const advance = async (ms: number): Promise<StepsOutcome | null> => {
    for (let i = 0; i < ms / 50 && run.out === null; i++) await clock.tick(50)
    return run.out
  }
  return { clock, advance, run }
}

t.test('a claim whose maker died is taken over even with a deadline under 2.5 s', async t => {
  // deadlineSeconds 1: a claim lives 1 s + 5 s. The waiter gave up after 3 s (3 deadlines): never a takeover.
  const w = await waiting(step(1000), now => now + 1000 + 5000)
  t.equal(await w.advance(5900), null, 'still waiting while the claim may be alive')
  const out = await w.advance(2000)
  t.match(
    out,
    { ok: false, failure: { kind: 'mapping', error: 'did not produce a request (an object)' } },
    'the claim was taken over and the step made by this leg (its request is null here)'
  )
})

t.test('a claim that stays alive: the waiter gives up with DEADLINE_EXCEEDED, not before the margin', async t => {
  const w = await waiting(step(1000), now => now + 3_600_000)
  t.equal(await w.advance(7900), null, 'waits 2 deadlines + the claim grace + a margin')
  t.match(await w.advance(1000), { ok: false, failure: { kind: 'status', code: 4, gateway: true } })
})

t.test('the wait ends at the utterance deadline (`until`)', async t => {
  const w = await waiting(step(10_000), now => now + 3_600_000, { untilIn: 1000 })
  t.match(await w.advance(1100), { ok: false, failure: { kind: 'status', code: 4 } }, 'within the 1 s left')
})

t.test('the leg gone: the wait stops at the next poll (CANCELLED), not at its patience', async t => {
  let alive = true
  const w = await waiting(step(10_000), now => now + 3_600_000, { alive: () => alive })
  t.equal(await w.advance(500), null)
  alive = false
  t.match(await w.advance(100), { ok: false, failure: { kind: 'status', code: 1, details: 'the leg is gone' } })
})
