#!/usr/bin/env node
'use strict'
// Run by ops/Dockerfile's build stage: the uWebSockets.js package ships a native binary for every
// platform, architecture and Node ABI (113 MB). Keep only binaries/uws_<platform>_<arch>_<abi>.node of the
// Node running this script (the image's), delete every other .node file of the package (dist/*.node are
// unused copies: the package loads from binaries/), then load the package and fail unless it loaded that
// native binary. A Node whose ABI has no binary fails the build instead of shipping the pure-JS fallback.
//
// usage: node ops/prune-uws.js [PACKAGE_DIR] [--no-load-check]
const { readdirSync, rmSync, statSync, existsSync } = require('node:fs')
const { dirname, join, relative } = require('node:path')

const args = process.argv.slice(2)
const loadCheck = !args.includes('--no-load-check')
const given = args.find(a => !a.startsWith('--'))
const dir = given ?? dirname(require.resolve('uWebSockets.js/package.json', { paths: [process.cwd()] }))
const keep = join(dir, 'binaries', `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`)

if (!existsSync(keep)) {
  console.error(`prune-uws: ${relative(process.cwd(), keep)} does not exist: this Node (ABI ${process.versions.modules})`)
  console.error('has no native uWebSockets.js binary; use the Node version of ops/Dockerfile')
  process.exit(1)
}

function nodeFiles(d) {
  return readdirSync(d).flatMap(name => {
    const p = join(d, name)
    if (statSync(p).isDirectory()) return name === 'node_modules' ? [] : nodeFiles(p)
    return name.endsWith('.node') ? [p] : []
  })
}

let freed = 0
for (const f of nodeFiles(dir)) {
  if (f === keep) continue
  freed += statSync(f).size
  rmSync(f)
}
console.log(`prune-uws: kept ${relative(dir, keep)}, removed ${(freed / 1e6).toFixed(1)} MB of other binaries`)

if (loadCheck) {
  const req = require('node:module').createRequire(join(dir, 'package.json'))
  req(dir)
  const loaded = Object.keys(require.cache).filter(k => k.endsWith('.node'))
  if (!loaded.includes(keep)) {
    console.error(`prune-uws: loading ${dir} did not load ${keep} (loaded: ${loaded.join(', ') || 'no native binary'})`)
    process.exit(1)
  }
}
