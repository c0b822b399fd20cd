import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Every `*.test.ts` of a folder of tests/unit, in one process (tests/unit/<folder>.suite.ts): a unit test
 * opens no socket and starts no process, so the cost of a file is mostly starting Node, tsx and tap
 * (about 0.8 s of CPU each); one process per folder keeps `npm test` quick. Each file still runs alone:
 * `npx tap tests/unit/audio/session/session.test.ts`. Files load in name order, then each sub-folder's (a
 * folder of gateway/ in sub-folders has its tests in the same sub-folders: tests/unit/audio/feed/ and so on).
 */
export function runFolder(dir: string): void {
  const names = readdirSync(dir).sort()
  for (const file of names.filter(f => f.endsWith('.test.ts'))) require(join(dir, file))
  for (const sub of names.filter(f => statSync(join(dir, f)).isDirectory())) runFolder(join(dir, sub))
}
