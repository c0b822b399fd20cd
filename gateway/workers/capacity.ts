import { readFileSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { Result } from '../result'

// How many worker processes `serve` starts: the CPU the container may use (its cgroup's quota, then the
// cores this process may run on), and whether its memory limit holds that many. Everything is read from
// a cgroup folder given as a parameter, so a test builds one and goes through this same code.

/** Where the cgroup files are: the mounted hierarchy and this process's own membership file. */
export interface CgroupPaths {
  /** The cgroup mount: the v2 hierarchy, or the folder holding one folder per v1 controller. */
  root: string
  /** `/proc/self/cgroup`: one `id:controllers:path` line per hierarchy (`0::/path` for v2). */
  self: string
}

export const SYSTEM_CGROUP: CgroupPaths = { root: '/sys/fs/cgroup', self: '/proc/self/cgroup' }

/**
 * Idle RSS of one process, the figure of docs/concepts/capacity.md (measured 73–104 MiB for the main
 * process and 73–106 MiB per worker, 2026-11-25, AMD EPYC 2-vCPU VM, Node 20.20.2, sampled every
 * second for 50 s: the spread is V8's heap between collections), rounded up. A single process
 * (`--workers 1`) is one worker's figure: it has no main process beside it.
 */
export const IDLE_MIB = { main: 112, worker: 112 } as const

const MIB = 1024 * 1024
/** v1 writes "no limit" as the largest page-aligned 64-bit value; anything this large is no limit. */
const NO_LIMIT_V1 = 2 ** 60

/** A limit read from a cgroup file, with the file it came from. */
export interface Limit {
  value: number
  file: string
  /** What the file said, for the log line (`200000 100000`). */
  raw: string
}

/** Each hierarchy this process is in: the v2 path (the `0::` line) and the v1 path of each controller. */
function membership(self: string): { v2: string | null; v1: Map<string, { mount: string; path: string }> } {
  let text = ''
  try {
    text = readFileSync(self, 'utf8')
  } catch {
    /* not Linux, or no procfs: no cgroup */
  }
  const v1 = new Map<string, { mount: string; path: string }>()
  let v2: string | null = null
  for (const line of text.split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim())
    if (m === null) continue
    if (m[1] === '0' && m[2] === '') v2 = m[3]
    else for (const c of m[2].split(',')) if (c !== '') v1.set(c, { mount: m[2], path: m[3] })
  }
  return { v2, v1 }
}

function exists(dir: string): boolean {
  try {
    return statSync(dir).isDirectory()
  } catch {
    return false
  }
}

function read(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim()
  } catch {
    return null
  }
}

/**
 * The folders whose limits bind this process, nearest first: its own cgroup and every ancestor up to
 * the mount. A container that sees the host's path in /proc/self/cgroup (v1 without a cgroup namespace)
 * has its own cgroup mounted at the root: missing folders are skipped and the mount itself counts.
 */
function chain(mount: string, path: string): string[] {
  const out: string[] = []
  let p = join(mount, path)
  for (;;) {
    if (exists(p)) out.push(p)
    if (p === mount || !p.startsWith(mount)) break
    p = dirname(p)
  }
  return out
}

/** The folders of one controller: the v1 hierarchy when a v1 line names it (a hybrid host), else v2. */
function folders(paths: CgroupPaths, controller: string): { v: 1 | 2; dirs: string[] } | null {
  const m = membership(paths.self)
  const own = m.v1.get(controller)
  if (own !== undefined) {
    const mount = [join(paths.root, own.mount), join(paths.root, controller)].find(exists)
    return mount === undefined ? null : { v: 1, dirs: chain(mount, own.path) }
  }
  if (m.v2 !== null) return { v: 2, dirs: chain(paths.root, m.v2) }
  return null
}

/** The smallest limit along the chain (a parent's limit binds its children too). */
function smallest(found: (Limit | null)[]): Limit | null {
  let best: Limit | null = null
  for (const f of found) if (f !== null && (best === null || f.value < best.value)) best = f
  return best
}

