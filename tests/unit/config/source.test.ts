import t from 'tap'
import { join } from 'node:path'
import { readSource } from '../../../gateway/config/source'

// A character of a string value found where it is written in the file, whatever the scalar's style
// (YAML 1.2 §7.3 flow scalars with their escapes, §8.1 block scalars with indentation and folding).

const FILE = [
  'plain: a + b',
  "single: 'it''s x'",
  'double: "say \\"hi\\" then\\nx y"',
  'literal: |',
  '  one',
  '    two x',
  'folded: >-',
  '  alpha',
  '  beta x',
  'list:',
  '  - { inner: "p q x" }'
].join('\n')

t.test('the offset of a value character maps to its line and column in the file', async t => {
  const dir = t.testdir({ 'm.yaml': FILE, 'm.json': '{\n  "expr": "a.\\"b\\".x"\n}\n' })
  const s = readSource(join(dir, 'm.yaml'))
  const xOf = (pointer: string): { line: number; col: number } | null => {
    const v = (pointer.split('/').slice(1) as string[]).reduce<any>((o, k) => o[k], s.value)
    return s.at(pointer, (v as string).lastIndexOf('x'))
  }
  t.same(s.at('/plain', 4), { line: 1, col: 12 }, 'plain: the b')
  t.same(xOf('/single'), { line: 2, col: 16 }, "single-quoted: '' counts as one quote")
  t.same(xOf('/double'), { line: 3, col: 27 }, 'double-quoted: \\" and \\n are two characters in the file')
  t.same(xOf('/literal'), { line: 6, col: 9 }, 'literal block: its own line, indentation kept')
  t.same(xOf('/folded'), { line: 9, col: 8 }, 'folded block: the folded line break is a space in the value')
  t.same(xOf('/list/0/inner'), { line: 11, col: 19 }, 'inside a flow mapping in a list')
  t.same(s.at('/plain', 5), { line: 1, col: 13 }, 'just past the end: where an unfinished expression stops')
  t.equal(s.at('/list', 0), null, 'not a string: no offset (callers use where)')
  t.same(s.where('/list/0/missing'), { line: 11, col: 5 }, 'a missing key: where its parent is')
  const j = readSource(join(dir, 'm.json'))
  t.same(j.at('/expr', 6), { line: 2, col: 20 }, 'JSON: escaped quotes')
})
