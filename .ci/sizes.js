#!/usr/bin/env node
// Sizes of gateway/ (STYLE.md, issue 31): no file over 400 lines and no function over 80 lines. A function is
// any function-like node the TypeScript compiler sees (declaration, method, constructor, accessor, arrow,
// function expression), measured from its first line to its last; a nested function counts inside its
// parent too. Generated code (a file whose first lines say `@generated`) is left out. Prints every
// violation as `file:line: what` and exits 1 when there is one.
'use strict'
const { readFileSync } = require('node:fs')
const { execFileSync } = require('node:child_process')
const ts = require('typescript')

const MAX_FILE_LINES = 400
const MAX_FUNCTION_LINES = 80

const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', 'gateway/*.ts'], { encoding: 'utf8' })
  .split('\n')
  .filter(f => f.endsWith('.ts'))

/** What a function-like node is called in a report. */
function nameOf(node, sf) {
  if (node.name !== undefined) return node.name.getText(sf)
  if (ts.isConstructorDeclaration(node)) return 'constructor'
  const parent = node.parent
  if (parent !== undefined && (ts.isVariableDeclaration(parent) || ts.isPropertyDeclaration(parent)))
    return parent.name.getText(sf)
  if (parent !== undefined && ts.isPropertyAssignment(parent)) return parent.name.getText(sf)
  return '(anonymous)'
}

const problems = []
for (const file of files) {
  let text
  try {
    text = readFileSync(file, 'utf8')
  } catch {
    continue // listed by git, deleted in the work tree
  }
  if (/@generated/.test(text.split('\n', 5).join('\n'))) continue
  const lines = text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length
  if (lines > MAX_FILE_LINES) problems.push(`${file}: ${lines} lines (at most ${MAX_FILE_LINES})`)
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const visit = node => {
    if (ts.isFunctionLike(node) && node.body !== undefined) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line
      const last = sf.getLineAndCharacterOfPosition(node.getEnd()).line
      const length = last - first + 1
      if (length > MAX_FUNCTION_LINES)
        problems.push(`${file}:${first + 1}: ${nameOf(node, sf)} is ${length} lines (at most ${MAX_FUNCTION_LINES})`)
    }
    ts.forEachChild(node, visit)
  }
  visit(sf)
}

for (const p of problems) console.log(p)
if (problems.length > 0) {
  console.log(`${problems.length} size limit(s) exceeded in gateway/`)
  process.exit(1)
}
