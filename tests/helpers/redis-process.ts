import { execFile, spawnSync } from 'node:child_process'
import { createServer } from 'node:net'

/**
 * redis-server processes of our own, without tap: what the tests' Redis helpers (redis-servers.ts) and the
 * soak bench (tests/bench/soak/) share. Nothing here talks to a Redis it did not start.
 */
export const haveRedisServer =
  spawnSync('redis-server', ['--version']).status === 0 && spawnSync('redis-cli', ['--version']).status === 0

/** Run redis-cli; resolves its stdout (trimmed), or the error text when it fails. */
export function redisCli(port: number, password: string | undefined, args: string[]): Promise<string> {
  const auth = password === undefined ? [] : ['-a', password, '--no-auth-warning']
  return new Promise(resolve => {
    execFile('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...auth, ...args], { timeout: 10_000 }, (err, out) =>
      resolve(err === null ? String(out).trim() : `ERR ${err.message}`)
    )
  })
}

async function portFree(port: number): Promise<boolean> {
  const s = createServer()
  return await new Promise(resolve => {
    s.once('error', () => resolve(false))
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)))
  })
}

/** A free port below 55535 whose cluster bus port (+10000) is free too. */
export async function freeRedisPort(): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 30_000)
    if ((await portFree(port)) && (await portFree(port + 10_000))) return port
  }
}

/** Arguments of a private redis-server on 127.0.0.1:port that persists nothing (a restart comes back empty). */
export const redisServerArgs = (port: number, dir: string): string[] => [
  '--port',
  String(port),
  '--bind',
  '127.0.0.1',
  '--save',
  '',
  '--appendonly',
  'no',
  '--dir',
  dir
]
