import { readdirSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Every `*.test.ts` of a folder of tests/unit, in one process (tests/unit/<folder>.suite.ts): a unit test
 * opens no socket and starts no process, so the cost of a file is mostly starting Node, tsx and tap
 * (about 0.8 s of CPU each); one process per folder keeps `npm test` quick. Each file still runs alone:
 * `npx tap tests/unit/audio/session.test.ts`. Files load in name order, their tests run in that order.
 */
export function runFolder(dir: string): void {
  for (const file of readdirSync(dir)
    .filter(f => f.endsWith('.test.ts'))
    .sort())
    require(join(dir, file))
}
