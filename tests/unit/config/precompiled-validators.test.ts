import t from 'tap'
import Ajv from 'ajv'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parse } from 'yaml'
import { packageRoot } from '../../../gateway/paths'
import { precompiledPath, validator } from '../../../gateway/validate/compile'

// The build leaves each schema's validator as code (scripts/precompile-schemas.js); the gateway uses it
// instead of compiling at start. These check that it is there, used, and judges exactly as a fresh compile.
const names = readdirSync(join(packageRoot(), 'schemas'))
  .filter(f => f.endsWith('.schema.json'))
  .map(f => f.slice(0, -'.schema.json'.length))
const fresh = (name: string) =>
  new Ajv({
    allErrors: true,
    useDefaults: true,
    strict: true,
    strictRequired: false,
    allowUnionTypes: true,
    verbose: true
  }).compile(JSON.parse(readFileSync(join(packageRoot(), 'schemas', `${name}.schema.json`), 'utf8')))

t.test('every schema has a current precompiled validator, and it is the one used', async t => {
  t.ok(names.length >= 6)
  for (const name of names) {
    const made = require(precompiledPath(name)) as { validate: unknown }
    t.equal(validator(name), made.validate, `${name}: the build's code, not a compile at start`)
  }
})

t.test('the precompiled config validator fills the same defaults and finds the same problems', async t => {
  const configs: unknown[] = [
    parse(readFileSync(join(packageRoot(), 'ops', 'gateway.yaml'), 'utf8')),
    parse(readFileSync(join(packageRoot(), 'examples', 'fleet.yaml'), 'utf8')),
    { routes: {} },
    { listen: { port: 'x' }, bogus: 1, routes: { a: { mapping: 3 } } },
    { routes: { a: { mapping: 'm.yaml', upstreams: [{ name: 'r', audio: 'ws://x' }], auth: { audio: 7 } } } }
  ]
  const mine = validator('gateway-config')
  const theirs = fresh('gateway-config')
  for (const [i, c] of configs.entries()) {
    const a = structuredClone(c)
    const b = structuredClone(c)
    t.equal(mine(a), theirs(b), `config ${i}: same verdict`)
    t.same(a, b, `config ${i}: same defaults filled`)
    t.same(mine.errors ?? null, theirs.errors ?? null, `config ${i}: same errors, schema included`)
  }
})

t.test('the precompiled mapping validator judges the shipped mappings as a fresh compile does', async t => {
  const dir = join(packageRoot(), 'mappings')
  const mine = validator('mapping')
  const theirs = fresh('mapping')
  for (const f of readdirSync(dir)) {
    const a = parse(readFileSync(join(dir, f), 'utf8'))
    const b = structuredClone(a)
    t.equal(mine(a), theirs(b), f)
    t.same(a, b, `${f}: same defaults filled`)
  }
  const broken = { version: 1, audio: { nothing: true } }
  t.equal(mine(structuredClone(broken)), false)
  theirs(structuredClone(broken))
  t.same(mine.errors, theirs.errors, 'same errors for a broken mapping')
})
