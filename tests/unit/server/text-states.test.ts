import fc from 'fast-check'
import t from 'tap'
import {
  type ExchangeAction,
  type ExchangeEvent,
  type ExchangeState,
  type ExchangeStep,
  NEXT
} from '../../../gateway/server/text-states'

// The text exchange's state machine (gateway/server/text-states.ts) as server/text-exchange.ts drives it:
// uWS's callbacks and the hook's answer arrive as events. It has no time of its own (the failure delay
// before a refused credential's answer is the hook's), so no clock is needed.

const STATES = Object.keys(NEXT) as ExchangeState[]
const EVENTS: ExchangeEvent[] = ['read', 'drain', 'body', 'over', 'parsed', 'defer', 'answer', 'abort']

/** The actions a sequence of events leads to, from HEAD, and the state it ends in. */
function run(events: readonly ExchangeEvent[]): { actions: ExchangeAction[]; state: ExchangeState } {
  let state: ExchangeState = 'HEAD'
  const actions: ExchangeAction[] = []
  for (const e of events) {
    const [action, to]: ExchangeStep = NEXT[state][e]
    actions.push(action)
    state = to
  }
  return { actions, state }
}

t.test('a request read, parsed, dispatched and answered', async t => {
  t.same(run(['read', 'body', 'parsed', 'answer']), {
    actions: ['read', 'await-parse', 'dispatch', 'send'],
    state: 'ANSWERED'
  })
  t.same(run(['read', 'body', 'parsed', 'defer', 'answer']).actions.slice(-2), ['defer', 'send'], '`connection: close`')
})

t.test('a body over the limit, read past it or drained to its end, is refused once', async t => {
  t.same(run(['read', 'over', 'answer']).actions, ['read', 'too-large', 'send'])
  t.same(run(['drain', 'over', 'defer', 'answer']), {
    actions: ['drain', 'too-large', 'defer', 'send'],
    state: 'ANSWERED'
  })
})

t.test(
  'the platform going away: before dispatch it is counted at the parse pass; an answer after it is dropped',
  async t => {
    t.same(run(['read', 'body', 'abort', 'parsed']).actions, ['read', 'await-parse', 'ignore', 'count-abort'])
    t.same(run(['read', 'abort', 'body']).actions.at(-1), 'ignore', 'while reading: nothing more, not even a count')
    t.same(run(['drain', 'abort', 'over']).actions.at(-1), 'ignore', 'while draining: no 413')
    t.same(run(['read', 'body', 'parsed', 'abort', 'answer']).actions.at(-1), 'drop', 'the hook answers late: dropped')
    t.same(run(['read', 'body', 'parsed', 'abort', 'defer', 'answer']).actions.slice(-2), ['defer', 'drop'])
    t.same(run(['defer', 'abort', 'answer']), { actions: ['defer', 'ignore', 'drop'], state: 'GONE' }, 'a refused head')
    t.same(run(['read', 'body', 'abort', 'parsed', 'parsed']).actions.at(-1), 'ignore', 'counted once')
  }
)

t.test('every state has a step for every event', async t => {
  for (const s of STATES) t.same(Object.keys(NEXT[s]).sort(), [...EVENTS].sort(), s)
})

const TOUCHES_RES: ReadonlySet<ExchangeAction> = new Set(['read', 'drain', 'send'])

t.test(
  'property: over any events, no undefined step, the response untouched after an abort, answered once',
  async t => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...EVENTS), { maxLength: 40 }), events => {
        let state: ExchangeState = 'HEAD'
        let gone = false
        let sent = 0
        let dispatched = 0
        let bodyRead = false
        for (const e of events) {
          const step: ExchangeStep | undefined = NEXT[state][e]
          if (step === undefined || !STATES.includes(step[1])) return false // no undefined transition
          const [action, to]: ExchangeStep = step
          if (gone && TOUCHES_RES.has(action)) return false // uWS: after an abort, res is never touched
          if (gone && !to.startsWith('GONE')) return false // and the exchange stays gone
          if (action === 'send') sent++
          if (action === 'dispatch') dispatched++
          if (action === 'dispatch' && !bodyRead) return false // a dispatch has a body
          if (action === 'count-abort' && (!bodyRead || dispatched > 0)) return false // left between body and dispatch
          if (action === 'await-parse') bodyRead = true
          if (state === 'ANSWERED' && action !== 'ignore') return false // nothing after the answer
          if (e === 'abort' && state !== 'ANSWERED') gone = true
          state = to
        }
        return sent <= 1 && dispatched <= 1
      }),
      { numRuns: 1000 }
    )
    t.pass('held for 1000 sequences')
  }
)
