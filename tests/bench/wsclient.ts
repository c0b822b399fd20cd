/**
 * `npm run bench -- wsclient [--frames N] [--batch B] [--conns C]`
 *
 * Which WebSocket client should carry audio to the vendor: CPU µs per 160-byte binary frame sent by
 * (a) `ws` and (b) undici's WebSocket, to the same local uWS sink (a child process that counts frames).
 * Only this (sending) process's CPU is measured (process.cpuUsage), from the first send until the
 * clients' bufferedAmount is back to 0. Frames go out in batches of B per setImmediate tick, as an
 * ArrayBuffer (what the gateway's per-frame path hands to its client), first over one connection (the
 * library's own cost; writes may coalesce when the socket backs up), then round-robin over C
 * connections (default 100: like the gateway, every frame is one write(2) on an idle socket). Each
 * client runs twice per mode (interleaved, after an unmeasured warm-up); the better run counts.
 */
import WebSocket from 'ws'
import { WebSocket as UndiciWebSocket } from 'undici'
import { cpus } from 'node:os'
import { fmt, fmtInt, FRAME_BYTES, numberFlag, pin, progress, Report, round, Sink, sleep } from './lib'

export const WSCLIENT_FLAGS = ['frames', 'batch', 'conns']

const HIGH_WATER = 1 << 20
const BINARY = { binary: true } as const

interface Client {
  send: (data: ArrayBuffer) => void
  buffered: () => number
  close: () => void
}

async function openWs(url: string): Promise<Client> {
  const ws = new WebSocket(url, { perMessageDeflate: false })
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
  ws.on('error', () => {})
  return { send: d => ws.send(d, BINARY), buffered: () => ws.bufferedAmount, close: () => ws.terminate() }
}

async function openUndici(url: string): Promise<Client> {
  const ws = new UndiciWebSocket(url)
  ws.binaryType = 'arraybuffer'
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve(), { once: true })
    ws.addEventListener(
      'error',
      e => reject(new Error(`undici WebSocket: ${String((e as { message?: unknown }).message ?? 'error')}`)),
      { once: true }
    )
  })
  ws.addEventListener('error', () => {})
  return { send: d => ws.send(d), buffered: () => ws.bufferedAmount, close: () => ws.close() }
}

interface Run {
  usPerFrame: number
  framesPerSec: number
}

/**
 * One run: `frames` frames in ticks of `batch` (one setImmediate each), spread round-robin over `conns`
 * connections. As on the gateway's per-frame path, the target socket's bufferedAmount is checked before
 * each send (above HIGH_WATER the tick ends and sending resumes 1 ms later).
 */
async function measure(kind: 'ws' | 'undici', sink: Sink, frames: number, batch: number, conns: number): Promise<Run> {
  const open = kind === 'ws' ? openWs : openUndici
  const clients = await Promise.all(Array.from({ length: conns }, async () => await open(sink.url)))
  await sink.ask('reset-all')
  const payload = new ArrayBuffer(FRAME_BYTES)
  new Uint8Array(payload).fill(0xff)
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  await new Promise<void>(resolve => {
    let sent = 0
    const drained = (): void => {
      if (clients.every(c => c.buffered() === 0)) resolve()
      else setTimeout(drained, 1)
    }
    const pump = (): void => {
      const end = Math.min(frames, sent + batch)
      while (sent < end) {
        const c = clients[sent % conns]
        if (c.buffered() > HIGH_WATER) {
          setTimeout(pump, 1)
          return
        }
        c.send(payload)
        sent++
      }
      if (sent < frames) setImmediate(pump)
      else drained()
    }
    pump()
  })
  const cpu = process.cpuUsage(cpu0)
  const wallMs = performance.now() - t0
  // Not measured: wait until the sink has every frame (proves they were all really sent).
  const deadline = performance.now() + 15_000
  let got = 0
  for (;;) {
    got = (await sink.ask('stats')).received
    if (got >= frames || performance.now() > deadline) break
    await sleep(20)
  }
  for (const c of clients) c.close()
  if (got !== frames) throw new Error(`${kind}: the sink received ${got} of ${frames} frames`)
  return { usPerFrame: (cpu.user + cpu.system) / frames, framesPerSec: frames / (wallMs / 1000) }
}

