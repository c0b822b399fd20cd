import t, { type Test } from 'tap'
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { cpSync, type Dirent, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'
import { builtCli } from '../helpers/cli'
import { type Block, blocksOf, examplePages, ROOT } from '../helpers/doc-blocks'
import { until } from '../helpers/gateway'
import { quietPort } from '../helpers/process'
import { needRedis } from '../helpers/redis'

// Every example a reader pastes, run as the reader would: the marked shell blocks of the README, the
// getting-started pages and the how-to guides (tests/helpers/doc-blocks.ts says how blocks are marked),
// in a copy of the working tree as a clone gives it (node_modules linked from this checkout, dist/ copied
// with its times, so `npm start` does not rebuild), each block in a fresh bash with a plain environment.
// A block's output (stdout and stderr together) is compared line for line with the `doc-output` block
// after it, `…` standing for any text. The ports the docs name are mapped to free ports (in the blocks'
// text, and for `npm start` through PORT, METRICS_PORT, ADMIN_PORT and DEMO_VENDOR_PORT, as a reader
// whose ports are taken would do), and the docs' Redis URL to REDIS_URL. A long-running block
// (`doc-test serve=URL`) keeps running while later pages of its lane use it, until one starts another.
// Lanes run side by side, each with its own ports: a reader's pages in order, per set of servers.

/** The pages with blocks to run, by lane, in the order a reader meets them. */
const LANES: Record<string, string[]> = {
  // The newcomer's path and everything that runs against `npm start`.
  'npm start': [
    'docs/getting-started/first-call.md',
    'README.md',
    'docs/how-to/debug-a-silent-call.md',
    'docs/how-to/monitor-and-alert.md',
    'docs/how-to/upgrade-and-reload.md',
    'docs/how-to/run-a-fleet.md'
  ],
  'gateways of their own': [
    'docs/how-to/add-a-vendor.md',
    'docs/how-to/token-auth.md',
    'docs/how-to/serve-several-customers.md'
  ],
  'a fleet on Redis': ['docs/getting-started/fleet.md']
}

/** The ports the docs may name; each lane maps each one to a free port. */
const DOC_PORTS = [8080, 8081, 8082, 9101, 9201, 9464, 9465, 9474, 9475, 9476, 9484, 9485, 9486]
const DOC_REDIS = 'redis://127.0.0.1:6379'

let copy = ''
let redisUrl = ''
/** The fleet's own key prefix (examples/fleet.yaml reads it), so a run never meets another's state. */
const fleetKeyPrefix = `docs-examples-${process.pid}-${Date.now()}:`

/** `…` in an expected line stands for any text; everything else is literal. */
function outputMatches(expected: string, actual: string): boolean {
  const want = expected.replace(/\s+$/, '').split('\n')
  const got = actual.replace(/\s+$/, '').split('\n')
  if (want.length !== got.length) return false
  return want.every((line, i) => {
    const re = line
      .trimEnd()
      .replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
      .replace(/…/g, '.*')
    return new RegExp(`^${re}$`).test(got[i].trimEnd())
  })
}

function kill(child: ChildProcess): void {
  try {
    // The block's own process group (bash, npm, the gateway, its workers and emulator): this test started it.
    process.kill(-child.pid!, 'SIGKILL')
  } catch {
    /* gone already */
  }
}

async function up(url: string): Promise<boolean> {
  try {
    return (await fetch(url, { signal: AbortSignal.timeout(2000) })).ok
  } catch {
    return false
  }
}

interface Server {
  key: string
  page: string
  child: ChildProcess
  output: () => string
  exited: boolean
}

/** One lane: its ports, its running servers, and the shell its blocks run in. */
class Lane {
  readonly ports = new Map<number, number>()
  readonly servers = new Map<string, Server>()

  async init(): Promise<void> {
    for (const p of DOC_PORTS) this.ports.set(p, await quietPort())
  }

  rewrite(text: string): string {
    const ported = text.replace(new RegExp(`\\b(${DOC_PORTS.join('|')})\\b`, 'g'), p =>
      String(this.ports.get(Number(p)))
    )
    return ported.split(DOC_REDIS).join(redisUrl)
  }

  /** What a fresh shell of a reader holds, plus the ports a reader whose ports are taken would set. */
  environment(): NodeJS.ProcessEnv {
    return {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LANG: 'C.UTF-8',
      TMPDIR: tmpdir(),
      PORT: String(this.ports.get(8080)),
      METRICS_PORT: String(this.ports.get(9464)),
      ADMIN_PORT: String(this.ports.get(9465)),
      DEMO_VENDOR_PORT: String(this.ports.get(9101)),
      FLEET_KEY_PREFIX: fleetKeyPrefix
    }
  }

  spawn(script: string): { child: ChildProcess; output: () => string } {
    const child = spawn('bash', ['-c', `exec 2>&1\n${script}`], {
      cwd: copy,
      env: this.environment(),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true
    })
    let output = ''
    child.stdout!.on('data', d => {
      output += d
    })
    return { child, output: () => output }
  }

  run(script: string, ms = 60_000): Promise<{ code: number | null; output: string }> {
    const { child, output } = this.spawn(`set -e -o pipefail\n${script}`)
    const timer = setTimeout(() => kill(child), ms)
    return new Promise(resolve =>
      child.on('exit', code => {
        clearTimeout(timer)
        resolve({ code, output: output() })
      })
    )
  }

  async stop(server: Server): Promise<void> {
    this.servers.delete(server.key)
    if (server.exited) return
    const gone = new Promise<void>(resolve => server.child.once('exit', () => resolve()))
    kill(server.child)
    await gone
  }

  async stopAll(): Promise<void> {
    for (const s of [...this.servers.values()]) await this.stop(s)
  }

  /** Start a page's consecutive serve blocks together (or find them running), then wait for each. */
  async serve(t: Test, page: string, blocks: Block[]): Promise<void> {
    const wanted = blocks.map(b => this.rewrite(b.text))
    for (const s of [...this.servers.values()]) if (s.page !== page && !wanted.includes(s.key)) await this.stop(s)
    const started: { block: Block; server: Server; url: string }[] = []
    for (const [i, block] of blocks.entries()) {
      const key = wanted[i]
      const url = this.rewrite(block.mark.kind === 'serve' ? block.mark.url : '')
      let server = this.servers.get(key)
      if (server === undefined) {
        const { child, output } = this.spawn(key)
        const made: Server = { key, page, child, output, exited: false }
        child.on('exit', () => {
          made.exited = true
        })
        this.servers.set(key, made)
        server = made
      }
      started.push({ block, server, url })
    }
    for (const { block, server, url } of started) {
      const ready = await until(async () => server.exited || (await up(url)), 60_000, 100)
      t.ok(ready && !server.exited, `${block.file}:${block.line}: \`${block.text.split('\n')[0]}\` serves ${url}`, {
        output: server.output().slice(-3000)
      })
    }
  }

  /** Every block of one page, in order. */
  async page(t: Test, page: string): Promise<void> {
    const blocks = blocksOf(page)
    for (let i = 0; i < blocks.length; i++) {
      const b = blocks[i]
      const where = `${b.file}:${b.line}`
      switch (b.mark.kind) {
        case 'clone':
          // The test's copy of the working tree stands in for the clone.
          t.match(
            b.text,
            /^git clone \S+ assist-gateway && cd assist-gateway$/,
            `${where}: a clone into assist-gateway`
          )
          break
        case 'install':
          // The checkout's node_modules (linked) stands in for `npm ci`; dist/ was copied as `prepare` builds it.
          t.equal(b.text, 'npm ci', `${where}: the install is npm ci`)
          break
        case 'serve': {
          let j = i
          while (j + 1 < blocks.length && blocks[j + 1].mark.kind === 'serve') j++
          await this.serve(t, page, blocks.slice(i, j + 1))
          i = j
          break
        }
        case 'run': {
          const { code, output } = await this.run(this.rewrite(b.text))
          t.equal(code, 0, `${where}: exits 0`, { output: output.slice(-3000) })
          const next = blocks[i + 1]
          if (next?.mark.kind === 'output') {
            const expected = this.rewrite(next.text)
            t.ok(outputMatches(expected, output), `${where}: the output is as shown at ${next.file}:${next.line}`, {
              found: output,
              wanted: expected
            })
            i++
          }
          break
        }
      }
    }
  }
}

/** The repository's files as a clone has them: git's list, or outside a git checkout (an unpacked copy) every file but the build, the dependencies and the VCS. */
function workingTree(): string[] {
  try {
    return execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'ignore']
    })
      .toString()
      .split('\0')
      .filter(f => f !== '' && existsSync(join(ROOT, f)))
  } catch {
    const skip = new Set(['.git', 'node_modules', 'dist', '.tap', 'coverage'])
    return (readdirSync(ROOT, { recursive: true, withFileTypes: true }) as Dirent[])
      .filter(e => e.isFile())
      .map(e => relative(ROOT, join(e.parentPath, e.name)))
      .filter(f => !skip.has(f.split('/')[0]))
  }
}

