#!/usr/bin/env node
'use strict'
// `npm start`'s prestart: compile the TypeScript (tsc -p tsconfig.json) only when dist/ is missing a
// compiled file or is older than its source or than tsconfig.json. A current build starts at once.
const { spawnSync } = require('node:child_process')
const { readdirSync, statSync } = require('node:fs')
const { join, relative } = require('node:path')

const root = join(__dirname, '..')
// The folders tsconfig.json compiles ("include"), each .ts to dist/<same path>.js.
const SOURCES = ['gateway', join('tests', 'bench')]

function mtime(file) {
  try {
    return statSync(file).mtimeMs
  } catch {
    return null
  }
}

function* tsFiles(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) yield* tsFiles(p)
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) yield p
  }
}

/** Why a build is needed, or null when dist/ is current. */
function staleReason() {
  const tsconfig = mtime(join(root, 'tsconfig.json')) ?? 0
  for (const folder of SOURCES) {
    for (const src of tsFiles(join(root, folder))) {
      const rel = relative(root, src)
      const out = mtime(join(root, 'dist', rel.replace(/\.ts$/, '.js')))
      if (out === null) return `${rel} is not compiled yet`
      if (out < mtime(src)) return `${rel} changed since the last build`
      if (out < tsconfig) return 'tsconfig.json changed since the last build'
    }
  }
  return null
}

const reason = staleReason()
if (reason !== null) {
  console.error(`assist-gateway: ${reason}: compiling (tsc -p tsconfig.json)`)
  const tsc = require.resolve('typescript/bin/tsc', { paths: [root] })
  const r = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { cwd: root, stdio: 'inherit' })
  process.exitCode = r.status ?? 1
}
// Each schema's validator as code (scripts/precompile-schemas.js): after a build, or when missing or older
// than its schema. Without them the gateway compiles each schema at start, which is correct but slower.
if (process.exitCode === undefined || process.exitCode === 0) {
  const schemas = readdirSync(join(root, 'schemas')).filter(f => f.endsWith('.schema.json'))
  const stale = schemas.some(f => {
    const made = mtime(join(root, 'dist', 'gateway', 'validate', 'precompiled', f.replace(/\.schema\.json$/, '.js')))
    return reason !== null || made === null || made < mtime(join(root, 'schemas', f))
  })
  if (stale) {
    const r = spawnSync(process.execPath, [join(root, 'scripts', 'precompile-schemas.js')], {
      cwd: root,
      stdio: 'inherit'
    })
    process.exitCode = r.status ?? 1
  }
}
