import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

let root: string | undefined

/** The package's own folder (holds schemas/, mappings/, ops/), found from this file whether run from source or dist/. */
export function packageRoot(): string {
  if (root !== undefined) return root
  let dir = __dirname
  for (;;) {
    const pkg = join(dir, 'package.json')
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'assist-gateway') {
      root = dir
      return root
    }
    const up = dirname(dir)
    if (up === dir) throw new Error(`cannot find the assist-gateway package root above ${__dirname}`)
    dir = up
  }
}

/** The package's version (package.json). */
export function version(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version
}
