import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fill, generatedPages, PAGES, ROOT } from '../../../scripts/docs-reference'

// The configuration, mapping, error and metric references are written by scripts/docs-reference.ts from
// the schemas and catalogues (`npm run docs`); a committed page that differs from what it writes is stale.

t.test('every generated reference page is as `npm run docs` writes it', async t => {
  const pages = generatedPages()
  t.same([...pages.keys()].sort(), Object.keys(PAGES).sort())
  for (const [file, text] of pages) {
    const committed = readFileSync(join(ROOT, file), 'utf8')
    if (committed === text) {
      t.pass(`${file} is current`)
      continue
    }
    const a = committed.split('\n')
    const b = text.split('\n')
    let i = 0
    while (i < a.length && a[i] === b[i]) i++
    t.fail(`${file} is stale: run npm run docs (first difference at line ${i + 1})`, {
      found: a[i],
      wanted: b[i]
    })
  }
})

t.test('a region is filled in place; a missing, unknown or repeated one stops the script', async t => {
  const regions = { r: () => 'fresh' }
  const page = 'intro\n<!-- generated: r (npm run docs) -->\nstale\n<!-- end generated -->\nafter\n'
  t.equal(
    fill('p.md', page, regions),
    'intro\n<!-- generated: r (npm run docs) -->\nfresh\n<!-- end generated -->\nafter\n'
  )
  t.throws(() => fill('p.md', 'no region\n', regions), /no region r/)
  t.throws(() => fill('p.md', page.replace(': r ', ': q '), regions), /unknown generated region q/)
  t.throws(() => fill('p.md', page + page, regions), /appears twice/)
})
