import t from 'tap'
import type { ReplicaWalk } from '../../../../gateway/audio/session/failover'
import { RetryPacer } from '../../../../gateway/audio/session/session-retry'
import { FakeClock, flush } from '../../../helpers/fake-clock'

// audio/session/session-retry.ts: when a recovering session tries again, on the fake clock with a stand-in walk
// (the real walk's backoff and proofs are tested in issue-32-walk.test.ts and recovery.test.ts).

function world(backoff: (number | null)[], proofs: boolean[] = []) {
  const clock = new FakeClock()
  const seen: string[] = []
  const state = { recovering: true, idle: true }
  const answers: ((any: boolean) => void)[] = []
  const walk = {
    backoff: () => backoff.shift() ?? null,
    refill: () => seen.push('refill'),
    proveSuspects: () =>
      new Promise<boolean>(resolve => {
        answers.push(resolve)
        if (proofs.length > 0) resolve(proofs.shift() ?? false)
      })
  } as unknown as ReplicaWalk
  const pacer = new RetryPacer(clock, walk, {
    recovering: () => state.recovering,
    idle: () => state.idle,
    tryNext: () => seen.push(`try@${clock.now()}`),
    timedOut: () => seen.push('timed out')
  })
  return { clock, pacer, seen, state, answers }
}

t.test('a backoff round refills the walk and tries again when due; past the deadline it times out', async t => {
  const w = world([100, null])
  w.pacer.backoff()
  w.clock.advance(99)
  t.same(w.seen, [])
  w.clock.advance(1)
  t.same(w.seen, ['refill', 'try@100'])
  w.pacer.backoff()
  t.same(w.seen, ['refill', 'try@100', 'timed out'])
})

t.test('a round that falls due once the session left RECOVERING does nothing; cancel clears it', async t => {
  const w = world([100, 100])
  w.pacer.backoff()
  w.state.recovering = false
  w.clock.advance(100)
  t.same(w.seen, [], 'no longer recovering')
  w.state.recovering = true
  w.pacer.after(50)
  w.pacer.cancel()
  w.clock.advance(1000)
  t.same(w.seen, [], 'cancelled')
  t.equal(w.clock.pending, 0)
})

t.test('a newer attempt replaces a pending one: one try, at the newer time', async t => {
  const w = world([100])
  w.pacer.backoff()
  w.pacer.after(30)
  w.clock.advance(200)
  t.same(w.seen, ['try@30'])
})

t.test('proved suspects are tried; none: a backoff round; a restart or cancel makes an older answer moot', async t => {
  const w = world([40], [true, false])
  w.pacer.prove()
  await flush()
  t.same(w.seen, ['try@0'], 'a suspect answered: tried at once')
  w.pacer.prove()
  await flush()
  w.clock.advance(40)
  t.same(w.seen, ['try@0', 'refill', 'try@40'], 'none answered: the next round after the backoff')
  const late = world([])
  late.pacer.prove()
  late.pacer.restart()
  late.answers[0](true)
  await flush()
  t.same(late.seen, [], 'a restart made the older proof moot')
  late.pacer.prove()
  late.pacer.cancel()
  late.answers[1](true)
  await flush()
  t.same(late.seen, [], 'the close made it moot')
  late.pacer.prove()
  late.state.idle = false
  late.answers[2](true)
  await flush()
  t.same(late.seen, [], 'a replacement is being opened: the answer is moot')
})
