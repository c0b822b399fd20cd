#!/usr/bin/env node
'use strict'
// After tsc (`npm run build`): each schema's Ajv validator written as code to
// dist/gateway/validate/precompiled/<name>.js, so no process compiles a schema at start. A validator is
// used only when its fingerprint (Ajv version, options, schema text) matches (gateway/validate/compile.ts).
const { mkdirSync, readdirSync, writeFileSync } = require('node:fs')
const { dirname, join } = require('node:path')

const root = join(__dirname, '..')
const { precompiledPath, precompiledSource } = require(join(root, 'dist', 'gateway', 'validate', 'compile.js'))
const names = readdirSync(join(root, 'schemas'))
  .filter(f => f.endsWith('.schema.json'))
  .map(f => f.slice(0, -'.schema.json'.length))
for (const name of names) {
  const file = precompiledPath(name)
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, precompiledSource(name))
}
