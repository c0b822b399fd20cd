import t from 'tap'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

// `npm test` runs tests/unit one process per folder (tests/unit/<folder>.suite.ts, tests/helpers/unit-folder.ts,
// which reads the folder's sub-folders too): a folder of unit tests without its suite file would silently not run.
// A sub-folder mirrors a sub-folder of gateway/ (tests/unit/audio/feed/ tests gateway/audio/feed/).
const testsIn = (dir: string): string[] =>
  readdirSync(dir).flatMap(f => {
    const path = join(dir, f)
    if (statSync(path).isDirectory()) return testsIn(path)
    return f.endsWith('.test.ts') ? [path] : []
  })

t.test('every folder of unit tests has its suite file; its sub-folders mirror gateway/', async t => {
  const root = __dirname
  const gateway = join(root, '..', '..', 'gateway')
  for (const name of readdirSync(root)) {
    const dir = join(root, name)
    if (!statSync(dir).isDirectory()) continue
    if (testsIn(dir).length > 0) t.ok(existsSync(`${dir}.suite.ts`), `tests/unit/${name}.suite.ts`)
    for (const sub of readdirSync(dir))
      if (statSync(join(dir, sub)).isDirectory() && testsIn(join(dir, sub)).length > 0)
        t.ok(existsSync(join(gateway, name, sub)), `tests/unit/${name}/${sub} mirrors gateway/${name}/${sub}`)
  }
})
