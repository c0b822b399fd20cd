/**
 * wrk as the text load generator (when installed): one POST with headers and a body from a temp Lua
 * script, N keep-alive connections, `--latency` percentiles. The same command drives the gateway and
 * nginx, so their figures differ only by what sits between wrk and the upstream.
 */
import { execFile } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export function findWrk(): string | null {
  for (const c of ['/usr/bin/wrk', '/usr/local/bin/wrk']) if (existsSync(c)) return c
  return null
}

export interface WrkResult {
  requests: number
  seconds: number
  requestsPerSecond: number
  /** ms */
  p50: number
  p90: number
  p99: number
  max: number
  non2xx: number
  socketErrors: number
  raw: string
}

/** Write the Lua script that makes every request a POST of `body` with `headers`. */
export function wrkScript(dir: string, name: string, headers: Record<string, string>, body: string): string {
  const file = join(dir, `${name}.lua`)
  const lines = ['wrk.method = "POST"', `wrk.body = ${luaString(body)}`]
  for (const [k, v] of Object.entries(headers)) lines.push(`wrk.headers[${luaString(k)}] = ${luaString(v)}`)
  writeFileSync(file, `${lines.join('\n')}\n`)
  return file
}

function luaString(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`
}

/** Run wrk; `prefix` (e.g. taskset) goes before it. */
export function runWrk(
  bin: string,
  url: string,
  script: string,
  o: { connections: number; threads: number; seconds: number; prefix?: string[] }
): Promise<WrkResult> {
  const args = [
    ...(o.prefix ?? []).slice(1),
    ...(o.prefix !== undefined && o.prefix.length > 0 ? [bin] : []),
    '-t',
    String(o.threads),
    '-c',
    String(o.connections),
    '-d',
    `${o.seconds}s`,
    '--timeout',
    '10s',
    '--latency',
    '-s',
    script,
    url
  ]
  const cmd = o.prefix !== undefined && o.prefix.length > 0 ? o.prefix[0] : bin
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { encoding: 'utf8', timeout: (o.seconds + 30) * 1000 }, (err, stdout, stderr) => {
      if (err !== null) return reject(new Error(`wrk failed: ${err.message}\n${stdout}\n${stderr}`))
      resolve(parseWrk(stdout))
    })
  })
}

function ms(v: string, unit: string): number {
  const n = Number(v)
  if (unit === 'us') return n / 1000
  if (unit === 's') return n * 1000
  if (unit === 'm') return n * 60_000
  return n
}

export function parseWrk(out: string): WrkResult {
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out)
    return m === null ? Number.NaN : ms(m[1], m[2])
  }
  const done = /(\d+) requests in ([\d.]+)(us|ms|s|m),/.exec(out)
  const lat = /^\s+Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s|m)/m.exec(out)
  const rps = /^Requests\/sec:\s+([\d.]+)/m.exec(out)
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out)
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out)
  return {
    requests: done === null ? Number.NaN : Number(done[1]),
    seconds: done === null ? Number.NaN : ms(done[2], done[3]) / 1000,
    requestsPerSecond: rps === null ? Number.NaN : Number(rps[1]),
    p50: pct('50'),
    p90: pct('90'),
    p99: pct('99'),
    max: lat === null ? Number.NaN : ms(lat[1], lat[2]),
    non2xx: non2xx === null ? 0 : Number(non2xx[1]),
    socketErrors: sock === null ? 0 : sock.slice(1).reduce((s, x) => s + Number(x), 0),
    raw: out
  }
}
