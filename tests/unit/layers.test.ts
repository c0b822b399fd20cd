import t from 'tap'
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

// .ci/layers.js (run by `npm run lint`) on a made-up gateway/ tree: it must pass an import that runs down
// the layers and the audio rooms, and fail one that runs up, naming the file and the rooms.
const script = join(__dirname, '..', '..', '.ci', 'layers.js')

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'layers-'))
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  execFileSync('git', ['init', '-q'], { cwd: root })
  return root
}

function check(files: Record<string, string>): { status: number | null; out: string } {
  const root = tree(files)
  try {
    const run = spawnSync(process.execPath, [script, root], { encoding: 'utf8' })
    return { status: run.status, out: run.stdout }
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
}

t.test('this repository passes', async t => {
  const run = spawnSync(process.execPath, [script], { encoding: 'utf8' })
  t.equal(run.status, 0, run.stdout)
})

t.test('an import from a higher audio room fails; from a lower one passes', async t => {
  const down = check({
    'gateway/audio/feed/ring.ts': 'export const N = 1\n',
    'gateway/audio/leg/leg.ts': "import { N } from '../feed/ring'\nexport const M = N\n"
  })
  t.equal(down.status, 0, down.out)
  const up = check({
    'gateway/audio/feed/ring.ts': "import { M } from '../leg/leg'\nexport const N = M\n",
    'gateway/audio/leg/leg.ts': 'export const M = 1\n'
  })
  t.equal(up.status, 1)
  t.match(up.out, 'gateway/audio/feed/ring.ts: imports ../leg/leg (audio/leg is above audio/feed)')
})

t.test('a file of audio/ outside its rooms fails', async t => {
  const run = check({ 'gateway/audio/loose.ts': 'export const N = 1\n' })
  t.equal(run.status, 1)
  t.match(run.out, 'gateway/audio/loose.ts: audio/ has rooms')
})

t.test('an import from a higher layer fails', async t => {
  const run = check({
    'gateway/errors.ts': "import { x } from './server/app'\nexport const y = x\n",
    'gateway/server/app.ts': 'export const x = 1\n'
  })
  t.equal(run.status, 1)
  t.match(run.out, 'gateway/errors.ts: imports ./server/app (server is not below errors')
})