t.before(async () => {
  builtCli()
  redisUrl = await needRedis()
  copy = mkdtempSync(join(tmpdir(), 'assist-gateway-docs-'))
  for (const f of workingTree()) {
    mkdirSync(dirname(join(copy, f)), { recursive: true })
    cpSync(join(ROOT, f), join(copy, f), { preserveTimestamps: true })
  }
  cpSync(join(ROOT, 'dist'), join(copy, 'dist'), { recursive: true, preserveTimestamps: true })
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'))
})

t.teardown(() => {
  if (copy !== '') rmSync(copy, { recursive: true, force: true })
})

t.test('every page with examples to run is in a lane, and names only the ports this test maps', async t => {
  const withRuns = examplePages().filter(p => blocksOf(p).some(b => b.mark.kind !== 'skip' && b.mark.kind !== 'none'))
  t.same(withRuns.slice().sort(), Object.values(LANES).flat().sort(), 'LANES lists every page with doc-test blocks')
  for (const page of Object.values(LANES).flat())
    for (const b of blocksOf(page).filter(b => b.mark.kind === 'run' || b.mark.kind === 'serve'))
      for (const m of b.text.replace(DOC_REDIS, '').matchAll(/(?:127\.0\.0\.1:|--port |PORT=)(\d{2,5})/g))
        t.ok(DOC_PORTS.includes(Number(m[1])), `${b.file}:${b.line}: port ${m[1]} is one this test maps`)
})

t.test('the examples, lane by lane', { jobs: Object.keys(LANES).length }, async t => {
  for (const [name, pages] of Object.entries(LANES))
    t.test(name, async t => {
      const lane = new Lane()
      await lane.init()
      t.teardown(() => lane.stopAll())
      for (const page of pages) await t.test(page, async t => lane.page(t, page))
    })
})
