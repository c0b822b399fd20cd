import t from 'tap'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

// `npm test` runs tests/unit one process per folder (tests/unit/<folder>.suite.ts, tests/helpers/unit-folder.ts):
// a folder of unit tests without its suite file would silently not run, and nested folders are not read.
t.test('every folder of unit tests has its suite file, and holds no nested test folder', async t => {
  const root = __dirname
  for (const name of readdirSync(root)) {
    const dir = join(root, name)
    if (!statSync(dir).isDirectory()) continue
    const entries = readdirSync(dir)
    if (entries.some(f => f.endsWith('.test.ts'))) t.ok(existsSync(`${dir}.suite.ts`), `tests/unit/${name}.suite.ts`)
    for (const sub of entries)
      if (statSync(join(dir, sub)).isDirectory())
        t.notOk(
          readdirSync(join(dir, sub)).some(f => f.endsWith('.test.ts')),
          `tests/unit/${name}/${sub} holds no test file (its suite would not run it)`
        )
  }
})
