/**
 * Preloaded into the gateway child (`node -r dist/tests/bench/guard.js bin/assist-gateway.js serve ...`):
 * if the bench process disappears without cleaning up (e.g. SIGKILL), the gateway is told to stop
 * (SIGTERM, its own graceful path), its temp folder (config) is removed, and it exits for sure a little
 * later. Polls its parent pid twice a second on an unref'd timer: no work on the gateway's per-frame
 * path, and it never keeps the process alive.
 */
import { rmSync } from 'node:fs'

const parent = Number(process.env.BENCH_PARENT_PID)
const tmp = process.env.BENCH_TMPDIR
// A worker of `serve --workers N` is the gateway's child, not the bench's: its main process is guarded,
// and a worker stops by itself when its main process goes.
if (Number.isInteger(parent) && parent > 1 && process.env.ASSIST_GATEWAY_WORKER === undefined) {
  const timer = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(timer)
    if (tmp?.includes('assist-gateway-bench-')) rmSync(tmp, { recursive: true, force: true })
    process.kill(process.pid, 'SIGTERM')
    setTimeout(() => process.exit(0), 3000).unref()
  }, 500)
  timer.unref()
}

// audio --memory (audio-memory.ts): with --expose-gc, SIGUSR2 asks for a full GC before the bench reads
// the heap (the gateway itself logs and ignores SIGUSR2).
const gc = (globalThis as { gc?: () => void }).gc
if (gc !== undefined) process.on('SIGUSR2', () => gc())
