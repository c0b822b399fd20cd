import t from 'tap'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { parse, stringify } from 'yaml'
import { startRealVendor } from '../../gateway/tools/real-vendors'
import { uniqueFrame } from '../helpers/audio'
import { audioInit } from '../helpers/legs'
import { logged, platformLeg, routeTo, startGateway, startVendor, until, twoVendors } from '../helpers/gateway'

// Issue 12, item 1: audio coalesced towards the vendor (audio.coalesceMs) keeps every byte in order:
// the vendor receives exactly the platform's byte stream, in fewer, larger writes; a partial chunk goes
// on the flush wheel while the leg is open, at its end, and into the replay on failover.

const init = audioInit
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex')
/** Frames [from, to) of leg `leg`, as one byte stream. */
const bytesOf = (leg: number, from: number, to: number): Buffer =>
  Buffer.concat(Array.from({ length: to - from }, (_, i) => uniqueFrame(leg, from + i)))
/** The passthrough vendor's open message is the platform's init message. */
const contactOf = (s: { open: unknown }): number | undefined =>
  (s.open as { executionInfo?: { contactId?: number } } | null)?.executionInfo?.contactId

t.test(
  'passthrough route, 12 legs, 100 ms chunks: each vendor session gets the leg byte for byte, in fewer writes',
  async t => {
    const LEGS = 12
    const FRAMES = 37 // 7 chunks of 5 frames and a partial of 2
    const vendor = await startVendor(t, { kind: 'passthrough', resultEveryFrames: 0 })
    const gw = await startGateway(t, {
      audio: { coalesceMs: 100 },
      routes: { demo: routeTo([vendor], 'mappings/passthrough.yaml') }
    })
    const legs = Array.from({ length: LEGS }, (_, i) => platformLeg(t, gw.url('/audio/demo'), init(500000 + i)))
    t.ok((await Promise.all(legs.map(async l => await l.answer))).every(a => a.command === 'CONNECTED'))
    for (let k = 0; k < FRAMES; k++) legs.forEach((l, i) => l.send(uniqueFrame(i, k)))
    const session = (i: number) => vendor.sessions().find(s => contactOf(s) === 500000 + i)
    // The last two frames of each leg are a partial chunk: the wheel sends them while the leg is open.
    t.ok(
      await until(() => legs.every((_, i) => session(i)?.bytes === FRAMES * 160)),
      'every byte arrives while the legs are still open'
    )
    for (let i = 0; i < LEGS; i++) {
      const s = session(i)!
      t.equal(s.sha256, sha(bytesOf(i, 0, FRAMES)), `leg ${i}: the platform's byte stream, in order`)
      t.ok(s.frames >= 8 && s.frames < FRAMES, `leg ${i}: ${s.frames} vendor writes for ${FRAMES} platform frames`)
      t.same(s.errors, [])
    }
    // A partial chunk at the end of the leg goes before the vendor's close.
    for (let k = FRAMES; k < FRAMES + 3; k++) legs.forEach((l, i) => l.send(uniqueFrame(i, k)))
    for (const l of legs) l.ws.close(1000)
    t.ok(await until(() => legs.every((_, i) => session(i)?.closed === true)))
    for (let i = 0; i < LEGS; i++)
      t.equal(session(i)!.sha256, sha(bytesOf(i, 0, FRAMES + 3)), `leg ${i}: the last partial chunk before the close`)
    const metrics = await (await fetch(gw.adminUrl('/metrics'))).text()
    t.match(
      metrics,
      `assist_gateway_audio_bytes_total{route="demo",direction="to_vendor"} ${LEGS * (FRAMES + 3) * 160}`
    )
  }
)

