/**
 * nginx side by side (when installed): a byte tunnel to compare the gateway with, in the same run, on the
 * same upstream, driven by the same load generator. Started in the foreground (`daemon off`) from a temp
 * config on free ports: one worker (plus its master, whose CPU is counted too). Nothing here touches the
 * system's own nginx (its config, pid file and logs are under the temp folder).
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { exited, freePort, httpStatus, onExit, procCpu, rssBytes, sleep, stopChild, Tail, track } from './lib'

const CANDIDATES = ['/usr/sbin/nginx', '/usr/local/sbin/nginx', '/usr/local/nginx/sbin/nginx', '/usr/bin/nginx']

/** The nginx binary, or null when none is installed. */
export function findNginx(): string | null {
  for (const c of CANDIDATES) if (existsSync(c)) return c
  try {
    const p = execFileSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' }).trim()
    return p === '' ? null : p
  } catch {
    return null
  }
}

export function nginxVersion(bin: string): string {
  // nginx -v writes to stderr.
  const r = spawnSync(bin, ['-v'], { encoding: 'utf8' })
  return `${r.stderr ?? ''}${r.stdout ?? ''}`.trim().replace(/^nginx version: /, '') || 'unknown'
}

export interface Nginx {
  child: ChildProcess
  /** Master pid (the one spawned). */
  pid: number
  port: number
  tail: Tail
  /** CPU of master and workers, µs (utime+stime from /proc). */
  cpuUs: () => number
  /** VmRSS of master and workers, bytes. */
  rss: () => number
  stop: () => Promise<void>
}

/** Worker pids of an nginx master (its children in /proc). */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(s => s !== '')
      .map(Number)
  } catch {
    return []
  }
}

/**
 * Start nginx with `server` as the body of its one `server {}` block (listening on a free port) and
 * `http` as extra http-level directives (upstream blocks). Resolves once it answers /nginx-alive.
 */
export async function startNginx(
  bin: string,
  what: string,
  server: (port: number) => string,
  http = ''
): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'assist-gateway-bench-nginx-'))
  onExit(() => rmSync(dir, { recursive: true, force: true }))
  const port = await freePort()
  const conf = `daemon off;
master_process on;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
worker_rlimit_nofile 65536;
events { worker_connections 16384; multi_accept on; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 300s;
  ${http}
  server {
    listen 127.0.0.1:${port} reuseport backlog=4096;
    location = /nginx-alive { return 204; }
${server(port)}
  }
}
`
  const file = join(dir, 'nginx.conf')
  writeFileSync(file, conf)
  const tail = new Tail()
  const child = track(
    spawn(bin, ['-p', dir, '-c', file, '-e', join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] })
  )
  child.stdout!.on('data', (d: Buffer) => tail.add(d))
  child.stderr!.on('data', (d: Buffer) => tail.add(d))
  const deadline = performance.now() + 10_000
  for (;;) {
    if (exited(child)) {
      let log = ''
      try {
        log = readFileSync(join(dir, 'error.log'), 'utf8')
      } catch {
        /* none */
      }
      throw new Error(`nginx (${what}) exited during start-up:\n${tail.toString()}\n${log}`)
    }
    if ((await httpStatus(`http://127.0.0.1:${port}/nginx-alive`, 500)) === 204) break
    if (performance.now() > deadline) throw new Error(`nginx (${what}) did not answer within 10 s:\n${tail.toString()}`)
    await sleep(50)
  }
  const pid = child.pid!
  // On every way out (errors, SIGINT) the workers go too: killing the master alone would orphan them.
  onExit(() => {
    for (const w of childrenOf(pid)) {
      try {
        process.kill(w, 'SIGKILL')
      } catch {
        /* gone */
      }
    }
  })
  const all = (): number[] => [pid, ...childrenOf(pid)]
  return {
    child,
    pid,
    port,
    tail,
    cpuUs: () => all().reduce((s, p) => s + safe(() => procCpu(p).total), 0),
    rss: () => all().reduce((s, p) => s + safe(() => rssBytes(p)), 0),
    // SIGQUIT: graceful; stopChild follows with SIGKILL. The workers exit with their master.
    stop: async () => {
      const workers = childrenOf(pid)
      await stopChild(child, 2000)
      for (const w of workers) {
        try {
          process.kill(w, 'SIGKILL')
        } catch {
          /* gone */
        }
      }
    }
  }
}

/** Every pid of an nginx (master and workers), for pinning. */
export function nginxPids(n: Nginx): number[] {
  return [n.pid, ...childrenOf(n.pid)]
}

function safe(f: () => number): number {
  try {
    const v = f()
    return Number.isFinite(v) ? v : 0
  } catch {
    return 0
  }
}
