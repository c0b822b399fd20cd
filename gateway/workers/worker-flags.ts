/**
 * V8's young generation in each worker: semi-spaces of 1 MiB. Under the audio path's steady allocation
 * (a view per platform frame, a message per vendor result) V8 grows them towards 16 MiB each, memory a
 * process then keeps: about 24 MiB of RSS per worker for garbage that dies young at any size. Measured
 * with `npm run bench -- audio --memory` (docs/reference/benchmarks.md): RSS per leg at 1,000 legs from
 * 70 to 40 KiB, the CPU per frame unchanged. A `--max-semi-space-size` the operator gives (NODE_OPTIONS,
 * or node's own flags to `serve`) wins.
 */
export const YOUNG_GENERATION_FLAG = '--max-semi-space-size=1'

/** The node flags a worker is forked with: the main process's own, and the young generation's size unless given. */
export function workerExecArgv(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string = process.env.NODE_OPTIONS ?? ''
): string[] {
  const given = [...execArgv, nodeOptions].some(a => a.includes('--max-semi-space-size'))
  return given ? [...execArgv] : [...execArgv, YOUNG_GENERATION_FLAG]
}
