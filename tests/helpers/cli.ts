import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'

/**
 * CLI children run the built command line, `node bin/assist-gateway.js …` (it runs dist/), as an
 * operator does and as CI has it after `npm run build`: starting a child through tap's TypeScript loader
 * costs seconds of CPU per child, which a busy machine turns into timeouts.
 */
const ROOT = join(__dirname, '..', '..')
export const CLI_BIN = join(ROOT, 'bin', 'assist-gateway.js')

let checked: string | null = null

/** Every gateway/**\/*.ts with the dist/ file tsc writes for it. */
function* sources(dir: string): Generator<{ src: string; out: string }> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) yield* sources(p)
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
      yield { src: p, out: join(ROOT, 'dist', relative(ROOT, p)).replace(/\.ts$/, '.js') }
  }
}

/**
 * The path of bin/assist-gateway.js, once dist/ is known to be built from the current sources; throws
 * a clear error otherwise (the tests do not build: two tap jobs building into one dist/ at once would
 * race, and a build belongs before the tests, as in CI).
 */
export function builtCli(): string {
  if (checked !== null) return checked
  const stale: string[] = []
  for (const { src, out } of sources(join(ROOT, 'gateway'))) {
    if (!existsSync(out) || statSync(out).mtimeMs < statSync(src).mtimeMs) stale.push(relative(ROOT, src))
  }
  if (stale.length > 0)
    throw new Error(
      `dist/ is missing or older than the sources (${stale.slice(0, 3).join(', ')}${stale.length > 3 ? `, and ${stale.length - 3} more` : ''}): ` +
        'run `npm run build` first (the CLI tests run the built command line, bin/assist-gateway.js)'
    )
  checked = CLI_BIN
  return checked
}

/** Start the built CLI with these arguments (stdout and stderr piped unless `opts` says otherwise). */
export function spawnCli(args: string[], opts: SpawnOptions = {}): ChildProcess {
  // As an operator runs it: `serve` picks its worker count for the machine unless the env says GATEWAY_WORKERS.
  return spawn(process.execPath, [builtCli(), ...args], { stdio: ['ignore', 'pipe', 'pipe'], ...opts })
}

/** Run the built CLI to its end: exit code, stdout, stderr. */
export async function runCli(
  args: string[],
  env: Record<string, string> = {}
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawnCli(args, { env: { ...process.env, ...env } })
  let stdout = ''
  let stderr = ''
  child.stdout!.on('data', d => {
    stdout += String(d)
  })
  child.stderr!.on('data', d => {
    stderr += String(d)
  })
  // 'close', not 'exit': both pipes are drained by then.
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', c => resolve(c))
  })
  return { code, stdout, stderr }
}

/** A mapping that `check` and `serve` reject when they dry-run it: its sample's result emits a command the platform does not have (line 6). */
export const EMITS_WRONG_MAPPING = [
  'vendor: emits-wrong',
  'audio:',
  '  open: \'{"event": "start"}\'',
  '  results:',
  '    - when: msg.event = "transcript"',
  '      emit: \'{"command": "SHOUT", "text": msg.text}\'',
  '  time: { none: a test mapping }',
  'samples:',
  '  audio:',
  '    - { event: transcript, text: hi }'
].join('\n')
