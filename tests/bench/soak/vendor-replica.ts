/**
 * One vendor replica of the soak bench, as its own process (forked by fleet.ts, so it can be SIGKILLed,
 * SIGSTOPped and started again on its port): the bundled strict Deepgram emulator
 * (gateway/tools/real-vendors.ts) with `sequencedFrames`, so each session reports which numbered frames
 * arrived and when. Spoken to over IPC: `pause` / `resume` (stop and restart reading every socket),
 * `open` (sessions open now), `sessions` (every session's report). Answers {id, ...}.
 */
import { startRealVendor } from '../../../gateway/tools/real-vendors'

interface Ask {
  id: number
  cmd: 'pause' | 'resume' | 'open' | 'sessions'
}

async function main(): Promise<void> {
  const port = Number(process.env.SOAK_VENDOR_PORT ?? 0)
  const vendor = await startRealVendor({
    kind: 'deepgram',
    port,
    apiKey: process.env.SOAK_VENDOR_KEY,
    name: process.env.SOAK_VENDOR_NAME,
    sequencedFrames: true
  })
  process.on('message', (m: Ask) => {
    const send = (body: Record<string, unknown>): void => {
      process.send?.({ id: m.id, ...body })
    }
    if (m.cmd === 'pause') vendor.pauseAll()
    else if (m.cmd === 'resume') vendor.resumeAll()
    if (m.cmd === 'sessions') send({ sessions: vendor.sessions() })
    else send({ open: vendor.openSessions() })
  })
  process.once('disconnect', () => process.exit(0))
  process.send?.({ listening: vendor.port })
}

main().catch((err: unknown) => {
  process.send?.({ error: String(err) })
  process.exit(1)
})
