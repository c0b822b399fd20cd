import type { ChildProcess } from 'node:child_process'
import { spawnCli } from './cli'
import { until } from './gateway'
import { freePort } from './process'

type T = { ok: (value: unknown, message: string) => unknown; teardown: (fn: () => unknown) => void }

/**
 * A bundled vendor emulator (`vendor --kind <kind>`) as a process of its own, so that a test can SIGSTOP
 * or SIGKILL it mid-call; `args` are its further options. Continued and killed at teardown.
 */
export async function vendorProcess(
  t: T,
  kind: string,
  args: string[] = ['--result-every-frames', '0']
): Promise<{ port: number; child: ChildProcess }> {
  const port = await freePort()
  const child: ChildProcess = spawnCli(['vendor', '--kind', kind, '--port', String(port), ...args])
  t.teardown(() => {
    try {
      child.kill('SIGCONT')
    } catch {}
    child.kill('SIGKILL')
  })
  let out = ''
  child.stdout?.on('data', d => {
    out += String(d)
  })
  t.ok(await until(() => out.includes('vendor emulator on'), 20_000), 'the vendor process is up')
  return { port, child }
}
