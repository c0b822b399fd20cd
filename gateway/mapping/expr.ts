import jsonata from 'jsonata'

/**
 * A compiled JSONata expression: evaluate it on one input object (`I`: the audio `MappingInput` or the
 * text `TextInput`). Never used per audio frame.
 */
export type Expr<I = unknown> = (input: I) => Promise<unknown>

/** Compile the source found at a mapping file's JSON pointer; null when absent or when it does not compile (recorded). */
export type CompileAt = (pointer: string, source: string | null | undefined) => Expr | null

/**
 * Limits of one evaluation: a runaway expression fails (counted, logged) instead of stalling the
 * process. `timeoutMs` is the evaluation's own running time: evaluations of many legs interleave at
 * awaits, and each is charged only the time up to its own steps, so many well-behaved expressions
 * running at once do not fail each other.
 */
export const EXPRESSION_LIMITS = { timeoutMs: 1000, maxDepth: 500 }

/** Where an evaluation reads the time (milliseconds, monotonic). Tests pass a fake one. */
export type ExprClock = () => number

export interface ExprOptions {
  clock?: ExprClock
  limits?: { timeoutMs: number; maxDepth: number }
}

interface Budget {
  depth: number
  /** Milliseconds charged to this evaluation so far. */
  used: number
  /** It has taken a step: the time up to its later steps is its own work. */
  started: boolean
}

type Env = { lookup: (name: string) => unknown; isParallelCall?: boolean }

/**
 * When the last step of any evaluation ran. The time from there to the next step is the work done to
 * reach that step, so it is charged to the evaluation that takes it: interleaved evaluations split
 * the time between them instead of each counting all of it.
 */
let lastStamp = 0

/**
 * Compile a JSONata source into an `Expr` with depth and time limits. JSONata calls its entry/exit
 * hooks around every step; the budget lives in a per-evaluation binding, so concurrent evaluations of
 * one compiled expression each keep their own. Throws JSONata's own error for a syntax error.
 */
export function compileExpr(source: string, options: ExprOptions = {}): Expr {
  const clock = options.clock ?? (() => performance.now())
  const limits = options.limits ?? EXPRESSION_LIMITS
  const compiled = jsonata(source)
  const step = (env: Env, delta: number): void => {
    const st = env.lookup('__gwBudget') as Budget | undefined
    if (st === undefined || env.isParallelCall === true) return
    const now = clock()
    if (st.started) st.used += now - lastStamp
    st.started = true
    lastStamp = now
    st.depth += delta
    if (st.depth > limits.maxDepth) {
      throw Object.assign(new Error(`expression deeper than ${limits.maxDepth}`), { code: 'LIMIT_DEPTH' })
    }
    if (st.used > limits.timeoutMs) {
      throw Object.assign(new Error(`expression ran longer than ${limits.timeoutMs} ms`), { code: 'LIMIT_TIME' })
    }
  }
  const hooks = compiled as unknown as { assign: (name: symbol, fn: unknown) => void }
  hooks.assign(Symbol.for('jsonata.__evaluate_entry'), (_e: unknown, _i: unknown, env: Env) => step(env, 1))
  hooks.assign(Symbol.for('jsonata.__evaluate_exit'), (_e: unknown, _i: unknown, env: Env) => step(env, -1))
  return async (input: unknown) => await compiled.evaluate(input, { __gwBudget: { depth: 0, used: 0, started: false } })
}
