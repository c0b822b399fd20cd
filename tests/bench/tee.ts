/**
 * `npm run build && node dist/tests/bench/tee.js [--legs N] [--seconds S]`
 *
 * Gateway CPU per platform frame: a plain leg (one vendor) against a leg with one tee (the same audio to
 * a second vendor, results dropped). The gateway runs as its own process (bin/assist-gateway.js serve);
 * the platform legs and both vendor emulators (passthrough, no results) run here, so the figure is the
 * gateway's alone: utime + stime from /proc/<pid>/stat over the measured window, divided by the frames
 * the platform sent in it. Each run: `legs` legs at 50 frames/s (160-byte µ-law frames) for `seconds`,
 * after a 2 s warm-up.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import WebSocket from 'ws'
import { stringify } from 'yaml'
import { initMessage } from '../../gateway/tools/simulate'
import { startVendorEmulator } from '../../gateway/tools/vendor-emulator'

const ROOT = join(__dirname, '..', '..', '..')
const FRAME = Buffer.alloc(160, 0xff)
const TICKS = 100 // USER_HZ on Linux

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>(resolve => s.listen(0, '127.0.0.1', resolve))
  const port = (s.address() as AddressInfo).port
  await new Promise<void>(resolve => s.close(() => resolve()))
  return port
}

/** CPU seconds (user + system) of a process so far. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / TICKS
}

const sleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

async function openLegs(url: string, n: number, base: number): Promise<WebSocket[]> {
  const legs = await Promise.all(
    Array.from(
      { length: n },
      async (_, i) =>
        await new Promise<WebSocket>((resolve, reject) => {
          const ws = new WebSocket(url, { perMessageDeflate: false })
          ws.on('error', reject)
          ws.on('open', () =>
            ws.send(JSON.stringify(initMessage({ contactId: base + i, busNo: 4594, perspective: 'TX' })))
          )
          ws.once('message', data => {
            const m = JSON.parse(String(data)) as { command: string }
            if (m.command === 'CONNECTED') resolve(ws)
            else reject(new Error(`leg refused: ${String(data)}`))
          })
        })
    )
  )
  return legs
}

/** Send one frame per leg every 20 ms (drift-corrected) for `ms`; returns the frames sent. */
async function stream(legs: WebSocket[], ms: number): Promise<number> {
  const start = performance.now()
  let ticks = 0
  let frames = 0
  while (performance.now() - start < ms) {
    const due = Math.floor((performance.now() - start) / 20) + 1
    for (; ticks < due; ticks++)
      for (const ws of legs) {
        ws.send(FRAME)
        frames++
      }
    await sleep(5)
  }
  return frames
}

async function measure(pid: number, url: string, legs: number, seconds: number, base: number) {
  const ws = await openLegs(url, legs, base)
  await stream(ws, 2000)
  const before = cpuSeconds(pid)
  const frames = await stream(ws, seconds * 1000)
  const cpu = cpuSeconds(pid) - before
  for (const w of ws) w.close(1000)
  await sleep(1000)
  return { frames, cpuSeconds: cpu, microsPerFrame: (cpu * 1e6) / frames }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { legs: { type: 'string' }, seconds: { type: 'string' } } })
  const legs = Number(values.legs ?? 100)
  const seconds = Number(values.seconds ?? 10)
  const primary = await startVendorEmulator({ kind: 'passthrough', resultEveryFrames: 0, name: 'primary' })
  const tee = await startVendorEmulator({ kind: 'passthrough', resultEveryFrames: 0, name: 'tee' })
  const dir = mkdtempSync(join(tmpdir(), 'tee-bench-'))
  const [port, adminPort] = [await freePort(), await freePort()]
  const mapping = join(ROOT, 'mappings', 'passthrough.yaml')
  const config = {
    listen: { host: '127.0.0.1', port },
    admin: { host: '127.0.0.1', port: adminPort },
    health: { active: { kind: 'none' } },
    audio: { reattachGraceSeconds: 0 },
    log: { level: 'warn' },
    routes: {
      plain: { mapping, upstreams: [{ name: 'p', audio: primary.url }] },
      teed: {
        mapping,
        upstreams: [{ name: 'p', audio: primary.url }],
        tee: [{ name: 'shadow', mapping, upstreams: [{ name: 't', audio: tee.url }], results: 'drop' }]
      }
    }
  }
  writeFileSync(join(dir, 'gateway.yaml'), stringify(config))
  const gw = spawn(
    process.execPath,
    [join(ROOT, 'bin', 'assist-gateway.js'), 'serve', '--config', join(dir, 'gateway.yaml')],
    {
      stdio: ['ignore', 'ignore', 'inherit']
    }
  )
  try {
    for (let i = 0; i < 100; i++) {
      const up = await fetch(`http://127.0.0.1:${adminPort}/readyz`).then(
        r => r.status === 200,
        () => false
      )
      if (up) break
      await sleep(100)
    }
    const plain = await measure(gw.pid!, `ws://127.0.0.1:${port}/audio/plain`, legs, seconds, 1_000_000)
    const teed = await measure(gw.pid!, `ws://127.0.0.1:${port}/audio/teed`, legs, seconds, 2_000_000)
    const teeFrames = tee.sessions().reduce((n, s) => n + s.frames, 0)
    console.log(
      JSON.stringify(
        {
          legs,
          seconds,
          plain,
          oneTee: teed,
          teeVendorFrames: teeFrames,
          addedMicrosPerFrame: teed.microsPerFrame - plain.microsPerFrame,
          ratio: teed.microsPerFrame / plain.microsPerFrame
        },
        null,
        2
      )
    )
  } finally {
    gw.kill('SIGKILL')
    await primary.close()
    await tee.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((err: unknown) => {
  console.error(err)
  process.exitCode = 1
})
