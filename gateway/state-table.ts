/**
 * Total state tables written a row per state (server/lifecycle-states.ts, server/text-states.ts,
 * workers/supervisor-states.ts, store/redis-link.ts): each row holds a cell per event, in the order of the
 * machine's EVENTS tuple, under `// biome-ignore format` with the events named over the columns. A row's
 * type is a tuple as long as that tuple, so a missing or extra cell, a new event or a new state does not
 * compile; no cell is ever filled in by default. In a table of [action, state] steps a bare action keeps
 * the row's state (`orStay`); where the rows would be too wide, the steps that leave it are named constants
 * above the table. This module imports nothing.
 */

/** One state's row: a cell per event of `Events`, in its order; `Cells` gives each event's cell type. */
export type Row<Events extends readonly string[], Cells extends { readonly [E in Events[number]]: unknown }> = {
  readonly [I in keyof Events]: Events[I] extends keyof Cells ? Cells[Events[I]] : never
}

/** The rows as a table keyed by state and event (`table[state][event]`), each cell made a step by `step`. */
export function byEvent<State extends string, Events extends readonly string[], Cell, Steps>(
  events: Events,
  rows: { readonly [S in State]: readonly Cell[] },
  step: (cell: Cell, state: State) => Steps[keyof Steps]
): { readonly [S in State]: Steps } {
  const table: Record<string, Record<string, unknown>> = {}
  for (const [state, row] of Object.entries(rows) as [State, readonly Cell[]][])
    table[state] = Object.fromEntries(events.map((e, i) => [e, step(row[i], state)]))
  return table as { readonly [S in State]: Steps }
}

/** A cell of a table of [action, state] steps as its step: a step as it is, a bare action keeping the row's state. */
export function orStay<Action extends string, State extends string>(
  cell: Action | readonly [Action, State],
  state: State
): readonly [Action, State] {
  return typeof cell === 'string' ? [cell, state] : cell
}
