#!/usr/bin/env node
// The layers of gateway/ (docs/concepts/architecture.md), checked on every `npm run lint`: a module imports only
// its own folder or a folder of a lower layer (two folders of one layer never import each other: audio/
// and text/ stay apart), and each library is imported only where that page says. Import cycles are
// Biome's noImportCycles. Prints every violation as `file: imports X (why)` and exits 1 when there is one.
'use strict'
const { readFileSync } = require('node:fs')
const { execFileSync } = require('node:child_process')
const { dirname, join, normalize, relative } = require('node:path')

/** Lowest first. A top-level file of gateway/ is its own unit, named without `.ts`. */
const LAYERS = [
  ['errors', 'result', 'clock', 'paths', 'state-table'],
  ['telemetry', 'validate'],
  ['store', 'config'],
  ['upstream'],
  ['auth', 'mapping'],
  ['route'],
  ['audio', 'text'],
  ['server'],
  ['workers'],
  ['tools'],
  ['check', 'cli-usage', 'cli-store'],
  ['cli-serve', 'cli-tools', 'cli-calls'],
  ['cli']
]
const RANK = new Map(LAYERS.flatMap((units, rank) => units.map(u => [u, rank])))

/**
 * The rooms of a unit in sub-folders, lowest first (docs/concepts/architecture.md): a file of a room imports
 * its own room or a lower one, and every file of the unit is in a room. audio/: what goes to a vendor
 * (feed), one vendor connection (connection), where a call's session lives (placement), the vendor session
 * and what shares it (session), the platform leg (leg).
 */
const ROOMS = { audio: ['feed', 'connection', 'placement', 'session', 'leg'] }
const roomOf = rel => rel.split('/')[1]

/** Where each library may be imported (a unit, or a unit/file). */
const LIBRARIES = {
  'uWebSockets.js': ['server', 'workers/main-admin.ts', 'check'],
  ioredis: ['store/redis.ts'],
  'rate-limiter-flexible': ['store/redis.ts'],
  jsonata: ['mapping'],
  undici: ['upstream'],
  ws: ['upstream', 'tools'],
  ajv: ['validate'],
  pino: ['telemetry'],
  'prom-client': ['telemetry', 'workers/aggregate-metrics.ts'],
  yaml: ['config'],
  jose: ['auth'],
  '@opentelemetry/api': ['telemetry'],
  '@opentelemetry/sdk-trace-base': ['telemetry/tracing.ts'],
  '@opentelemetry/resources': ['telemetry/tracing.ts'],
  '@opentelemetry/exporter-trace-otlp-proto': ['telemetry/tracing.ts'],
  '@opentelemetry/exporter-trace-otlp-http': ['telemetry/tracing.ts'],
  '@grpc/grpc-js': ['upstream', 'tools'],
  '@grpc/proto-loader': ['upstream/protos.ts'],
  // Not imported: upstream/protos.ts resolves its folder, where the mappings' proto files are read from.
  'google-proto-files': ['upstream/protos.ts'],
  'google-auth-library': ['upstream/google-auth.ts']
}

// The tree to check: this repository, or the one given (tests/unit/tools/layers.test.ts checks a made-up one).
const root = process.argv[2] ?? join(__dirname, '..')
const unitOf = rel => {
  const first = rel.split('/')[0]
  return first.endsWith('.ts') ? first.slice(0, -3) : first
}
const allowed = (places, rel) => places.some(p => rel === p || unitOf(rel) === p)

const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', 'gateway/*.ts'], { cwd: root })
  .toString()
  .split('\n')
  .filter(f => f.endsWith('.ts'))
const problems = []
for (const file of files) {
  const rel = relative('gateway', file)
  const unit = unitOf(rel)
  const rank = RANK.get(unit)
  if (rank === undefined) {
    problems.push(`${file}: ${unit} is in no layer of .ci/layers.js`)
    continue
  }
  const rooms = ROOMS[unit]
  if (rooms !== undefined && !rooms.includes(roomOf(rel))) {
    problems.push(`${file}: ${unit}/ has rooms (${rooms.join(', ')}): a file of it belongs in one`)
    continue
  }
  let text
  try {
    text = readFileSync(join(root, file), 'utf8')
  } catch {
    continue // listed but deleted in the working tree
  }
  for (const m of text.matchAll(/^(?:import|export)\s[^'"]*?from\s+'([^']+)'/gm)) {
    const spec = m[1]
    if (spec.startsWith('.')) {
      const target = relative('gateway', normalize(join(dirname(file), spec)))
      if (target.startsWith('..')) continue
      const other = unitOf(target.endsWith('.ts') ? target : `${target}.ts`)
      if (other === unit) {
        if (rooms === undefined) continue
        const mine = rooms.indexOf(roomOf(rel))
        const theirs = rooms.indexOf(roomOf(target))
        if (theirs > mine)
          problems.push(`${file}: imports ${spec} (${unit}/${roomOf(target)} is above ${unit}/${roomOf(rel)})`)
        continue
      }
      const otherRank = RANK.get(other)
      if (otherRank === undefined) problems.push(`${file}: imports ${spec} (${other} is in no layer)`)
      else if (otherRank >= rank)
        problems.push(`${file}: imports ${spec} (${other} is not below ${unit}: layer ${otherRank} >= ${rank})`)
      continue
    }
    const lib = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]
    const places = LIBRARIES[lib]
    if (places !== undefined && !allowed(places, rel))
      problems.push(`${file}: imports ${lib} (only ${places.join(', ')} may)`)
  }
}
for (const p of problems) console.log(p)
if (problems.length > 0) {
  console.log(`${problems.length} layer violation(s) in gateway/ (see .ci/layers.js and docs/concepts/architecture.md)`)
  process.exit(1)
}
