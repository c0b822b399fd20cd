import type { Counter } from 'prom-client'

/** One label set of a hot counter: `inc` is a plain addition; prom-client gets the sum when it collects. */
export interface CountCell {
  inc(): void
}

class Cell implements CountCell {
  n = 0
  constructor(readonly child: { inc(value: number): void }) {}
  inc(): void {
    this.n++
  }
}

/**
 * The children of a counter incremented once per request (text_requests_total, upstream_requests_total):
 * prom-client's own child re-validates and re-hashes its labels on every `inc`, so a request counts into
 * a cell of its own instead, and the cells are added to the counter when it is collected (every scrape,
 * `get()`, a worker's report: the counter's `collect`).
 */
export class CountCells {
  /** By label values: one cell per label set, however often it is asked for (a reload asks again). */
  private readonly cells = new Map<string, Cell>()
  private counter: Counter | null = null

  /** The counter the cells add to; its `collect` MUST call `flush`. */
  bind(counter: Counter): void {
    this.counter = counter
  }

  cell(...labels: string[]): CountCell {
    const key = labels.join('\n')
    let c = this.cells.get(key)
    if (c === undefined) {
      if (this.counter === null) throw new Error('CountCells: a cell asked for before bind')
      c = new Cell(this.counter.labels(...labels))
      this.cells.set(key, c)
    }
    return c
  }

  /** Add what the cells counted since the last collection. */
  flush(): void {
    for (const c of this.cells.values()) {
      if (c.n === 0) continue
      c.child.inc(c.n)
      c.n = 0
    }
  }
}
