/**
 * Benchmark sink: a vendor that only listens. `node dist/tests/bench/sink.js --port P` (0 = ephemeral).
 * - First text frame of a connection (the init message, forwarded by the gateway or sent directly by the
 *   load generator): answered with CONNECTED; its executionInfo.contactId names the leg. When a binary
 *   frame comes first (a mapping that sends no init, such as deepgram), its bytes 12-15 name the leg.
 * - Each binary message: counted (`messages`: the gateway's vendor writes), and each 160-byte frame in it
 *   (several when the gateway coalesces): counted; on a known leg, latency = now - the float64 LE stamp at
 *   the frame's byte 0, recorded in a preallocated histogram, and the uint32 LE sequence number at byte 8
 *   checked for order.
 * - A Deepgram CloseStream: answered with Metadata (Deepgram's last message), so the session closes at once.
 * - `--finals-ms N` (0: none): on a connection whose first frame is binary (a Deepgram-speaking route), a
 *   final Deepgram Results (`is_final`, `start` and `duration` in seconds of the stream's audio, as
 *   Deepgram's live-streaming reference gives them) for the audio not yet finalized, every N ms of audio
 *   received: a vendor that finalizes promptly, so the gateway's replay ring releases what it covers.
 * Driven over IPC by the bench: {id, cmd: 'stats' | 'reset-hist' | 'reset-all'} → {id, stats}.
 * Exits when the bench disconnects, on SIGTERM or SIGINT.
 */
import * as uWS from 'uWebSockets.js'
import {
  BACKLOG_WINDOW_MS,
  CONTACT_BASE,
  FRAME_BYTES,
  Histogram,
  LEG_OFFSET,
  nowMs,
  SEQ_OFFSET,
  STAMP_OFFSET,
  type SinkStats
} from './lib'

interface Conn {
  leg: number
  /** Ms of audio received (8 bytes of µ-law per ms) and where the last final ended (`--finals-ms`). */
  audioMs: number
  finalMs: number
  binaryFirst: boolean
  inited: boolean
  nextSeq: number
  frames: number
  openedAt: number
  record: number[] | null
}

const CONNECTED = JSON.stringify({
  command: 'CONNECTED',
  messageType: 'COMMAND',
  message: 'BEGIN AUDIO STREAM',
  parameters: {}
})
const METADATA = JSON.stringify({ type: 'Metadata', channels: 1 })
const MAX_LEGS = 1 << 20

const hist = new Histogram()
let received = 0
/** Binary messages (vendor writes), each holding one or more frames. */
let messages = 0
/** Bytes of those messages (a joined session's message holds both channels). */
let bytes = 0
let open = 0
let opened = 0
let outOfOrder = 0
let unknownLegs = 0
let perLeg = new Uint32Array(1024)
/**
 * After a 'mark': for each connection opened since, [leg, first frame at, first seq, last seq, frames,
 * frames within BACKLOG_WINDOW_MS of the first]: a replacement's first frames are its backlog (replay
 * and queued audio), so that count over the window is the backlog's rate by this sink's clock.
 */

let markAt = Infinity
const sinceMark: number[][] = []

function legCount(leg: number): void {
  if (leg >= perLeg.length) {
    const bigger = new Uint32Array(Math.min(MAX_LEGS, Math.max(leg + 1, perLeg.length * 2)))
    bigger.set(perLeg)
    perLeg = bigger
  }
}

function stats(): SinkStats {
  let top = perLeg.length
  while (top > 0 && perLeg[top - 1] === 0) top--
  return {
    received,
    messages,
    bytes,
    at: nowMs(),
    open,
    opened,
    perLeg: Array.from(perLeg.subarray(0, top)),
    outOfOrder,
    unknownLegs,
    latency: hist.summary(),
    sinceMark: sinceMark.map(r => [...r])
  }
}

/** A final Deepgram Results for [fromMs, toMs) of the stream's audio. */
function finalResults(fromMs: number, toMs: number): string {
  const start = fromMs / 1000
  const duration = (toMs - fromMs) / 1000
  return `{"type":"Results","is_final":true,"speech_final":true,"start":${start},"duration":${duration},"channel":{"alternatives":[{"transcript":"bench","confidence":1}]}}`
}

let finalsMs = 0