interface ModeResult {
  conns: number
  ws: Run
  undici: Run
  wsRuns: Run[]
  undiciRuns: Run[]
}

async function runMode(sink: Sink, frames: number, batch: number, conns: number): Promise<ModeResult> {
  // Unmeasured warm-up of both code paths (JIT, socket buffers).
  for (const kind of ['ws', 'undici'] as const)
    await measure(kind, sink, Math.max(1000, Math.floor(frames / 10)), batch, conns)
  const runs: Record<'ws' | 'undici', Run[]> = { ws: [], undici: [] }
  for (let i = 0; i < 2; i++) {
    for (const kind of ['ws', 'undici'] as const) {
      const r = await measure(kind, sink, frames, batch, conns)
      progress(
        `wsclient: ${conns} connection(s): ${kind} run ${i + 1}: ${fmt(r.usPerFrame, 3)} µs/frame, ${fmtInt(r.framesPerSec)} frames/s`
      )
      runs[kind].push(r)
    }
  }
  const best = (rs: Run[]): Run => rs.reduce((a, b) => (b.usPerFrame < a.usPerFrame ? b : a))
  return { conns, ws: best(runs.ws), undici: best(runs.undici), wsRuns: runs.ws, undiciRuns: runs.undici }
}

export async function runWsClient(flags: Map<string, string>): Promise<Record<string, unknown>> {
  const frames = numberFlag(flags, 'frames', 200_000, { integer: true, min: 1000, max: 100_000_000 })
  const batch = numberFlag(flags, 'batch', 100, { integer: true, min: 1, max: 100_000 })
  const conns = numberFlag(flags, 'conns', 100, { integer: true, min: 1, max: 10_000 })
  const modes = conns === 1 ? [1] : [1, conns]
  progress(
    `wsclient: ${fmtInt(frames)} frames of ${FRAME_BYTES} B per run, batches of ${batch}; ws and undici twice each, over ${modes.join(' and ')} connection(s)`
  )
  const sink = await Sink.start(0)
  // Sender and sink on different cores (the sender's CPU is what is measured).
  const cores = cpus().length
  const pinned = cores >= 2 && pin(process.pid, '0') && pin(sink.pid, String(cores - 1))
  const results: ModeResult[] = []
  try {
    for (const c of modes) results.push(await runMode(sink, frames, batch, c))
  } finally {
    await sink.stop()
  }
  const r = new Report(
    `wsclient: sender CPU per ${FRAME_BYTES} B binary frame to a local uWS sink (${fmtInt(frames)} frames per run, batches of ${batch} per setImmediate, best of 2)`
  )
  for (const m of results) {
    r.section(
      m.conns === 1
        ? '1 connection (library cost; a backed-up socket lets writes coalesce, so this varies run to run)'
        : `${m.conns} connections, frames round-robin (gateway-like: one write(2) per frame on an idle socket)`
    )
    r.row(
      'ws',
      `${fmt(m.ws.usPerFrame, 3)} µs/frame  (${fmtInt(m.ws.framesPerSec)} frames/s; runs: ${m.wsRuns.map(x => fmt(x.usPerFrame, 3)).join(', ')})`
    )
    r.row(
      'undici WebSocket',
      `${fmt(m.undici.usPerFrame, 3)} µs/frame  (${fmtInt(m.undici.framesPerSec)} frames/s; runs: ${m.undiciRuns.map(x => fmt(x.usPerFrame, 3)).join(', ')})`
    )
    r.row('undici / ws', `${fmt(m.undici.usPerFrame / m.ws.usPerFrame, 2)} ×`)
  }
  r.section('setup')
  r.row('CPU pinning (taskset)', pinned ? `sender on core 0, sink on core ${cores - 1}` : 'none')
  r.print()
  const json = (m: ModeResult): Record<string, unknown> => ({
    conns: m.conns,
    wsUsPerFrame: round(m.ws.usPerFrame),
    undiciUsPerFrame: round(m.undici.usPerFrame),
    undiciOverWs: round(m.undici.usPerFrame / m.ws.usPerFrame),
    wsRuns: m.wsRuns.map(x => round(x.usPerFrame)),
    undiciRuns: m.undiciRuns.map(x => round(x.usPerFrame))
  })
  return { frames, batch, modes: results.map(json) }
}