/** CPUs the cgroup's quota allows (quota / period, may be fractional), or null when none is set. */
export function cpuQuota(paths: CgroupPaths = SYSTEM_CGROUP): Limit | null {
  const f = folders(paths, 'cpu')
  if (f === null) return null
  return smallest(
    f.dirs.map(dir => {
      if (f.v === 2) {
        const file = join(dir, 'cpu.max')
        const raw = read(file)
        const [quota, period] = (raw ?? '').split(/\s+/).map(Number)
        return raw !== null && quota > 0 && period > 0 ? { value: quota / period, file, raw } : null
      }
      const file = join(dir, 'cpu.cfs_quota_us')
      const quota = Number(read(file))
      const period = Number(read(join(dir, 'cpu.cfs_period_us')))
      return quota > 0 && period > 0 ? { value: quota / period, file, raw: `${quota} ${period}` } : null
    })
  )
}

/** The cgroup's memory limit in bytes, or null when none is set. */
export function memoryLimit(paths: CgroupPaths = SYSTEM_CGROUP): Limit | null {
  const f = folders(paths, 'memory')
  if (f === null) return null
  return smallest(
    f.dirs.map(dir => {
      const file = join(dir, f.v === 2 ? 'memory.max' : 'memory.limit_in_bytes')
      const raw = read(file) ?? ''
      const bytes = /^\d+$/.test(raw) ? Number(raw) : Number.NaN
      return bytes > 0 && bytes < NO_LIMIT_V1 ? { value: bytes, file, raw } : null
    })
  )
}

/** Idle memory of `workers` processes of `serve` (one: a single process, no main process beside it). */
export function idleBytes(workers: number): number {
  return (workers === 1 ? IDLE_MIB.worker : IDLE_MIB.main + workers * IDLE_MIB.worker) * MIB
}

/** The most workers an idle gateway fits in `bytes` (0: not even one process). */
function fitting(bytes: number): number {
  if (bytes < idleBytes(1)) return 0
  return Math.max(1, Math.floor((bytes / MIB - IDLE_MIB.main) / IDLE_MIB.worker))
}

export interface WorkerPlan {
  workers: number
  /** Where the figure came from, for the start-up log line. */
  source: string
  /** The memory limit the plan was checked against, if any. */
  memoryLimitBytes: number | null
}

/**
 * The worker count: `explicit` (`--workers`, `GATEWAY_WORKERS`) when given, else the cgroup's CPU quota
 * (rounded down, at least 1) bounded by the cores this process may run on (`parallelism`: the affinity
 * mask, `os.availableParallelism()`). Refused, whichever way it was chosen, when the memory limit cannot
 * hold that many idle processes.
 */
export function planWorkers(opts: {
  explicit?: { workers: number; from: string }
  parallelism: number
  paths?: CgroupPaths
}): Result<WorkerPlan> {
  const paths = opts.paths ?? SYSTEM_CGROUP
  let workers: number
  let source: string
  if (opts.explicit !== undefined) {
    workers = opts.explicit.workers
    source = opts.explicit.from
  } else {
    const quota = cpuQuota(paths)
    const cores = `${opts.parallelism} cores this process may run on (the affinity mask)`
    if (quota === null || Math.max(1, Math.floor(quota.value)) >= opts.parallelism) {
      workers = opts.parallelism
      source =
        quota === null ? `${cores}; no CPU quota` : `${cores}; the CPU quota (${quota.file}: ${quota.raw}) allows more`
    } else {
      workers = Math.max(1, Math.floor(quota.value))
      source = `the CPU quota: ${quota.file}: ${quota.raw} = ${round(quota.value)} CPUs, rounded down`
    }
  }
  const memory = memoryLimit(paths)
  if (memory !== null && idleBytes(workers) > memory.value) {
    const most = fitting(memory.value)
    const need = idleBytes(workers) / MIB
    const perProcess =
      workers === 1 ? `${IDLE_MIB.worker} MiB` : `${IDLE_MIB.main} MiB + ${workers} × ${IDLE_MIB.worker} MiB`
    return {
      ok: false,
      error:
        `${workers} worker process${workers === 1 ? '' : 'es'} (${source}) need about ${need} MiB before any call ` +
        `(${perProcess} idle, docs/concepts/capacity.md), more than the memory limit of ${round(memory.value / MIB)} MiB ` +
        `(${memory.file}). ` +
        (most === 0
          ? `Not even one process fits: raise the memory limit to at least ${idleBytes(1) / MIB} MiB.`
          : `At most ${most} fit${most === 1 ? 's' : ''}: set --workers ${most} (or GATEWAY_WORKERS), or raise the ` +
            `memory limit to at least ${need} MiB plus room for the calls.`)
    }
  }
  return { ok: true, value: { workers, source, memoryLimitBytes: memory?.value ?? null } }
}

function round(n: number): string {
  return String(Math.round(n * 100) / 100)
}