t.test('json-base64 mapping (Twilio media, no chunkMs): 100 ms media events carry the exact byte stream', async t => {
  const KEY = 'twilio-key-0123456789'
  const emu = await startRealVendor({ kind: 'twilio-media', apiKey: KEY, resultEveryMs: 0 })
  t.teardown(async () => await emu.close())
  const mapping = parse(readFileSync('mappings/twilio-media.yaml', 'utf8'))
  delete mapping.audio.frames.chunkMs
  const file = join(mkdtempSync(join(tmpdir(), 'coalesce-')), 'twilio-coalesced.yaml')
  t.teardown(() => rmSync(dirname(file), { recursive: true, force: true }))
  writeFileSync(file, stringify(mapping))
  const gw = await startGateway(
    t,
    {
      audio: { coalesceMs: 100 },
      routes: {
        x: {
          mapping: file,
          auth: { audio: ['${AUDIO_TOKEN}'] },
          upstreams: [{ name: 'v', audio: emu.url, credential: '${VENDOR_KEY}' }]
        }
      }
    },
    { VENDOR_KEY: KEY }
  )
  const legs = [
    platformLeg(t, gw.url('/audio/x'), init(8501, 'TX')),
    platformLeg(t, gw.url('/audio/x'), init(8502, 'TX'))
  ]
  t.ok((await Promise.all(legs.map(async l => await l.answer))).every(a => a.command === 'CONNECTED'))
  for (let k = 0; k < 52; k++) legs.forEach((l, i) => l.send(uniqueFrame(i, k)))
  for (const l of legs) l.ws.close(1000)
  t.ok(await until(() => emu.sessions().length === 2 && emu.sessions().every(s => s.closed)))
  const got = emu
    .sessions()
    .map(s => s.sha256)
    .sort()
  t.same(
    got,
    [sha(bytesOf(0, 0, 52)), sha(bytesOf(1, 0, 52))].sort(),
    'the decoded payloads are the platform µ-law, in order'
  )
  for (const s of emu.sessions()) {
    t.same(s.errors, [], 'the strict emulator saw no error (sequence numbers, chunk counter, timestamps)')
    t.equal(s.frames, 11, '52 frames: 10 media events of 100 ms and the last 40 ms at the end')
  }
})

t.test(
  'failover with a partial chunk pending: the replacement gets the replay, the partial and the rest, exactly',
  async t => {
    const [a, b] = await twoVendors(t, { kind: 'passthrough', resultEveryFrames: 0 })
    const gw = await startGateway(t, {
      audio: { coalesceMs: 200, replaySeconds: 1, replayRate: 0 },
      routes: { demo: routeTo([a, b], 'mappings/passthrough.yaml') }
    })
    const leg = platformLeg(t, gw.url('/audio/demo'), init(700001))
    t.equal((await leg.answer).command, 'CONNECTED')
    const [first, other] = a.sessions().length === 1 ? [a, b] : [b, a]
    // 200 ms chunks are 10 frames: 23 frames are two chunks and a partial of three.
    for (let k = 0; k < 23; k++) leg.send(uniqueFrame(0, k))
    t.ok(await until(() => first.sessions()[0]?.bytes === 20 * 160), 'two chunks out')
    first.dropAll()
    t.ok(await until(() => logged(gw, 'failover_start')), 'the loss is seen')
    // The partial chunk (frames 20-22) was never written to the lost session: not in its replay, it leads
    // the queue. Unless the wheel wrote it first (the loss took longer than 200 ms to see): then it is replayed.
    const replayFrames = gw.logs.lines.find(l => l.event === 'failover_start')?.replayFrames
    t.ok(replayFrames === 20 || replayFrames === 23, `replayed: ${replayFrames} frames`)
    for (let k = 23; k < 30; k++) leg.send(uniqueFrame(0, k))
    const replacement = () => [...other.sessions(), ...first.sessions().slice(1)][0]
    t.ok(await until(() => replacement()?.ready === true), 'a replacement session is ready')
    for (let k = 30; k < 41; k++) leg.send(uniqueFrame(0, k))
    leg.ws.close(1000)
    t.ok(await until(() => replacement()?.closed === true))
    const lost = first.sessions()[0]
    t.equal(lost.sha256, sha(bytesOf(0, 0, lost.bytes / 160)), 'the lost session had the first frames, in order')
    const r = replacement()
    const replayedFrom = 41 - r.bytes / 160
    t.equal(replayedFrom, 0, 'a second of replay covers the whole call so far')
    t.equal(r.sha256, sha(bytesOf(0, 0, 41)), 'the replay, the partial chunk and every later frame, once, in order')
  }
)
