import t from 'tap'
import { existsSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { blocksOf, examplePages, isShell, markdownUnder, ROOT } from '../../helpers/doc-blocks'

// The README is a front page into docs/; every relative link and anchor of either resolves; every shell
// example a reader may paste is marked to be run by tests/integration/docs-examples.test.ts (or skipped on
// purpose), and each expected output follows a block that is run.

const PAGES = ['README.md', ...markdownUnder('docs')]

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>()
  const seen = new Map<string, number>()
  for (const line of withoutFences(markdown).split('\n')) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (h === null) continue
    const base = h[1]
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
      .replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

function withoutFences(markdown: string): string {
  return markdown.replace(/^(\s*)(`{3,})[^\n]*\n[\s\S]*?\n\s*\2\s*$/gm, '')
}

/** The text with fenced blocks and inline code blanked (links inside them are not links). */
function withoutCode(markdown: string): string {
  return withoutFences(markdown).replace(/`[^`\n]*`/g, '')
}

t.test('every relative link of the README and docs/ resolves, anchors included', async t => {
  for (const page of PAGES) {
    const text = readFileSync(join(ROOT, page), 'utf8')
    const links = [...withoutCode(text).matchAll(/\]\(([^)\s]+)\)/g)].map(m => m[1])
    for (const link of links) {
      if (/^[a-z]+:/i.test(link)) continue
      const [path, anchor] = link.split('#')
      const target = path === '' ? join(ROOT, page) : join(ROOT, dirname(page), path)
      const where = `${page}: ${link}`
      if (!existsSync(target)) {
        t.fail(`${where}: ${relative(ROOT, target)} does not exist`)
        continue
      }
      if (anchor === undefined) continue
      if (statSync(target).isDirectory() || !target.endsWith('.md')) {
        t.fail(`${where}: an anchor into something that is not a page`)
        continue
      }
      t.ok(anchorsOf(readFileSync(target, 'utf8')).has(anchor), `${where}: the anchor is a heading of the page`)
    }
  }
})

t.test('every repository path the README and docs/ name in code spans exists', async t => {
  for (const page of PAGES) {
    const text = readFileSync(join(ROOT, page), 'utf8')
    for (const m of text.matchAll(
      /`((?:gateway|ops|schemas|mappings|examples|tests|scripts|docs|bin|\.ci)\/[\w./-]*)`/g
    ))
      t.ok(existsSync(join(ROOT, m[1])), `${page}: ${m[1]} exists`)
  }
})

t.test('every shell block a reader may paste is run by the examples test, or skipped on purpose', async t => {
  for (const page of examplePages()) {
    const blocks = blocksOf(page)
    blocks.forEach((b, i) => {
      if (isShell(b)) t.not(b.mark.kind, 'none', `${b.file}:${b.line}: mark it doc-test, or doc-skip`)
      if (b.mark.kind === 'output') {
        const before = blocks[i - 1]
        t.ok(
          before !== undefined && before.mark.kind === 'run',
          `${b.file}:${b.line}: an expected output follows a doc-test block that is run`
        )
      }
    })
  }
  const tested = examplePages()
    .flatMap(p => blocksOf(p))
    .filter(b => b.mark.kind === 'run')
  t.ok(tested.length >= 20, `${tested.length} blocks are run`)
})

t.test(
  'the README is a front page: short, with both quick-start examples, and links into each kind of page',
  async t => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    t.ok(readme.split('\n').length <= 200, `the README has ${readme.split('\n').length} lines (at most 200)`)
    for (const kind of ['getting-started', 'concepts', 'how-to', 'reference'])
      t.match(readme, `](docs/${kind}/`, `the README links into docs/${kind}/`)
    const run = blocksOf('README.md').filter(b => b.mark.kind === 'run')
    t.ok(
      run.some(b => b.text.includes('simulate audio')),
      'the audio example is run'
    )
    t.ok(
      run.some(b => b.text.includes('simulate text')),
      'the text example is run'
    )
    t.match(readme, 'DEMO_VENDOR_PORT', 'the README says how to move the demo vendor')
  }
)
