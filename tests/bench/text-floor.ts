/**
 * The floor under the text hook: the same listener (uWebSockets.js) and the same upstream client (undici)
 * with nothing between them. A POST's body is read and forwarded as it came to the upstream; the
 * upstream's answer is written back as it came. No credential, no schema, no mapping, no metrics, no
 * deadline: what any uWS + undici proxy costs on this machine, so the gateway's own work per request is
 * the difference. `npm run bench -- text --floor` runs it beside the gateway and nginx, one mode each:
 *
 * - `request`:   `Pool.request` (undici's promise API; a Readable body per answer, read with `.text()`);
 * - `dispatch`:  `Pool.dispatch` with a raw handler gathering the chunks (what the gateway uses);
 * - `pipelined`: the same, with `pipelining: 8` on 16 connections (several requests in flight on each).
 *
 * Run as a child: `node text-floor.js <port> <upstream origin> <mode> <connections>`; prints `listening`.
 */
import { Pool, type Dispatcher } from 'undici'
import * as uWS from 'uWebSockets.js'
import { spawn } from 'node:child_process'
import { exited, freePort, procCpu, rssBytes, sleep, stopChild, Tail, track } from './lib'

export const FLOOR_MODES = ['request', 'dispatch', 'pipelined'] as const
export type FloorMode = (typeof FLOOR_MODES)[number]

/** A raw dispatch handler: the answer's chunks and status, then one callback. */
class Gather implements Dispatcher.DispatchHandler {
  private status = 0
  private readonly chunks: Buffer[] = []
  constructor(private readonly done: (status: number, body: Buffer | null, err: Error | null) => void) {}
  /** Its presence tells undici this is a new-style (controller) handler. */
  onRequestStart(): void {}
  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode
  }
  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.chunks.push(chunk)
  }
  onResponseEnd(): void {
    this.done(this.status, this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks), null)
  }
  onResponseError(_c: Dispatcher.DispatchController, err: Error): void {
    this.done(0, null, err)
  }
}

function serve(port: number, origin: string, mode: FloorMode, connections: number): void {
  const pool = new Pool(origin, {
    connections: mode === 'pipelined' ? 16 : connections,
    pipelining: mode === 'pipelined' ? 8 : 1
  })
  const path = '/text/bench'
  const headers = { 'content-type': 'application/json' }
  const answer = (res: uWS.HttpResponse, state: { aborted: boolean }, status: number, body: Buffer | string): void => {
    if (state.aborted) return
    res.cork(() => {
      res.writeStatus(status === 200 ? '200 OK' : `${status} Error`)
      res.writeHeader('content-type', 'application/json')
      res.end(body)
    })
  }
  uWS
    .App()
    .post('/*', (res, _req) => {
      const state = { aborted: false }
      res.onAborted(() => {
        state.aborted = true
      })
      const parts: Buffer[] = []
      res.onData((chunk, isLast) => {
        parts.push(Buffer.from(new Uint8Array(chunk)))
        if (!isLast) return
        const body = parts.length === 1 ? parts[0] : Buffer.concat(parts)
        if (mode === 'request') {
          pool.request({ method: 'POST', path, headers, body }).then(
            async r => answer(res, state, r.statusCode, await r.body.text()),
            () => answer(res, state, 502, '{}')
          )
        } else {
          pool.dispatch(
            { origin, method: 'POST', path, headers, body },
            new Gather((status, b, err) => answer(res, state, err === null ? status : 502, b ?? '{}'))
          )
        }
      })
    })
    .listen('127.0.0.1', port, ok => {
      if (!ok) {
        console.error(`text-floor: cannot listen on ${port}`)
        process.exit(1)
      }
      console.log('listening')
    })
}

/** A floor proxy started as a child of the bench: its pid, port, CPU and RSS. */
export interface Floor {
  mode: FloorMode
  pid: number
  port: number
  cpuUs: () => number
  rss: () => number
  alive: () => boolean
  stop: () => Promise<void>
}

export async function startFloor(mode: FloorMode, upstream: string, connections: number): Promise<Floor> {
  const port = await freePort()
  const tail = new Tail()
  const child = track(
    spawn(process.execPath, [__filename, String(port), upstream, mode, String(connections)], {
      env: { ...process.env, BENCH_PARENT_PID: String(process.pid) },
      stdio: ['ignore', 'pipe', 'pipe']
    })
  )
  child.stdout!.on('data', (d: Buffer) => tail.add(d))
  child.stderr!.on('data', (d: Buffer) => tail.add(d))
  const deadline = performance.now() + 10_000
  while (!tail.toString().includes('listening')) {
    if (exited(child) || performance.now() > deadline)
      throw new Error(`text-floor (${mode}) did not start:\n${tail.toString()}`)
    await sleep(50)
  }
  const pid = child.pid!
  return {
    mode,
    pid,
    port,
    cpuUs: () => procCpu(pid).total,
    rss: () => rssBytes(pid),
    alive: () => !exited(child),
    stop: async () => await stopChild(child, 2000)
  }
}

if (require.main === module) {
  const [port, origin, mode, connections] = process.argv.slice(2)
  if (!(FLOOR_MODES as readonly string[]).includes(mode)) {
    console.error(`text-floor: mode must be one of ${FLOOR_MODES.join(', ')}`)
    process.exit(2)
  }
  // The bench's parent going away ends this child too.
  const parent = Number(process.env.BENCH_PARENT_PID)
  if (parent > 1)
    setInterval(() => {
      if (process.ppid !== parent) process.exit(0)
    }, 500).unref()
  serve(Number(port), origin, mode as FloorMode, Number(connections))
}
