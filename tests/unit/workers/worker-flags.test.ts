import t from 'tap'
import { workerExecArgv, YOUNG_GENERATION_FLAG } from '../../../gateway/workers/worker-flags'

// What a worker is forked with (gateway/workers/worker-flags.ts): the main process's node flags, and the
// young generation's size unless the operator gave one.

t.test("a worker gets the main process's flags and a 1 MiB young generation", async t => {
  t.same(workerExecArgv([], ''), [YOUNG_GENERATION_FLAG])
  t.same(workerExecArgv(['--enable-source-maps'], ''), ['--enable-source-maps', YOUNG_GENERATION_FLAG])
  t.equal(YOUNG_GENERATION_FLAG, '--max-semi-space-size=1')
})

t.test("the operator's own size wins, given as a flag or in NODE_OPTIONS", async t => {
  t.same(workerExecArgv(['--max-semi-space-size=8'], ''), ['--max-semi-space-size=8'])
  t.same(workerExecArgv([], '--max-old-space-size=512 --max-semi-space-size=4'), [])
})
