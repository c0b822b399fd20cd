/**
 * The floor under the audio path: the same listener (uWebSockets.js) and the same vendor client (`ws`)
 * with nothing between them but the coalescing the gateway does by default. Per leg: the init message
 * opens a `ws` client to the sink and is forwarded; the sink's CONNECTED is passed back; each binary
 * platform message is copied into the leg's buffer, and one timer sends every leg's buffer every
 * `coalesceMs` (one write per leg per period, as the gateway's `audio.coalesceMs`); a buffer holding a
 * period's audio (8 bytes a millisecond of 8 kHz µ-law) is written at once, as the gateway's chunk is, so a
 * timer running late on a busy core does not make the floor's writes larger than the gateway's. No credential, no
 * schema, no mapping, no counters, no replay ring, no liveness pings, no failover: what any uWS + `ws`
 * proxy that coalesces costs on this machine, so the gateway's own work per frame is the difference.
 * `npm run bench -- audio --vs-nginx --floor` runs it beside the gateway and nginx.
 *
 * Run as a child: `node audio-floor.js <port> <sink url> <coalesceMs>`; prints `listening`.
 */
import * as uWS from 'uWebSockets.js'
import WebSocket from 'ws'
import { workerExecArgv } from '../../gateway/workers/worker-flags'
import { exitWithParent, type ListeningChild, startListeningChild } from './lib'

interface Leg {
  vendor: WebSocket | null
  /** The frames since the last write (a period's audio: 100 ms is 800 bytes; when full, it is written at once). */
  buf: Buffer
  n: number
}

const legs = new Set<Leg>()

/** One write of what the leg holds (`ws` masks it into a frame of its own, so the buffer is free again). */
function send(leg: Leg): void {
  if (leg.n === 0 || leg.vendor === null || leg.vendor.readyState !== WebSocket.OPEN) return
  leg.vendor.send(leg.buf.subarray(0, leg.n))
  leg.n = 0
}

function serve(port: number, sinkUrl: string, coalesceMs: number): void {
  const chunkBytes = coalesceMs > 0 ? 8 * coalesceMs : 2048
  uWS
    .App()
    .ws<Leg>('/*', {
      compression: uWS.DISABLED,
      idleTimeout: 0,
      maxPayloadLength: 64 * 1024,
      upgrade: (res, req, ctx) => {
        res.upgrade<Leg>(
          { vendor: null, buf: Buffer.allocUnsafe(chunkBytes), n: 0 },
          req.getHeader('sec-websocket-key'),
          req.getHeader('sec-websocket-protocol'),
          req.getHeader('sec-websocket-extensions'),
          ctx
        )
      },
      message: (ws, message, isBinary) => {
        const leg = ws.getUserData()
        if (isBinary) {
          const n = message.byteLength
          if (leg.n + n <= leg.buf.length) {
            leg.buf.set(new Uint8Array(message), leg.n)
            leg.n += n
          }
          if (leg.n >= leg.buf.length) send(leg)
          return
        }
        if (leg.vendor !== null) return
        const init = Buffer.from(new Uint8Array(message)) // a copy: uWS detaches its buffer after the call
        const vendor = new WebSocket(sinkUrl, { perMessageDeflate: false })
        leg.vendor = vendor
        vendor.on('open', () => vendor.send(init, { binary: false }))
        vendor.on('message', (data: Buffer, binary: boolean) => {
          if (!binary) ws.send(data, false)
        })
        vendor.on('error', () => {})
        vendor.on('close', () => {
          legs.delete(leg)
          leg.vendor = null
        })
        legs.add(leg)
      },
      close: ws => {
        const leg = ws.getUserData()
        legs.delete(leg)
        leg.vendor?.close()
      }
    })
    // audio --memory --floor: the heap after a full GC (run with --expose-gc).
    .get('/memory', res => {
      ;(globalThis as { gc?: () => void }).gc?.()
      const m = process.memoryUsage()
      res.end(JSON.stringify({ heapUsed: m.heapUsed, external: m.external }))
    })
    .listen('127.0.0.1', port, ok => {
      if (!ok) {
        console.error(`audio-floor: cannot listen on ${port}`)
        process.exit(1)
      }
      console.log('listening')
    })
  const flush = (): void => {
    for (const leg of legs) send(leg)
  }
  if (coalesceMs > 0) setInterval(flush, coalesceMs)
  else
    setImmediate(function each() {
      flush()
      setImmediate(each)
    })
}

/**
 * The floor proxy, started as a child of the bench with a gateway worker's node flags (its young generation:
 * gateway/workers/worker-flags.ts), so both pay the same collector and only the gateway's own work differs.
 */
export function startAudioFloor(sinkUrl: string, coalesceMs: number, nodeArgs: string[] = []): Promise<ListeningChild> {
  const flags = workerExecArgv(nodeArgs, '')
  return startListeningChild(__filename, [sinkUrl, String(coalesceMs)], 'audio-floor', flags)
}

if (require.main === module) {
  const [port, sinkUrl, coalesceMs] = process.argv.slice(2)
  exitWithParent()
  serve(Number(port), sinkUrl, Number(coalesceMs))
}
