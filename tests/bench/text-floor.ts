/**
 * The floor under the text hook: the same listener (uWebSockets.js) and the same upstream client (undici)
 * with nothing between them. A POST's body is read and forwarded as it came to the upstream; the
 * upstream's answer is written back as it came. No credential, no schema, no mapping, no metrics, no
 * deadline: what any uWS + undici proxy costs on this machine, so the gateway's own work per request is
 * the difference. `npm run bench -- text --floor` runs it beside the gateway and nginx, one mode each:
 *
 * - `request`:   `Pool.request` (undici's promise API; a Readable body per answer, read with `.text()`);
 * - `dispatch`:  `Pool.dispatch` with a raw handler gathering the chunks (what the gateway uses);
 * - `pipelined`: the same, with `pipelining: 8` on 16 connections (several requests in flight on each);
 * - `raw`:       the cheapest client Node can run (raw-http.ts: keep-alive `net` sockets, the answer
 *   read up to its Content-Length, nothing else): what a hand-written client could at best save;
 * - `listener`:  no upstream at all: uWS reads the POST and answers a fixed body at once. What the listener
 *   alone costs per request, under any client: the bound on what a uWS-fronted gateway can reach here.
 *
 * Run as a child: `node text-floor.js <port> <upstream origin> <mode> <connections> <answer>`; prints `listening`.
 */
import { Pool, type Dispatcher } from 'undici'
import * as uWS from 'uWebSockets.js'
import { RawPool } from './raw-http'
import { exitWithParent, type ListeningChild, startListeningChild } from './lib'

export const FLOOR_MODES = ['request', 'dispatch', 'pipelined', 'raw', 'listener'] as const
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

function serve(port: number, origin: string, mode: FloorMode, connections: number, fixed: Buffer): void {
  const pool = new Pool(origin, {
    connections: mode === 'pipelined' ? 16 : connections,
    pipelining: mode === 'pipelined' ? 8 : 1
  })
  const path = '/text/bench'
  const up = new URL(origin)
  const raw = new RawPool(up.hostname, Number(up.port || 80), connections, path)
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
        if (mode === 'listener') answer(res, state, 200, fixed)
        else if (mode === 'raw') raw.post(body, (status, b) => answer(res, state, status || 502, b ?? '{}'))
        else if (mode === 'request') {
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

/** A floor proxy started as a child of the bench. */
export interface Floor extends ListeningChild {
  mode: FloorMode
}

/** `answer`: what the `listener` mode answers (the upstream's answer, so the bytes written are the same). */
export async function startFloor(
  mode: FloorMode,
  upstream: string,
  connections: number,
  answer: string
): Promise<Floor> {
  return {
    mode,
    ...(await startListeningChild(__filename, [upstream, mode, String(connections), answer], `text-floor (${mode})`))
  }
}

if (require.main === module) {
  const [port, origin, mode, connections, answer] = process.argv.slice(2)
  if (!(FLOOR_MODES as readonly string[]).includes(mode)) {
    console.error(`text-floor: mode must be one of ${FLOOR_MODES.join(', ')}`)
    process.exit(2)
  }
  exitWithParent()
  serve(Number(port), origin, mode as FloorMode, Number(connections), Buffer.from(answer ?? '{}'))
}
