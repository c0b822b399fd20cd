import t from 'tap'
import { byEvent, orStay, type Row } from '../../gateway/state-table'

// gateway/state-table.ts: the rows of a total table keyed by state and event, and what does not compile.
// The @ts-expect-error lines are checked by `npm run typecheck`: were a short row, a long row, a cell in the
// wrong column or a missing state to compile, the directive itself would fail it.

const EVENTS = ['go', 'stop'] as const
type State = 'idle' | 'busy'
type Event = (typeof EVENTS)[number]
type Step = readonly ['start' | 'end' | 'ignore', State]
interface Cells {
  go: Step | 'start' | 'ignore'
  stop: Step | 'end' | 'ignore'
}

t.test('rows become a table keyed by state and event; a bare action keeps the state', async t => {
  const rows: { readonly [S in State]: Row<typeof EVENTS, Cells> } = {
    idle: [['start', 'busy'], 'ignore'],
    busy: ['ignore', ['end', 'idle']]
  }
  const table: { readonly [S in State]: { readonly [E in Event]: Step } } = byEvent(EVENTS, rows, orStay)
  t.same(table, {
    idle: { go: ['start', 'busy'], stop: ['ignore', 'idle'] },
    busy: { go: ['ignore', 'busy'], stop: ['end', 'idle'] }
  })
  t.same(Object.keys(table.idle), ['go', 'stop'], "the events' order")
  const said: { readonly [S in State]: Record<Event, string> } = byEvent(EVENTS, rows, (cell, state) =>
    typeof cell === 'string' ? cell : `${cell[0]} from ${state}`
  )
  t.same(said.busy, { go: 'ignore', stop: 'end from busy' }, 'each cell is given to step with its row state')
})

t.test(
  'a row is total: a missing or extra cell, a cell in the wrong column or a missing state does not compile',
  async t => {
    // @ts-expect-error: a cell per event
    const short: Row<typeof EVENTS, Cells> = ['ignore']
    // @ts-expect-error: no more cells than events
    const long: Row<typeof EVENTS, Cells> = ['ignore', 'ignore', 'ignore']
    // @ts-expect-error: 'end' is not a cell of the go column
    const misplaced: Row<typeof EVENTS, Cells> = ['end', 'ignore']
    // @ts-expect-error: a row per state
    const missing: { readonly [S in State]: Row<typeof EVENTS, Cells> } = { idle: ['ignore', 'ignore'] }
    t.ok([short, long, misplaced, missing])
  }
)
