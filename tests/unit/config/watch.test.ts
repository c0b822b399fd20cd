import t from 'tap'
import { mkdirSync, renameSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../../gateway/config/load'
import { configFiles, filesDigest, watchConfig } from '../../../gateway/config/watch'
import { FakeClock } from '../../helpers/fake-clock'

const ROUTES =
  'routes:\n  demo:\n    mapping: mappings/json-events.yaml\n    upstreams: [{ name: a, audio: "ws://127.0.0.1:9/x" }]\n'

t.test('the watched files are the config file and every mapping it names, tees included', async t => {
  const dir = t.testdir({
    'g.yaml':
      'routes:\n  a:\n    mapping: mappings/json-events.yaml\n    upstreams: [{ name: x, audio: "ws://127.0.0.1:9/x" }]\n' +
      '    tee: [{ name: copy, mapping: mappings/passthrough.yaml, upstreams: [{ name: y, audio: "ws://127.0.0.1:9/y" }] }]\n' +
      '  b:\n    mapping: mappings/json-events.yaml\n    upstreams: [{ name: x, audio: "ws://127.0.0.1:9/x" }]\n'
  })
  const files = configFiles(loadConfig(join(dir, 'g.yaml'), {}))
  t.equal(files.length, 3, 'each file once')
  t.equal(files[0], join(dir, 'g.yaml'))
  t.match(files[1], /mappings\/json-events\.yaml$/)
  t.match(files[2], /mappings\/passthrough\.yaml$/)
})

t.test('a change of contents asks for one reload; a touch or a rewrite of the same bytes asks for none', async t => {
  const dir = t.testdir({ 'g.yaml': ROUTES, 'other.txt': 'x' })
  const file = join(dir, 'g.yaml')
  const clock = new FakeClock()
  let reloads = 0
  const w = watchConfig({ files: () => [file], reload: () => reloads++, clock, intervalMs: 5000 })
  t.teardown(w.close)
  t.equal(w.check(), false, 'nothing changed')
  utimesSync(file, new Date(), new Date(Date.now() + 10_000))
  writeFileSync(join(dir, 'other.txt'), 'y')
  writeFileSync(file, ROUTES)
  t.equal(w.check(), false, 'same bytes, another mtime, a neighbour written: no reload')
  writeFileSync(file, `${ROUTES}log: { level: debug }\n`)
  clock.advance(5000)
  t.equal(reloads, 1, 'the interval compares and finds the change')
  clock.advance(5000)
  t.equal(reloads, 1, 'once per change')
  t.equal(w.check(), false)
})

t.test('a Kubernetes ConfigMap update (the ..data symlink swapped to a new folder) is a change', async t => {
  const dir = t.testdir({ '..2026_01': { 'g.yaml': ROUTES }, '..2026_02': { 'g.yaml': `${ROUTES}# v2\n` } })
  symlinkSync('..2026_01', join(dir, '..data'))
  symlinkSync(join('..data', 'g.yaml'), join(dir, 'g.yaml'))
  const file = join(dir, 'g.yaml')
  const before = filesDigest([file])
  let reloads = 0
  const w = watchConfig({ files: () => [file], reload: () => reloads++, clock: new FakeClock(), intervalMs: 5000 })
  t.teardown(w.close)
  // The kubelet's swap: a new link beside, renamed over ..data (atomic), the old folder removed.
  symlinkSync('..2026_02', join(dir, '..data_tmp'))
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'))
  rmSync(join(dir, '..2026_01'), { recursive: true })
  t.not(filesDigest([file]), before, 'the file name reads the new contents')
  t.equal(w.check(), true)
  t.equal(reloads, 1)
})

t.test('a missing file is a state of its own: its disappearance and its return are changes', async t => {
  const dir = t.testdir({ 'g.yaml': ROUTES })
  const file = join(dir, 'g.yaml')
  let reloads = 0
  const w = watchConfig({ files: () => [file], reload: () => reloads++, clock: new FakeClock(), intervalMs: 5000 })
  t.teardown(w.close)
  rmSync(file)
  t.equal(w.check(), true, 'gone (the reload refuses it and changes nothing)')
  writeFileSync(file, ROUTES)
  t.equal(w.check(), true, 'back')
  t.equal(reloads, 2)
})

t.test('a file system event compares after the settle time, once for a burst of events', async t => {
  const dir = t.testdir({ 'g.yaml': ROUTES })
  const file = join(dir, 'g.yaml')
  const clock = new FakeClock()
  let reloads = 0
  const w = watchConfig({ files: () => [file], reload: () => reloads++, clock, intervalMs: 60_000, settleMs: 200 })
  t.teardown(w.close)
  writeFileSync(file, `${ROUTES}# a\n`)
  writeFileSync(file, `${ROUTES}# b\n`)
  // The events arrive on the event loop: wait for them to arm the settle timer, then move the clock.
  for (let i = 0; i < 100 && clock.pending < 2; i++) await new Promise(r => setTimeout(r, 10))
  t.equal(clock.pending, 2, 'the interval and one settle timer')
  clock.advance(200)
  t.equal(reloads, 1, 'one reload for both writes')
  w.close()
  t.equal(clock.pending, 0, 'close disarms every timer')
})

t.test('a folder that cannot be watched is told, and the interval still compares', async t => {
  const dir = t.testdir({ 'g.yaml': ROUTES })
  const missing = join(dir, 'nowhere', 'g.yaml')
  const told: string[] = []
  const w = watchConfig({
    files: () => [missing],
    reload: () => {},
    clock: new FakeClock(),
    intervalMs: 5000,
    onWatchError: d => told.push(d)
  })
  t.teardown(w.close)
  t.same(told, [join(dir, 'nowhere')])
  mkdirSync(join(dir, 'nowhere'))
  writeFileSync(missing, ROUTES)
  t.equal(w.check(), true, 'its file appearing is still a change')
})
