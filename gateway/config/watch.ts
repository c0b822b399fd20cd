import { createHash } from 'node:crypto'
import { type FSWatcher, readFileSync, watch } from 'node:fs'
import { dirname } from 'node:path'
import { type Clock, Timer } from '../clock'
import type { Config } from './types'

/**
 * `serve --watch-config` (or `reload.watch`): the files a config is made of, watched; a change of their
 * contents asks for one reload, as SIGHUP does.
 *
 * The folders are watched, not the files: Kubernetes updates a ConfigMap volume by writing a new folder
 * and swapping the `..data` symlink the file names resolve through, so a watch on the file itself would
 * keep watching the old, never again written copy. Any event in a folder (and, for file systems that send
 * none, every `intervalMs`) compares a digest of the files' contents, read through their symlinks, with the
 * last one: an editor's temporary files, a touch or a second event of one save ask for nothing.
 */
export interface ConfigWatch {
  /** Compare now (the next event or tick would); true when a reload was asked for. */
  check: () => boolean
  close: () => void
}

/** The files one config is read from: the file itself, and each route's and tee's mapping file. */
export function configFiles(config: Config): string[] {
  const files = new Set<string>([config.file])
  for (const r of Object.values(config.routes)) {
    files.add(r.mapping)
    for (const t of r.tee ?? []) files.add(t.mapping)
  }
  return [...files]
}

/** Digest of the files' contents as they read now (a missing file is part of the digest as missing). */
export function filesDigest(files: readonly string[]): string {
  const h = createHash('sha256')
  for (const f of files) {
    h.update(f).update('\0')
    try {
      h.update(readFileSync(f))
    } catch (err) {
      h.update(`unreadable ${(err as NodeJS.ErrnoException).code ?? ''}`)
    }
    h.update('\0')
  }
  return h.digest('hex')
}

export interface WatchOptions {
  /** The files of the config in force (asked again after each change: a reload may name new mapping files). */
  files: () => readonly string[]
  /** Asks for one reload (the caller queues reloads: server/reload.ts `reloader`, or the supervisor's). */
  reload: () => void
  clock: Clock
  /** The fallback comparison's period. */
  intervalMs: number
  /** Events within this long count as one change (an editor's save is several). */
  settleMs?: number
  /** Told when a folder cannot be watched (the interval still compares). */
  onWatchError?: (dir: string, err: Error) => void
}

export function watchConfig(opts: WatchOptions): ConfigWatch {
  const settleMs = opts.settleMs ?? 200
  let last = filesDigest(opts.files())
  const watchers = new Map<string, FSWatcher>()
  const settling = new Timer(opts.clock)
  let closed = false

  const check = (): boolean => {
    if (closed) return false
    const files = opts.files()
    arm(files)
    const now = filesDigest(files)
    if (now === last) return false
    last = now
    opts.reload()
    return true
  }
  const soon = (): void => {
    if (settling.pending || closed) return
    settling.set(settleMs, check)
  }
  const arm = (files: readonly string[]): void => {
    for (const dir of new Set(files.map(f => dirname(f)))) {
      if (watchers.has(dir)) continue
      try {
        const w = watch(dir, { persistent: false }, soon)
        w.on('error', err => {
          watchers.delete(dir)
          opts.onWatchError?.(dir, err)
        })
        watchers.set(dir, w)
      } catch (err) {
        opts.onWatchError?.(dir, err as Error)
      }
    }
  }
  arm(opts.files())
  const tick = opts.clock.setInterval(check, opts.intervalMs)
  return {
    check,
    close: () => {
      closed = true
      opts.clock.clearInterval(tick)
      settling.clear()
      for (const w of watchers.values()) w.close()
      watchers.clear()
    }
  }
}