function main(): void {
  const i = process.argv.indexOf('--port')
  const port = i === -1 ? 0 : Number(process.argv[i + 1])
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error('--port must be 0-65535')
  const f = process.argv.indexOf('--finals-ms')
  finalsMs = f === -1 ? 0 : Number(process.argv[f + 1])
  if (!(finalsMs >= 0)) throw new Error('--finals-ms must be 0 or more')

  const app = uWS.App().ws<Conn>('/*', {
    compression: uWS.DISABLED,
    maxPayloadLength: 1 << 20,
    idleTimeout: 0,
    maxBackpressure: 1 << 20,
    open: ws => {
      const c = ws.getUserData()
      c.leg = -1
      c.audioMs = 0
      c.finalMs = 0
      c.binaryFirst = false
      c.inited = false
      c.nextSeq = 0
      c.frames = 0
      c.openedAt = nowMs()
      c.record = null
      open++
      opened++
    },
    message: (ws, message, isBinary) => {
      const c = ws.getUserData()
      if (isBinary) {
        // One message may carry several 160-byte frames (the gateway coalesces them: audio.coalesceMs):
        // every frame in it is counted and timed on its own; `messages` counts the writes.
        messages++
        const n = message.byteLength
        bytes += n
        if (c.leg < 0 && !c.inited && n >= LEG_OFFSET + 4) {
          const leg = new DataView(message).getUint32(LEG_OFFSET, true)
          if (leg < MAX_LEGS) {
            legCount(leg)
            c.leg = leg
            c.nextSeq = new DataView(message).getUint32(SEQ_OFFSET, true)
          }
          c.inited = true
          c.binaryFirst = true
        }
        if (finalsMs > 0 && c.binaryFirst) {
          c.audioMs += n / 8
          if (c.audioMs - c.finalMs >= finalsMs) {
            ws.send(finalResults(c.finalMs, c.audioMs), false)
            c.finalMs = c.audioMs
          }
        }
        const dv = c.leg >= 0 ? new DataView(message) : null
        const now = nowMs()
        for (let o = 0; o < n; o += FRAME_BYTES) {
          received++
          if (dv === null || o + SEQ_OFFSET + 4 > n) continue
          hist.record(now - dv.getFloat64(o + STAMP_OFFSET, true))
          const seq = dv.getUint32(o + SEQ_OFFSET, true)
          if (c.frames === 0) {
            c.nextSeq = seq
            if (c.openedAt >= markAt) {
              c.record = [c.leg, now, seq, seq, 0, 0]
              sinceMark.push(c.record)
            }
          }
          c.frames++
          if (c.record !== null) {
            c.record[3] = seq
            c.record[4]++
            if (now < c.record[1] + BACKLOG_WINDOW_MS) c.record[5]++
          }
          if (seq !== c.nextSeq) outOfOrder++
          c.nextSeq = seq + 1
          perLeg[c.leg]++
        }
        return
      }
      if (c.inited) {
        // Deepgram's end of stream (mappings/deepgram*.yaml): answer as Deepgram does, so the gateway
        // closes at once instead of waiting out its closeTimeoutSeconds (bench join drains between phases).
        if (message.byteLength < 64 && Buffer.from(message).toString('utf8').includes('"CloseStream"'))
          ws.send(METADATA, false)
        return
      }
      c.inited = true
      try {
        const init = JSON.parse(Buffer.from(message).toString('utf8')) as { executionInfo?: { contactId?: unknown } }
        const id = init.executionInfo?.contactId
        const leg = typeof id === 'number' ? id - CONTACT_BASE : -1
        if (leg >= 0 && leg < MAX_LEGS) {
          legCount(leg)
          c.leg = leg
        } else {
          unknownLegs++
        }
      } catch {
        unknownLegs++
      }
      ws.send(CONNECTED, false)
    },
    close: () => {
      open--
    }
  })

  app.listen('127.0.0.1', port, socket => {
    if (socket === false) {
      process.send?.({ error: `cannot listen on 127.0.0.1:${port}` })
      process.exit(1)
    }
    process.send?.({ listening: uWS.us_socket_local_port(socket as unknown as uWS.us_socket) })
  })

  process.on('message', (m: { id: number; cmd: string }) => {
    const s = stats()
    if (m.cmd === 'mark') {
      markAt = nowMs()
      sinceMark.length = 0
    } else if (m.cmd === 'reset-hist') {
      hist.reset()
    } else if (m.cmd === 'reset-all') {
      hist.reset()
      received = 0
      messages = 0
      bytes = 0
      opened = open
      outOfOrder = 0
      unknownLegs = 0
      perLeg.fill(0)
    }
    process.send?.({ id: m.id, stats: s })
  })
  // The bench owns this process: when it goes (even by SIGKILL), so does the sink.
  process.on('disconnect', () => process.exit(0))
  process.on('SIGTERM', () => process.exit(0))
  process.on('SIGINT', () => process.exit(0))
}

main()
